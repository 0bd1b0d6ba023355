//! The CPU nest under every instruction set level this machine runs (baseline, AVX2, AVX-512),
//! with and without streaming stores, and with tiles the model would not pick (one point, odd
//! sizes, tiles that do not divide the range), against the plain references: odd grid sizes so
//! every vector loop has a remainder, tiny grids, ranges that start off the aligned row start,
//! rows longer than the streaming buffer, outputs poisoned with NaN so a skipped or stray write
//! shows. Every combination must give the same bits.
//!
//! The shapes of `Order::Ijk` (stride 1 along axis 0) run the stride-1 build of the block function
//! (reads of a field that differ only along axis 0 are one row pointer with constant
//! displacements); the `Order::Kij` shape and its strides run the general build. The baseline
//! level (`STENCIL_CPU_ISA=scalar`: SSE2 on x86-64) is among the levels walked.
//!
//! Point functions, column sweeps (the column nest on `Kij` fields, tiles of columns on `Ijk`)
//! and reductions (integer-valued, so any order of the sum is exact) are walked the same way.
//!
//! The level and the tuning are process-wide settings, so one test walks all of them in turn.
//! Another launches tiny grids many times, back to back and after pauses, on the launch pool. A
//! third runs the 3D stencils in a child process with `STENCIL_CPU_ISA=scalar` set, the way a
//! user forces the scalar fallback. A last one runs fields of 2 MiB and more, which start at
//! different offsets within a page.

use stencil_runtime::cpu::{set_isa, set_tuning, Isa, Streaming, Tuning};
use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::canonical::*;
use stencil_tests::reducing::Stats3dF64;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, Real, SplitMix64};

#[stencil]
fn lap2d(idx: Idx2, c: f64, u: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = u[idx]
        + c * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()] - 4.0 * u[idx]);
}

#[stencil]
fn smooth1d(idx: Idx1, w: f32, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = (1.0 - 2.0 * w) * u[idx] + w * (u[idx.ix::<-1>()] + u[idx.ix::<1>()]);
}

// Reads its output at offset 0 (never streamed), with a branch.
#[stencil]
fn accumulate(idx: Idx3, a: f32, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] += a * f[idx.ix::<0, 0, 1>()];
    if out[idx] < 0.0 {
        out[idx] = -out[idx];
    }
}

/// A point function (evaluated at the point, one behind along i and one below along k), with a
/// branch: the nest computes it once per point of a block into a buffer and reads it back.
#[stencil]
fn upwind(idx: Idx3, c: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    let f = |p: Idx3| {
        let (l, r) = (u[p], u[p.ix::<1, 0, 0>()]);
        if l > r {
            c * l
        } else {
            c * r - 0.5 * l
        }
    };
    out[idx] = u[idx] - (f(idx) - f(idx.ix::<-1, 0, 0>())) + 0.25 * f(idx.ix::<0, 0, -1>());
}

fn upwind_ref(c: f64, u: &Field3<f64>, g: [isize; 3]) -> f64 {
    let f = |o: [isize; 3]| {
        let (l, r) = (nb(u, g, o), nb(u, g, [o[0] + 1, o[1], o[2]]));
        if l > r {
            c * l
        } else {
            c * r - 0.5 * l
        }
    };
    nb(u, g, [0, 0, 0]) - (f([0, 0, 0]) - f([-1, 0, 0])) + 0.25 * f([0, 0, -1])
}

/// A forward column sweep with a carried local and a read of the level below (the column nest
/// on `Kij` fields, the tile-of-columns nest on `Ijk` ones).
#[stencil(sweep = forward)]
fn decay_up(idx: Idx3, w: f64, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut acc = 0.0;
    acc = w * acc + q[idx];
    if idx.level() == 0 {
        out[idx] = acc;
    } else {
        out[idx] = acc - 0.5 * out[idx.ix(0, 0, -1)];
    }
}

/// `decay_up` column by column, bottom to top.
fn decay_up_ref(w: f64, q: &Field3<f64>, range: &Loop3D, want: &mut Field3<f64>) {
    let (b, n, h) = (range.begin(), range.len_per_axis(), q.shape().halo_widths());
    for i in 0..n[0] {
        for j in 0..n[1] {
            let mut acc = 0.0;
            for k in 0..n[2] {
                let g = [
                    (b[0] + i) as isize - h[0] as isize,
                    (b[1] + j) as isize - h[1] as isize,
                    (b[2] + k) as isize - h[2] as isize,
                ];
                acc = w * acc + nb(q, g, [0, 0, 0]);
                let v = if k == 0 { acc } else { acc - 0.5 * nb(want, g, [0, 0, -1]) };
                want.set(g, v).expect("inside");
            }
        }
    }
}

/// Every (level, streaming, tile) combination, set in turn; `check` runs under each.
fn for_each_setting(mut check: impl FnMut(&str)) {
    let blocks = [[0, 0, 0], [1, 1, 1], [5, 3, 2], [16, 7, 3], [3, 100, 1]];
    let mut levels: Vec<Isa> = Isa::ALL.into_iter().map(|l| set_isa(Some(l))).collect();
    levels.dedup();
    assert_eq!(levels[0], Isa::Baseline, "the baseline (the scalar fallback) can always be forced");
    for isa in levels {
        set_isa(Some(isa));
        assert_eq!(stencil_runtime::cpu::isa(), isa, "launches run the level just set");
        for streaming in [Streaming::On, Streaming::Off] {
            for block in blocks {
                set_tuning(Tuning { block, streaming, ..Tuning::default() });
                check(&format!("{isa:?}, {streaming:?}, block {block:?}"));
            }
        }
    }
    set_isa(None);
    set_tuning(Tuning::default());
}

fn check<T: Real, const D: usize>(
    shape: Shape<D>,
    range: Loop<D>,
    run: impl FnOnce(&Loop<D>, &mut Field<T, D>) -> Result<(), LaunchError>,
    reference: impl Fn([isize; D]) -> T,
    context: &str,
) {
    let mut out = poisoned::<T, D>(shape);
    let mut want = out.clone();
    run(&range, &mut out).unwrap_or_else(|e| panic!("{context}: launch refused: {e}"));
    for_each_in_range(&range, &shape, |g| want.set(g, reference(g)).expect("inside"));
    assert_bits_eq(&out, &want, &format!("{context}, range {range:?}"));
}

#[test]
fn every_level_streaming_mode_and_tile_gives_the_reference_bits() {
    let mut rng = SplitMix64::new(1414);
    // 3D, f32 and f64: odd sizes, a tiny grid, a range shifted off the aligned start.
    let shapes3 = [
        Shape3::new([37, 11, 9]).halo(4),
        Shape3::new([3, 2, 5]).halo(4).order(Order::Kij),
        Shape3::new([21, 6, 7]).halo_per_axis([4, 5, 6]).align(1),
    ];
    let fields: Vec<_> = shapes3
        .iter()
        .map(|&s| {
            let c7: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
            let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
            let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let p = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
            let old = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
            (s, c7, f, u, p, v, old)
        })
        .collect();
    let extra: Vec<_> = [Shape3::new([19, 5, 6]).halo(1), Shape3::new([7, 5, 13]).halo(1).order(Order::Kij)]
        .into_iter()
        .map(|s| {
            let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let q = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let ints = Field3::from_fn(s, |_| (rng.uniform(-1000.0, 1000.0)).round());
            (s, u, q, ints)
        })
        .collect();
    let s2 = Shape2::new([2101, 5]).halo(1);
    let u2 = random::<f64, 2>(s2, &mut rng, -1.0, 1.0);
    let s1 = Shape1::new([3000]).halo(1);
    let u1 = random::<f32, 1>(s1, &mut rng, -1.0, 1.0);

    for_each_setting(|setting| {
        for (s, c, f, u, p, v, old) in &fields {
            let (s, c) = (*s, *c);
            let shifted = Loop3D::interior(&s).shrink([1, 0, 1]);
            for range in [Loop3D::interior(&s), shifted] {
                let ctx = format!("diffusion f32 {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], f, out)),
                    |g| diffusion_ref(c, f, g),
                    &ctx,
                );
                let ctx = format!("star25 f64 {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(Star25F64, (0.05, u, p, v, out)),
                    |g| star25_ref(0.05, u, p, v, g),
                    &ctx,
                );
                // #[stencil(fma)]: the same stencils with their products fused (FMA instructions
                // at the vector levels, software on the baseline), against references that fuse
                // with `mul_add` by hand.
                let ctx = format!("diffusion f32 fma {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(DiffusionFma, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], f, out)),
                    |g| diffusion_fma_ref(c, f, g),
                    &ctx,
                );
                let ctx = format!("star25 f64 fma {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(Star25F64Fma, (0.05, u, p, v, out)),
                    |g| star25_fma_ref(0.05, u, p, v, g),
                    &ctx,
                );
                let mut out = old.clone();
                range.run(Accumulate, (0.7, f, &mut out)).expect("launch");
                let mut want = old.clone();
                for_each_in_range(&range, &s, |g| {
                    let mut o = nb(old, g, [0, 0, 0]) + 0.7 * nb(f, g, [0, 0, 1]);
                    if o < 0.0 {
                        o = -o;
                    }
                    want.set(g, o).expect("inside");
                });
                assert_bits_eq(&out, &want, &format!("accumulate {s:?}, {setting}"));
            }
        }
        // Point functions, column sweeps and reductions on a grid with remainders, under every
        // level too (both element orders).
        for (s, u, q, ints) in &extra {
            let s = *s;
            let shifted = Loop3D::interior(&s).shrink([1, 0, 1]);
            for range in [Loop3D::interior(&s), shifted] {
                let ctx = format!("upwind (point function) {s:?}, {setting}");
                check(s, range, |r, out| r.run(Upwind, (0.3, u, out)), |g| upwind_ref(0.3, u, g), &ctx);
                let mut out = poisoned::<f64, 3>(s);
                range.run(DecayUp, (0.9, q, &mut out)).expect("launch");
                let mut want = poisoned::<f64, 3>(s);
                decay_up_ref(0.9, q, &range, &mut want);
                assert_bits_eq(&out, &want, &format!("decay_up (sweep) {s:?}, {setting}, range {range:?}"));
                // Integer values: every order of the sum gives the exact sum, so a skipped or
                // doubled point shows (the order itself is checked in reductions.rs).
                let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
                range.run(Stats3dF64, (ints, &mut total, &mut lo, &mut jump)).expect("launch");
                let (mut t, mut mn, mut mx) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
                for_each_in_range(&range, &s, |g| {
                    let v = nb(ints, g, [0, 0, 0]);
                    t += v;
                    mn = mn.min(v);
                    mx = mx.max((v - nb(ints, g, [-1, 0, 0])).abs());
                });
                let (got, want) = ([total.get(), lo.get(), jump.get()], [t, mn, mx]);
                assert!(
                    got.map(f64::to_bits) == want.map(f64::to_bits),
                    "stats3d (reductions: sum, min, max) {s:?}, {setting}, range {range:?}: got {got:?}, want {want:?}"
                );
            }
        }
        let ctx = format!("lap2d f64 (rows longer than the streaming buffer), {setting}");
        let lap = |g: [isize; 2]| {
            let at = |o| nb(&u2, g, o);
            at([0, 0]) + 0.1 * (at([1, 0]) + at([-1, 0]) + at([0, 1]) + at([0, -1]) - 4.0 * at([0, 0]))
        };
        check(s2, Loop2D::interior(&s2), |r, out| r.run(Lap2d, (0.1, &u2, out)), lap, &ctx);
        let ctx = format!("smooth1d f32, {setting}");
        let smooth =
            |g: [isize; 1]| (1.0 - 2.0 * 0.3f32) * nb(&u1, g, [0]) + 0.3 * (nb(&u1, g, [-1]) + nb(&u1, g, [1]));
        check(s1, Loop1D::interior(&s1).shrink([5]), |r, out| r.run(Smooth1d, (0.3, &u1, out)), smooth, &ctx);
    });
}

/// Many tiny launches on 4 threads, back to back (the launch workers still spinning from the
/// last) and after pauses longer than their spin (parked): each must write every point of its
/// range, with the reference's bits. The bands of rows make more tasks than threads, so every
/// launch asks for workers. (While the other test of this file holds the launch pool, launches
/// run on rayon's workers instead: also a path that must give these bits.)
#[test]
fn many_tiny_launches_spinning_or_parked_give_the_reference_bits() {
    let spin_us = std::env::var("STENCIL_CPU_SPIN_US").ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(50);
    let pause = std::time::Duration::from_micros(spin_us + 300);
    let mut rng = SplitMix64::new(31);
    let cases: Vec<_> = [Shape2::new([33, 24]).halo(1), Shape2::new([5, 9]).halo(1)]
        .into_iter()
        .map(|s| {
            let u = random::<f64, 2>(s, &mut rng, -1.0, 1.0);
            let mut want = poisoned::<f64, 2>(s);
            for_each_in_range(&Loop2D::interior(&s), &s, |g| {
                let at = |o| nb(&u, g, o);
                let v = at([0, 0]) + 0.1 * (at([1, 0]) + at([-1, 0]) + at([0, 1]) + at([0, -1]) - 4.0 * at([0, 0]));
                want.set(g, v).expect("inside");
            });
            (s, u, want)
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().expect("a pool of 4 threads");
    pool.install(|| {
        for launch in 0..3000usize {
            if launch % 5 == 0 {
                std::thread::sleep(pause);
            }
            let (s, u, want) = &cases[launch % 2];
            let mut out = poisoned::<f64, 2>(*s);
            Loop2D::interior(s).run(Lap2d, (0.1, u, &mut out)).expect("launch");
            assert_bits_eq(&out, want, &format!("tiny launch {launch} on {s:?}"));
        }
    });
}

/// `STENCIL_CPU_ISA=scalar`, read from the environment once per process, forces the scalar
/// fallback (the build's baseline: SSE2 on x86-64, NEON on aarch64): the test below runs in a
/// child process with it set and `STENCIL_CPU_VERBOSE=1`, which prints every launch's level.
#[test]
fn the_environment_forces_the_scalar_fallback() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", "scalar_fallback_in_a_child_process", "--nocapture", "--test-threads=1"])
        .env("STENCIL_CPU_ISA", "scalar")
        .env("STENCIL_CPU_VERBOSE", "1")
        .env("STENCIL_CPU_PATHS_CHILD", "1")
        .output()
        .expect("the child process runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.contains("1 passed"), "child failed:\n{stdout}\n{stderr}");
    let launches: Vec<&str> = stderr.lines().filter(|l| l.starts_with("stencil ")).collect();
    assert!(launches.len() >= 8, "the child printed {} launch lines:\n{stderr}", launches.len());
    for l in &launches {
        assert!(l.contains(" threads, Baseline, ") && l.contains("; caches Caches {"), "launch line: {l}");
    }
}

/// Run by the test above in a child process (does nothing otherwise): the 3D stencils under the
/// level the environment set, with and without streaming stores and with odd tiles, against the
/// references.
#[test]
fn scalar_fallback_in_a_child_process() {
    if std::env::var_os("STENCIL_CPU_PATHS_CHILD").is_none() {
        return;
    }
    assert_eq!(stencil_runtime::cpu::isa(), Isa::Baseline, "STENCIL_CPU_ISA=scalar");
    let mut rng = SplitMix64::new(2718);
    let s = Shape3::new([37, 11, 9]).halo(4);
    let c: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
    let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
    let (u, p) = (random::<f64, 3>(s, &mut rng, -1.0, 1.0), random::<f64, 3>(s, &mut rng, -1.0, 1.0));
    let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
    for streaming in [Streaming::On, Streaming::Off] {
        for block in [[0, 0, 0], [5, 3, 2]] {
            set_tuning(Tuning { block, streaming, ..Tuning::default() });
            let ctx = format!("scalar fallback, {streaming:?}, block {block:?}");
            let r = Loop3D::interior(&s);
            let diffusion = |r: &Loop3D, out: &mut Field3<f32>| {
                r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, out))
            };
            check(s, r, diffusion, |g| diffusion_ref(c, &f, g), &format!("diffusion f32, {ctx}"));
            let star = |r: &Loop3D, out: &mut Field3<f64>| r.run(Star25F64, (0.05, &u, &p, &v, out));
            check(s, r, star, |g| star25_ref(0.05, &u, &p, &v, g), &format!("star25 f64, {ctx}"));
        }
    }
    set_tuning(Tuning::default());
}

/// A `STENCIL_CPU_*` variable with a value it does not take fails every host launch with an
/// error naming the variable and the values it takes (error S0113), rather than running with
/// the default: a child process runs one launch with `STENCIL_CPU_NT=sometimes`, another with
/// `STENCIL_CPU_BLOCK=64x8x8`.
#[test]
fn a_bad_setting_fails_launches_with_its_name() {
    for (variable, value, takes) in
        [("STENCIL_CPU_NT", "sometimes", "auto, on, off"), ("STENCIL_CPU_BLOCK", "64x8x8", "separated by commas")]
    {
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args(["--exact", "bad_setting_in_a_child_process", "--nocapture", "--test-threads=1"])
            .env(variable, value)
            .env("STENCIL_CPU_PATHS_CHILD", "1")
            .output()
            .expect("the child process runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && stdout.contains("1 passed"), "child failed:\n{stdout}\n{stderr}");
        let line = stdout.lines().find(|l| l.contains("launch error: ")).expect("the child prints the error");
        assert!(line.contains(&format!("{variable}=\"{value}\"")) && line.contains(takes), "{line}");
    }
}

/// Run by the test above in a child process (does nothing otherwise): one launch, whose error
/// it prints.
#[test]
fn bad_setting_in_a_child_process() {
    if std::env::var_os("STENCIL_CPU_PATHS_CHILD").is_none() {
        return;
    }
    let s = Shape2::new([8, 8]).halo(1);
    let u = poisoned::<f64, 2>(s);
    let mut out = poisoned::<f64, 2>(s);
    let e = Loop2D::interior(&s).run(Lap2d, (0.1, &u, &mut out)).expect_err("a bad setting");
    assert_eq!(e.code(), "S0113", "{e}");
    println!("launch error: {}", e.to_string().replace('\n', " / "));
}

/// Fields of 2 MiB and more start at different offsets within a 4 KiB page (their allocations
/// are aligned to 2 MiB, the data placed after an offset of its own): the nest over such fields,
/// under the default plan and threads, gives the reference bits, and the fields' offsets differ.
#[test]
fn large_fields_at_different_page_offsets_give_the_reference_bits() {
    let mut rng = SplitMix64::new(4141);
    let s = Shape3::new([60, 64, 70]).halo(4);
    let c: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
    let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
    let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
    let p = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
    let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
    assert!(std::mem::size_of_val(f.as_slice()) >= 2 << 20, "the f32 field is a large buffer");
    let offsets: Vec<usize> = [
        f.as_slice().as_ptr() as usize,
        u.as_slice().as_ptr() as usize,
        p.as_slice().as_ptr() as usize,
        v.as_slice().as_ptr() as usize,
    ]
    .map(|a| a % 4096)
    .to_vec();
    assert!(offsets.iter().all(|o| o % 128 == 0), "rows stay aligned: {offsets:?}");
    assert!(offsets.windows(2).any(|w| w[0] != w[1]), "four large fields at one page offset: {offsets:?}");
    for range in [Loop3D::interior(&s), Loop3D::interior(&s).shrink([1, 0, 1])] {
        check(
            s,
            range,
            |r, out| r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, out)),
            |g| diffusion_ref(c, &f, g),
            "diffusion f32, large fields",
        );
        check(
            s,
            range,
            |r, out| r.run(Star25F64, (0.05, &u, &p, &v, out)),
            |g| star25_ref(0.05, &u, &p, &v, g),
            "star25 f64, large fields",
        );
    }
}

/// The fused references of `every_level_…` differ from the unfused ones on random inputs, so
/// those checks tell a stencil whose products were fused from one left alone (a `fma` attribute
/// that did nothing, or an FMA instruction where none was asked for, fails one of them).
#[test]
fn fused_and_unfused_references_differ() {
    let mut rng = SplitMix64::new(7);
    let s = Shape3::new([16, 8, 8]).halo(4);
    let c7: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
    let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
    let (u, p) = (random::<f64, 3>(s, &mut rng, -1.0, 1.0), random::<f64, 3>(s, &mut rng, -1.0, 1.0));
    let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
    let (mut s1, mut s2, mut points) = (0, 0, 0);
    for_each_in_range(&Loop3D::interior(&s), &s, |g| {
        points += 1;
        s1 += usize::from(diffusion_fma_ref(c7, &f, g).to_bits() != diffusion_ref(c7, &f, g).to_bits());
        s2 += usize::from(star25_fma_ref(0.05, &u, &p, &v, g).to_bits() != star25_ref(0.05, &u, &p, &v, g).to_bits());
    });
    assert!(s1 > points / 10 && s2 > points / 10, "fused differs at {s1} and {s2} of {points} points");
}

/// Sixteen threads: the plan cuts each plane into several tiles (at least half as many as
/// threads), so a launch's first round of tasks stays within two chunks of the outer axis, and
/// cuts a wide star's outer axis into chunks thinner than 8 reaches; the tiles and chunks it
/// picks must give the reference bits too, on odd sizes and a shifted range.
#[test]
fn sixteen_threads_on_planes_cut_into_tiles_and_thin_chunks_give_the_reference_bits() {
    let mut rng = SplitMix64::new(1616);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(16).build().expect("a pool of 16 threads");
    pool.install(|| {
        for s in [Shape3::new([96, 96, 40]).halo(1), Shape3::new([67, 45, 23]).halo(4)] {
            let c: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
            let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
            for range in [Loop3D::interior(&s), Loop3D::interior(&s).shrink([1, 0, 1])] {
                check(
                    s,
                    range,
                    |r, out| r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, out)),
                    |g| diffusion_ref(c, &f, g),
                    &format!("diffusion f32 {s:?} on 16 threads"),
                );
            }
        }
        // The 25-point star in outer chunks of 16 planes, thinner than its 8 reaches (two
        // reaches, its own halo read again by the next chunk), and the remainder chunk.
        let s = Shape3::new([40, 56, 70]).halo(4);
        let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
        let p = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
        let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
        for range in [Loop3D::interior(&s), Loop3D::interior(&s).shrink([0, 1, 3])] {
            check(
                s,
                range,
                |r, out| r.run(Star25F64, (0.05, &u, &p, &v, out)),
                |g| star25_ref(0.05, &u, &p, &v, g),
                &format!("star25 f64 {s:?} on 16 threads"),
            );
        }
        // Streamed outputs on 16 threads: 16 tiles per plane (a multiple of the threads) count
        // no outer halo, so the plan takes a column of tiles per thread (`[40, 8, 18]` here).
        let s = Shape3::new([40, 128, 70]).halo(4);
        let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
        let p = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
        let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
        set_tuning(Tuning { streaming: Streaming::On, ..Tuning::default() });
        for range in [Loop3D::interior(&s), Loop3D::interior(&s).shrink([0, 0, 2])] {
            check(
                s,
                range,
                |r, out| r.run(Star25F64, (0.05, &u, &p, &v, out)),
                |g| star25_ref(0.05, &u, &p, &v, g),
                &format!("star25 f64 {s:?} streamed on 16 threads"),
            );
        }
        set_tuning(Tuning::default());
    });
}
