//! Writes the random stencils of the differential fuzz test (`tests/tests/fuzz.rs`) into
//! `$OUT_DIR/fuzz_stencils.rs`: `STENCIL_FUZZ_STENCILS` of them (default 48), each with a
//! launcher that takes its inputs by kind, on any executor (`launch_on`; `launch` on the host).
//! The generator is `src/fuzz/gen.rs`, shared with the
//! test, which rebuilds each stencil from its seed.

#[path = "src/fuzz/gen.rs"]
mod gen;

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=src/fuzz/gen.rs");
    println!("cargo:rerun-if-env-changed=STENCIL_FUZZ_STENCILS");
    println!("cargo:rerun-if-env-changed=STENCIL_FUZZ_SWEEPS");
    let count: u64 = std::env::var("STENCIL_FUZZ_STENCILS").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    let mut out = format!(
        "/// The number of compiled fuzz stencils (seeds `0..STENCILS`).\npub const STENCILS: u64 = {count};\n\n"
    );
    let sweeps: u64 = std::env::var("STENCIL_FUZZ_SWEEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let _ = writeln!(
        out,
        "/// The number of compiled fuzz column sweeps (seeds `0..SWEEPS`).\npub const SWEEPS: u64 = {sweeps};\n"
    );
    let stencils = (0..count).map(|seed| (seed, gen::Generated::new(seed), "launch"));
    let columns = (0..sweeps).map(|seed| (seed, gen::Generated::sweep(seed), "launch_sweep"));
    for (seed, g, launcher) in stencils.chain(columns) {
        let _ = writeln!(out, "{}\n{}", g.attribute(), g.source());
        let (mut f64s, mut f32s) = (0, 0);
        let args: Vec<String> = g
            .params()
            .iter()
            .map(|(name, ty)| match (name.as_bytes()[0], ty.contains("f32")) {
                (b's', _) => format!("scalars[{}]", &name[1..]),
                (b'a', true) => {
                    f32s += 1;
                    format!("&in32[{}]", f32s - 1)
                }
                (b'a', false) => {
                    f64s += 1;
                    format!("&in64[{}]", f64s - 1)
                }
                (b'r', _) => format!("&mut {name}"),
                _ => name.clone(),
            })
            .collect();
        let outs: Vec<String> = (0..g.outputs).map(|o| format!("o{o}")).collect();
        let reds: String = g
            .reductions
            .iter()
            .enumerate()
            .map(|(r, ty)| format!("    let mut r{r} = {ty}::<f64>::new();\n"))
            .collect();
        let got: Vec<String> = (0..g.reductions.len()).map(|r| format!("r{r}.get()")).collect();
        // One launcher per stencil, on any executor under a CUDA strategy (the host ignores it):
        // the CPU fuzz tests run it on `Host`, the GPU fuzz test on the GPU.
        let _ = writeln!(
            out,
            "fn {launcher}_{seed}<E: Executor>(exec: &E, strategy: Option<Strategy>, range: &Loop3D, in64: &[E::Field<f64, 3>], in32: &[E::Field<f32, 3>], scalars: &[f64], outs: &mut [E::Field<f64, 3>]) -> Result<Vec<f64>, LaunchError> {{\n    \
             let [{outs}] = outs else {{ panic!(\"{n} outputs\") }};\n{reds}    exec.run_with(range, {functor}, strategy, ({args},))?;\n    Ok(vec![{got}])\n}}\n",
            outs = outs.join(", "),
            got = got.join(", "),
            n = g.outputs,
            functor = g.functor(),
            args = args.join(", "),
        );
    }
    out += "use stencil_runtime::{Executor, Host, Strategy};\n";
    for (launcher, n) in [("launch", count), ("launch_sweep", sweeps)] {
        let _ = writeln!(out, "/// Runs compiled fuzz stencil `seed` ({launcher}) on `exec` under `strategy`.\npub fn {launcher}_on<E: Executor>(exec: &E, strategy: Option<Strategy>, seed: u64, range: &Loop3D, in64: &[E::Field<f64, 3>], in32: &[E::Field<f32, 3>], scalars: &[f64], outs: &mut [E::Field<f64, 3>]) -> Result<Vec<f64>, LaunchError> {{\n    match seed {{");
        for seed in 0..n {
            let _ =
                writeln!(out, "        {seed} => {launcher}_{seed}(exec, strategy, range, in64, in32, scalars, outs),");
        }
        out += "        _ => panic!(\"no compiled stencil {seed}\"),\n    }\n}\n";
        let _ = writeln!(out, "/// Runs compiled fuzz stencil `seed` ({launcher}) on the host.\npub fn {launcher}(seed: u64, range: &Loop3D, in64: &[Field3<f64>], in32: &[Field3<f32>], scalars: &[f64], outs: &mut [Field3<f64>]) -> Result<Vec<f64>, LaunchError> {{\n    {launcher}_on(&Host, None, seed, range, in64, in32, scalars, outs)\n}}");
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("fuzz_stencils.rs");
    std::fs::write(path, out).expect("writes the fuzz stencils");
}
