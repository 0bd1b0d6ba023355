//! Differential fuzzing (see `stencil_tests::fuzz`).
//!
//! - `compiled_nests_match_the_ir_interpreter`: the build script's random stencils (half of them
//!   with one or two point functions, which the CPU nest computes per block; every third one
//!   with `#[stencil(fma)]`, against the interpreter of the fused IR), compiled by `#[stencil]`, run over random sub-ranges of random fields (outputs poisoned; a third of them
//!   also fold a value into a `Max` or `Min`, checked against the interpreter's fold); every point
//!   inside the range equals the IR interpreter bit for bit (NaN as NaN), every point outside
//!   keeps the poison. Cases: `STENCIL_FUZZ_STENCILS` (build time, default 48) ×
//!   `STENCIL_FUZZ_RUNS` (default 21).
//! - `compiled_sweeps_match_the_ir_interpreter`: `STENCIL_FUZZ_SWEEPS` (build time, default 24)
//!   random column sweeps (every third fused; forward or backward; carried locals, the level, reads of outputs one
//!   or two levels back) × `STENCIL_FUZZ_RUNS`, against the interpreter walking each column.
//! - `lowering_matches_the_generator`: `STENCIL_FUZZ_CASES` (default 1000) further random
//!   stencils lowered from text (their point functions inlined); the IR interpreter equals the generator's own evaluation, the IR
//!   survives its encoding, and CUDA prints for two strategies; the IR with its point functions
//!   also survives its encoding and prints the depot kernel.
//! - `broken_sources_are_errors_not_panics`: `STENCIL_FUZZ_CASES` random mutations of valid
//!   stencils (tokens deleted, inserted, swapped, offsets made huge or non-literal); lowering gives
//!   `Ok` or `Err`, never a panic, and whatever lowers also prints.
//!
//! A nightly-sized run: `STENCIL_FUZZ_STENCILS=500 STENCIL_FUZZ_SWEEPS=200 STENCIL_FUZZ_RUNS=200 STENCIL_FUZZ_CASES=100000
//! cargo test --release -p stencil-tests --test fuzz` (`.ci/nightly`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use stencil_codegen::ir::{ParamKind, ScalarType};
use stencil_codegen::printer::cuda::{print_kernel, print_reduce_kernel, Geometry, Strategy};
use stencil_codegen::StencilIr;
use stencil_runtime::prelude::*;
use stencil_runtime::reduce::combine;
use stencil_runtime::ReduceOp;
use stencil_tests::fuzz::gen::{Generated, Rng};
use stencil_tests::fuzz::interp::{run_column, run_point, Point, Value};
use stencil_tests::SplitMix64;

mod compiled {
    #![allow(unused_parens, unused_variables, dead_code, clippy::all)]
    use stencil_runtime::prelude::*;
    include!(concat!(env!("OUT_DIR"), "/fuzz_stencils.rs"));
}

/// Seeds of the stencils generated at run time only (the build script uses `0..STENCILS`).
const RUNTIME_SEEDS: u64 = 1 << 32;
/// What outputs hold before a launch: no stencil computes it by chance.
const POISON: f64 = -7.25e300;

/// The IR of a generated stencil's source, its point functions inlined (what the macro embeds
/// and the interpreter runs).
fn lower(source: &str) -> StencilIr {
    let ir = StencilIr::from_source(source).unwrap_or_else(|e| panic!("{source}\n{}", e.kind));
    stencil_codegen::passes::inline_point_fns(&ir)
}

/// [`lower`] of a compiled stencil `g`: with `#[stencil(fma)]` its products fused first, as the
/// macro fuses them (before the point functions are inlined: a point function's value is not
/// fused into the expression that uses it, as a `let` is not).
fn lower_compiled(g: &Generated) -> StencilIr {
    let source = g.source();
    let ir = StencilIr::from_source(&source).unwrap_or_else(|e| panic!("{source}\n{}", e.kind));
    let ir = if g.fma { stencil_codegen::passes::contract(&ir) } else { ir };
    stencil_codegen::passes::inline_point_fns(&ir)
}

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A random input value: mostly moderate, sometimes zero, negative zero or huge.
fn value(rng: &mut SplitMix64) -> f64 {
    match rng.int(0, 19) {
        0 => 0.0,
        1 => -0.0,
        2 => 3.0e200,
        _ => rng.uniform(-2.0, 2.0),
    }
}

/// One random launch of a generated stencil: fields of a random shape (halo 2, either element
/// order) filled with [`value`]s, its scalars, and a random sub-range of the interior.
struct Case {
    shape: Shape3,
    in64: Vec<Field3<f64>>,
    in32: Vec<Field3<f32>>,
    scalars: Vec<f64>,
    begin: [usize; 3],
    end: [usize; 3],
    range: Loop3D,
}

impl Case {
    /// The case of `seed` for `g`, with 1 to `max_n` interior points per axis.
    fn random(g: &Generated, seed: u64, max_n: i64) -> Case {
        let mut rng = SplitMix64::new(seed);
        let n: [usize; 3] = std::array::from_fn(|_| rng.int(1, max_n) as usize);
        let order = if rng.int(0, 1) == 0 { Order::Ijk } else { Order::Kij };
        let shape = Shape3::new(n).halo(2).order(order);
        let mut fill = |_: [isize; 3]| value(&mut rng);
        let (mut in64, mut in32) = (Vec::new(), Vec::new());
        for &f32 in &g.inputs_f32 {
            if f32 {
                in32.push(Field3::from_fn(shape, |p| fill(p) as f32));
            } else {
                in64.push(Field3::from_fn(shape, &mut fill));
            }
        }
        let scalars: Vec<f64> = (0..g.scalars).map(|_| value(&mut rng)).collect();
        let begin: [usize; 3] = std::array::from_fn(|a| 2 + rng.int(0, n[a] as i64 / 2) as usize);
        let end: [usize; 3] = std::array::from_fn(|a| rng.int(begin[a] as i64, 2 + n[a] as i64) as usize);
        let range = Loop3D::from_bounds(shape.extent(), begin, end).expect("a range inside the interior");
        Case { shape, in64, in32, scalars, begin, end, range }
    }
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn compiled_nests_match_the_ir_interpreter() {
    let runs = env_count("STENCIL_FUZZ_RUNS", 21);
    let mut cases = 0;
    for seed in 0..compiled::STENCILS {
        let g = Generated::new(seed);
        let ir = lower_compiled(&g);
        for run in 0..runs {
            let Case { shape, in64, in32, scalars, begin, end, range } = Case::random(&g, seed * 7919 + run, 11);
            let mut outs: Vec<Field3<f64>> = (0..g.outputs).map(|_| Field3::filled(shape, POISON)).collect();
            let reduced = compiled::launch(seed, &range, &in64, &in32, &scalars, &mut outs).expect("launches");
            // Min and Max do not depend on the order of the points (NaN wins wherever it is).
            let mut folded: Vec<f64> =
                g.reductions.iter().map(|ty| if *ty == "Max" { f64::NEG_INFINITY } else { f64::INFINITY }).collect();

            // The interpreter reads the same fields through their parameter order.
            let mut by_param: Vec<(bool, usize)> = Vec::new();
            let (mut i64n, mut i32n) = (0, 0);
            for p in &ir.params {
                if let ParamKind::Field(f) = p.kind {
                    if !f.writable {
                        by_param.push(match f.elem {
                            ScalarType::F32 => (true, post_inc(&mut i32n)),
                            _ => (false, post_inc(&mut i64n)),
                        });
                        continue;
                    }
                }
                by_param.push((false, usize::MAX));
            }
            let outputs: Vec<usize> = (0..ir.params.len())
                .filter(|&p| matches!(ir.params[p].kind, ParamKind::Field(f) if f.writable))
                .collect();
            let reductions: Vec<usize> =
                (0..ir.params.len()).filter(|&p| matches!(ir.params[p].kind, ParamKind::Reduction(_))).collect();
            for storage in shape.storage_points() {
                let global = shape.to_global(storage);
                let inside = (0..3).all(|a| begin[a] <= storage[a] && storage[a] < end[a]);
                let mut expected = vec![POISON; g.outputs];
                if inside {
                    let load = |p: usize, off: [i32; 3]| {
                        let at = std::array::from_fn(|a| global[a] + off[a] as isize);
                        match by_param[p] {
                            (true, i) => Value::F32(in32[i].get(at).expect("inside the halo")),
                            (false, i) => Value::F64(in64[i].get(at).expect("inside the halo")),
                        }
                    };
                    let scalar = |p: usize| Value::F64(scalars[p]);
                    for (param, v) in run_point(&ir, &Point { load: &load, scalar: &scalar, level: None }) {
                        if let Some(r) = reductions.iter().position(|&q| q == param) {
                            let op = if g.reductions[r] == "Max" { ReduceOp::Max } else { ReduceOp::Min };
                            folded[r] = combine(op, folded[r], v.to_f64());
                            continue;
                        }
                        let o = outputs.iter().position(|&q| q == param).expect("an output");
                        expected[o] = v.to_f64();
                    }
                }
                for (o, want) in expected.iter().enumerate() {
                    let got = outs[o].get(global).expect("a point of the field");
                    assert!(
                        same(got, *want),
                        "stencil {seed}, run {run}: o{o} at {global:?} (inside the range: {inside}) is {got:e}, the \
                         interpreter says {want:e}; shape {}, range {begin:?}..{end:?}\n{}",
                        shape.describe(),
                        g.source()
                    );
                }
            }
            for (r, (got, want)) in reduced.iter().zip(&folded).enumerate() {
                // The sign of a zero result may differ with the order (`max(0.0, -0.0)`).
                assert!(
                    same(*got, *want) || (*got == 0.0 && *want == 0.0),
                    "stencil {seed}, run {run}: r{r} ({}) is {got:e}, the interpreter says {want:e}\n{}",
                    g.reductions[r],
                    g.source()
                );
            }
            cases += 1;
        }
    }
    assert_eq!(cases, compiled::STENCILS * runs);
    eprintln!("{cases} compiled cases ({} stencils × {runs} runs) match the interpreter", compiled::STENCILS);
}

/// The build script's random column sweeps, compiled by `#[stencil(sweep = ..)]`, over random
/// sub-ranges of random fields in both element orders (outputs poisoned, halo 2: the first
/// levels read outputs below the range, which hold the poison): every point equals the IR
/// interpreter walking each column in the sweep's order, the interpreter's stores visible to the
/// levels after them; every point outside the range keeps the poison.
#[test]
fn compiled_sweeps_match_the_ir_interpreter() {
    let runs = env_count("STENCIL_FUZZ_RUNS", 21);
    let mut cases = 0;
    for seed in 0..compiled::SWEEPS {
        let g = Generated::sweep(seed);
        let source = format!("{}\n{}", g.attribute(), g.source());
        let ir = StencilIr::from_source(&source).unwrap_or_else(|e| panic!("{source}\n{}", e.kind));
        let ir = if g.fma { stencil_codegen::passes::contract(&ir) } else { ir };
        assert!(ir.sweep.is_some(), "{source}");
        assert_eq!(StencilIr::decode(&ir.encode()).as_ref(), Ok(&ir), "{source}");
        let backward = g.sweep == Some("backward");
        for run in 0..runs {
            let Case { shape, in64, in32, scalars, begin, end, range } = Case::random(&g, seed * 104_729 + run, 9);
            let mut outs: Vec<Field3<f64>> = (0..g.outputs).map(|_| Field3::filled(shape, POISON)).collect();
            compiled::launch_sweep(seed, &range, &in64, &in32, &scalars, &mut outs).expect("launches");

            // The reference: the interpreter over each column, on its own copy of the outputs.
            let mut want: Vec<Field3<f64>> = (0..g.outputs).map(|_| Field3::filled(shape, POISON)).collect();
            let (mut i64n, mut i32n) = (0, 0);
            let mut by_param: Vec<(char, usize)> = Vec::new();
            let mut out_index = 0;
            for p in &ir.params {
                by_param.push(match p.kind {
                    ParamKind::Field(f) if f.writable => ('o', post_inc(&mut out_index)),
                    ParamKind::Field(f) if f.elem == ScalarType::F32 => ('h', post_inc(&mut i32n)),
                    ParamKind::Field(_) => ('d', post_inc(&mut i64n)),
                    _ => ('s', usize::MAX),
                });
            }
            let halo = 2isize;
            let levels = end[2] - begin[2];
            for i in begin[0]..end[0] {
                for j in begin[1]..end[1] {
                    let k_of = |level: usize| {
                        let l = if backward { levels - 1 - level } else { level };
                        (begin[2] + l) as isize - halo
                    };
                    let (gi, gj) = (i as isize - halo, j as isize - halo);
                    let current = std::cell::RefCell::new(std::mem::take(&mut want));
                    let load = |level: usize, p: usize, off: [i32; 3]| {
                        let at = [gi + off[0] as isize, gj + off[1] as isize, k_of(level) + off[2] as isize];
                        match by_param[p] {
                            ('h', f) => Value::F32(in32[f].get(at).expect("inside the halo")),
                            ('d', f) => Value::F64(in64[f].get(at).expect("inside the halo")),
                            ('o', f) => Value::F64(current.borrow()[f].get(at).expect("inside the halo")),
                            _ => unreachable!("loads read fields"),
                        }
                    };
                    let scalar = |p: usize| Value::F64(scalars[p]);
                    let mut store = |level: usize, p: usize, v: Value| {
                        let ('o', f) = by_param[p] else { unreachable!("stores write outputs") };
                        current.borrow_mut()[f].set([gi, gj, k_of(level)], v.to_f64()).expect("inside");
                    };
                    run_column(&ir, levels, &load, &scalar, &mut store);
                    want = current.into_inner();
                }
            }
            for (o, (got, want)) in outs.iter().zip(&want).enumerate() {
                for storage in shape.storage_points() {
                    let global = shape.to_global(storage);
                    let (a, b) = (got.get(global).unwrap(), want.get(global).unwrap());
                    assert!(
                        same(a, b),
                        "sweep {seed}, run {run}: o{o} at {global:?} is {a:e}, the interpreter says {b:e}; shape {}, \
                         range {begin:?}..{end:?}\n{source}",
                        shape.describe()
                    );
                }
            }
            cases += 1;
        }
    }
    assert_eq!(cases, compiled::SWEEPS * runs);
    eprintln!("{cases} compiled sweep cases ({} sweeps × {runs} runs) match the interpreter", compiled::SWEEPS);
}

fn post_inc(n: &mut usize) -> usize {
    *n += 1;
    *n - 1
}

/// A geometry for printing CUDA: a 3D field of 16³ with halo 2, `ijk`.
fn geometry() -> Geometry {
    let shape = Shape3::new([16; 3]).halo(2);
    stencil_runtime::cuda_source::geometry(&shape, &Loop3D::interior(&shape), 8)
}

/// Prints the CUDA of `ir`: the reduction kernels of a reducing stencil, else the kernels of two
/// strategies.
fn print_cuda(ir: &StencilIr, geometry: &Geometry) -> Result<(), String> {
    if ir.reduces() {
        print_reduce_kernel(ir, geometry);
        return Ok(());
    }
    for strategy in [Strategy::default_for(ir), Strategy::PointPerThread { block: [32, 4, 1] }] {
        print_kernel(ir, strategy, geometry).map_err(|e| format!("{strategy:?}: {e}"))?;
    }
    Ok(())
}

#[test]
fn lowering_matches_the_generator() {
    let cases = env_count("STENCIL_FUZZ_CASES", 1000);
    let geometry = geometry();
    for case in 0..cases {
        let seed = RUNTIME_SEEDS + case;
        let g = Generated::new(seed);
        let source = g.source();
        let ir = lower(&source);
        assert_eq!(StencilIr::decode(&ir.encode()).as_ref(), Ok(&ir), "{source}");
        print_cuda(&ir, &geometry).unwrap_or_else(|e| panic!("{source}\n{e}"));
        // As written (what the functor embeds): point functions survive the encoding, and the
        // depot kernel keeps them.
        let written = StencilIr::from_source(&source).expect("lowered above");
        assert_eq!(StencilIr::decode(&written.encode()).as_ref(), Ok(&written), "{source}");
        if !written.reduces() {
            let depot = Strategy::Depot { block_x: 16, block_y: 4, planes: 4 };
            print_kernel(&written, depot, &geometry).unwrap_or_else(|e| panic!("{source}\n{e}"));
        }
        // Inputs as a function of field and offset; the parameters are scalars, inputs, outputs.
        let mut rng = SplitMix64::new(seed);
        let salt = rng.next_u64();
        let input = |f: usize, off: [i32; 3]| {
            let mut r =
                SplitMix64::new(salt ^ (f as u64) << 40 ^ ((off[0] + 2) * 25 + (off[1] + 2) * 5 + off[2] + 2) as u64);
            value(&mut r)
        };
        let widened = |f: usize, off: [i32; 3]| {
            let v = input(f, off);
            if g.inputs_f32[f] {
                v as f32 as f64
            } else {
                v
            }
        };
        let scalars: Vec<f64> = (0..g.scalars).map(|_| value(&mut rng)).collect();
        let want = g.eval(&widened, &scalars);
        let load = |p: usize, off: [i32; 3]| {
            let f = p - g.scalars;
            if g.inputs_f32[f] {
                Value::F32(input(f, off) as f32)
            } else {
                Value::F64(input(f, off))
            }
        };
        let scalar = |p: usize| Value::F64(scalars[p]);
        let stores = run_point(&ir, &Point { load: &load, scalar: &scalar, level: None });
        let first_output = g.scalars + g.inputs_f32.len();
        let mut got = vec![f64::NAN; g.outputs + g.reductions.len()];
        for (field, v) in stores {
            got[field - first_output] = v.to_f64();
        }
        for o in 0..g.outputs + g.reductions.len() {
            assert!(
                same(got[o], want[o]),
                "case {case}: value {o} (outputs, then folds) is {:e} in the IR, {:e} in the source\n{source}",
                got[o],
                want[o]
            );
        }
    }
}

/// Fragments a mutation may insert.
const INSERTS: [&str; 24] = [
    ";",
    "idx",
    "&mut ",
    "::<",
    ">()",
    "[idx]",
    "o0[idx] = 1.0;",
    "let ",
    "for i in 0..3 {",
    "}",
    "{",
    "1.0",
    "a0",
    ".sqrt()",
    " as i32",
    "loop {}",
    "unsafe ",
    "return ",
    "2usize",
    "idx.ix::<99999999999, 0, 0>()",
    "idx.ix::<n, 0, 0>()",
    "(",
    "a0[idx.ix::<3, 0, 0>()]",
    "o0[idx.ix::<1, 0, 0>()] = 2.0;",
];

/// `source` with one random change.
fn mutate(source: &str, rng: &mut Rng) -> String {
    let chars: Vec<char> = source.chars().collect();
    let at = rng.below(chars.len());
    let mut out: Vec<char> = chars.clone();
    match rng.below(4) {
        0 => {
            let len = 1 + rng.below(6);
            out.drain(at..(at + len).min(chars.len()));
        }
        1 => {
            let fragment = INSERTS[rng.below(INSERTS.len())];
            out.splice(at..at, fragment.chars());
        }
        2 => {
            let other = rng.below(chars.len());
            out.swap(at, other);
        }
        _ => {
            // An offset made huge or negative beyond the halo.
            let text: String = chars.iter().collect();
            return text.replacen("idx.ix::<", &format!("idx.ix::<{}", ["-", "9", "1000000"][rng.below(3)]), 1);
        }
    }
    out.into_iter().collect()
}

#[test]
fn broken_sources_are_errors_not_panics() {
    let cases = env_count("STENCIL_FUZZ_CASES", 1000);
    let geometry = geometry();
    let mut rng = Rng::new(0xf022);
    let (mut rejected, mut accepted) = (0, 0);
    for case in 0..cases {
        let mut source = Generated::new(2 * RUNTIME_SEEDS + case).source();
        for _ in 0..1 + rng.below(3) {
            source = mutate(&source, &mut rng);
        }
        if std::env::var("FUZZ_DEBUG").is_ok() {
            eprintln!("case {case}:\n{source}");
        }
        let lowered = catch_unwind(AssertUnwindSafe(|| StencilIr::from_source(&source)))
            .unwrap_or_else(|_| panic!("case {case}: lowering panicked on\n{source}"));
        match lowered {
            Err(e) => {
                assert!(!e.kind.to_string().is_empty(), "case {case}: an empty error for\n{source}");
                rejected += 1;
            }
            Ok(ir) => {
                let printed = catch_unwind(AssertUnwindSafe(|| print_cuda(&ir, &geometry)));
                assert!(printed.is_ok(), "case {case}: printing CUDA panicked on\n{source}");
                accepted += 1;
            }
        }
    }
    // Most mutations break the stencil; some (a swapped space, a doubled `;`) do not.
    assert!(rejected > cases / 3, "only {rejected} of {cases} mutations were rejected");
    eprintln!("{cases} mutated stencils: {rejected} rejected with an error, {accepted} still valid");
}
