//! Table II of Sai et al. 2020 on this GPU: the full seismic model (inner region with the 25-point
//! stencil, six PML slabs with the damped update, the source) on the largest cube up to 1000³
//! that the GPU holds, for each of our CUDA strategies, as seconds per 1000 steps (the paper's
//! column), GPts/s, effective GB/s (the minimal bytes per point of each region: 16 inside, 28 in
//! the PML, in f32) and % of the device-to-device copy bandwidth measured in the same run.
//! Every strategy runs the same model from rest, and its final wavefield's checksum must equal
//! the first strategy's (the kernels are bit-equal).
//!
//! Then each region alone under each strategy (the thin slabs want other blocks than the inner
//! region), and the full model with the fastest strategy of each region: the tuned row.
//!
//! `table2 [n] [steps]`: grid points per axis including the PML (default: the largest that fits,
//! at most 1000) and timed steps (default 100; the time is scaled to 1000 steps).

use rayon::prelude::*;
use stencil_examples::acoustic::{
    AcousticInner, AcousticPml, Coefficients, Model, RegionStrategies, State, Wave, HALO,
};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{DeviceField3, Strategy};

/// The paper's V100 result for its best kernel, gmem_8x8x8: seconds for 1000³ × 1000 steps.
const PAPER_V100_SECONDS: f64 = 53.88;
/// Width of the PML on every side, as in the demonstration model.
const PML: usize = 16;
/// Fields of the model (u, u_prev, vdt2, eta, phi).
const FIELDS: usize = 5;
/// Timed launches of one region under one strategy.
const REGION_REPS: usize = 5;

/// Our strategies, each with the kernel of the paper it resembles most.
fn strategies() -> Vec<(Option<Strategy>, &'static str)> {
    vec![
        (Some(Strategy::PointPerThread { block: [8, 8, 8] }), "gmem_8x8x8"),
        (Some(Strategy::PointPerThread { block: [16, 16, 4] }), "gmem_16x16x4"),
        (Some(Strategy::PointPerThread { block: [32, 4, 2] }), "gmem (32x4x2)"),
        (Some(Strategy::SharedTile3D { tile: [8, 8, 8] }), "smem_u"),
        (Some(Strategy::SharedTile3D { tile: [32, 4, 4] }), "smem_u (32x4x4)"),
        (Some(Strategy::Stream25D { tile_x: 16, tile_y: 16 }), "st_smem_16x16"),
        (Some(Strategy::Stream25D { tile_x: 32, tile_y: 8 }), "st_smem (32x8)"),
        (Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 64, block_y: 2, points_per_thread: 16 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 128, block_y: 1, points_per_thread: 16 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 32 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 64 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 32, block_y: 8, points_per_thread: 32 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 4, block_y: 32, points_per_thread: 16 }), "st_reg_fixed + float4"),
        (Some(Strategy::ZMarch { block_x: 8, block_y: 16, points_per_thread: 8 }), "st_reg_fixed + float4"),
        (Some(Strategy::PointPerThread { block: [16, 8, 4] }), "gmem (16x8x4)"),
        (None, "default per stencil"),
    ]
}

/// A host field from a function of the global coordinate, evaluated in parallel.
fn par_field(shape: Shape3, f: impl Fn([isize; 3]) -> f32 + Sync) -> Field3<f32> {
    let (axes, ext) = (shape.element_order().axes::<3>(), shape.extent());
    let values: Vec<f32> = (0..shape.points())
        .into_par_iter()
        .map(|mut flat| {
            let mut s = [0usize; 3];
            for &a in &axes {
                s[a] = flat % ext[a];
                flat /= ext[a];
            }
            f(shape.to_global(s))
        })
        .collect();
    Field3::from_vec(shape, values).expect("one value per point")
}

/// An order-independent checksum of a field's bits (equal fields, equal sums).
fn checksum(f: &Field3<f32>) -> u64 {
    f.as_slice()
        .par_iter()
        .enumerate()
        .map(|(i, v)| (u64::from(v.to_bits()) ^ (i as u64) << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .reduce(|| 0, u64::wrapping_add)
}

/// Command line.
#[derive(clap::Parser)]
#[command(about = "Table II of Sai et al. 2020 (the full seismic model) per CUDA strategy on this GPU")]
struct Args {
    /// Grid points per axis including the PML (default: the largest that fits, at most 1000).
    n: Option<usize>,
    /// Timed steps (the time is scaled to 1000 steps).
    #[arg(default_value_t = 100)]
    steps: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    let gpu = Gpu::new(0)?;
    let (free, total) = gpu.memory_info()?;
    let fits = |n: usize| FIELDS * Shape3::new([n; 3]).halo(HALO).len() * 4 < free * 9 / 10;
    let n = match args.n {
        Some(n) => n,
        None => (2 * PML + 8..=1000).rev().step_by(8).find(|&n| fits(n)).ok_or("not even a small grid fits")?,
    };
    let steps = args.steps;
    let copy = gpu.copy_bandwidth_gbs(1 << 30, 20)?;
    println!(
        "device: {} ({} of {} GiB free); device-to-device copy of 1 GiB: {copy:.0} GB/s (read + written)",
        gpu.name(),
        free >> 30,
        total >> 30
    );

    let mut model = Model::layered(n - 2 * PML, steps + 2);
    model.pml = PML;
    model.check()?;
    let shape = model.shape();
    let regions = model.regions();
    let inner = regions.inner.points() as f64;
    let pml = regions.boundary().map(|(_, r)| r.points()).sum::<usize>() as f64;
    let bytes_per_step = 16.0 * inner + 28.0 * pml;
    println!(
        "grid {n}³ ({}³ inner + a {PML}-point PML: {:.1}% of the points), {steps} timed steps scaled to 1000, f32, \
         minimal traffic {:.2} GB per step",
        n - 2 * PML,
        100.0 * pml / (inner + pml),
        bytes_per_step / 1e9
    );
    let dt2 = model.dt * model.dt;
    let vdt2 = gpu.upload(&par_field(shape, |g| (model.velocity(g).powi(2) * dt2) as f32))?;
    let eta = gpu.upload(&par_field(shape, |g| model.eta(g) as f32))?;
    let c = Coefficients::new([model.h; 3]).to::<f32>();

    println!("\n| strategy | paper's analogue | s / 1000 steps | GPts/s | effective GB/s | % of copy | checksum |");
    println!("|---|---|---:|---:|---:|---:|---|");
    let mut state = State { u: gpu.alloc(shape)?, u_prev: gpu.alloc(shape)?, vdt2, eta, phi: gpu.alloc(shape)? };
    let mut reference = None;
    let mut row = |state: &mut State<_>,
                   plan: &RegionStrategies,
                   name: &str,
                   analogue: &str|
     -> Result<(), Box<dyn std::error::Error>> {
        for f in [&mut state.u, &mut state.u_prev, &mut state.phi] {
            *f = gpu.alloc(shape)?;
        }
        let mut step = |s: usize| f32::step(&gpu, plan, &regions, &c, state, &model.source_at(s)?);
        // Two untimed steps compile (or load) the kernels.
        if let Err(e) = step(0).and_then(|_| step(1)) {
            println!("| {name} | {analogue} | — | — | — | — | {e} |");
            return Ok(());
        }
        let (result, ms) = gpu.time_ms(|| Ok((2..steps + 2).try_for_each(&mut step)))?;
        result?;
        let sum = checksum(&state.u.download()?);
        let check = match reference {
            None => {
                reference = Some(sum);
                "reference".to_string()
            }
            Some(r) if r == sum => "equal".to_string(),
            Some(r) => format!("DIFFERS ({sum:016x} vs {r:016x})"),
        };
        let seconds = ms * 1e-3 / steps as f64;
        let gbs = bytes_per_step / seconds / 1e9;
        println!(
            "| {name} | {analogue} | {:.2} | {:.1} | {gbs:.0} | {:.1}% | {check} |",
            seconds * 1000.0,
            (inner + pml) / seconds / 1e9,
            100.0 * gbs / copy
        );
        Ok(())
    };
    // No strategy: the runtime's choice, tuned per region unless STENCIL_AUTOTUNE=off.
    let unnamed = if gpu.tune_settings().enabled { "autotuned" } else { "default" };
    for (strategy, analogue) in strategies() {
        let name = strategy.map_or(unnamed.to_string(), |s| s.to_string());
        row(&mut state, &RegionStrategies::uniform(strategy), &name, analogue)?;
    }

    // Each region alone under each strategy.
    println!("\n| region | points | fastest strategy | ms | effective GB/s | % of copy | slowest strategy | ms |");
    println!("|---|---:|---|---:|---:|---:|---|---:|");
    let names = ["inner", "top", "bottom", "front", "back", "left", "right"];
    let mut plan = RegionStrategies::default();
    for (r, range) in regions.all().enumerate() {
        let mut times = Vec::new();
        for (strategy, _) in strategies() {
            let mut launch = || region(&gpu, strategy, r, &range, &c, &mut state);
            if launch().is_err() {
                continue;
            }
            let (result, ms) = gpu.time_ms(|| Ok((0..REGION_REPS).try_for_each(|_| launch())))?;
            result?;
            times.push((ms / REGION_REPS as f64, strategy));
        }
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best, worst) = (times[0], times[times.len() - 1]);
        plan.0[r] = best.1;
        let bytes = range.points() as f64 * if r == 0 { 16.0 } else { 28.0 };
        let gbs = bytes / (best.0 * 1e-3) / 1e9;
        let show = |s: Option<Strategy>| s.map_or(unnamed.to_string(), |s| s.to_string());
        println!(
            "| {} | {} | {} | {:.3} | {gbs:.0} | {:.1}% | {} | {:.3} |",
            names[r],
            range.points(),
            show(best.1),
            best.0,
            100.0 * gbs / copy,
            show(worst.1),
            worst.0
        );
    }
    println!("\nthe full model with the fastest strategy of each region:\n");
    println!("| strategy | paper's analogue | s / 1000 steps | GPts/s | effective GB/s | % of copy | checksum |");
    println!("|---|---|---:|---:|---:|---:|---|");
    row(&mut state, &plan, "tuned per region", "—")?;
    println!(
        "\npaper, V100, 1000³ × 1000 steps: gmem_8x8x8 {PAPER_V100_SECONDS} s ({:.1} GPts/s)",
        1e9 * 1000.0 / PAPER_V100_SECONDS / 1e9
    );
    Ok(())
}

/// Region `r` of the step alone (0: the inner region's stencil, else the PML one's), as the
/// model's step launches it.
fn region(
    gpu: &Gpu,
    strategy: Option<Strategy>,
    r: usize,
    range: &Loop3D,
    c: &Coefficients<f32>,
    s: &mut State<DeviceField3<f32>>,
) -> Result<(), LaunchError> {
    let [cx, cy, cz] = c.c;
    match r {
        0 => {
            gpu.run_with(range, AcousticInner::<f32>::new(), strategy, (c.c0, cx, cy, cz, &s.u, &s.vdt2, &mut s.u_prev))
        }
        _ => {
            let args = (c.c0, cx, cy, cz, c.g, &s.u, &s.vdt2, &s.eta, &mut s.u_prev, &mut s.phi);
            gpu.run_with(range, AcousticPml::<f32>::new(), strategy, args)
        }
    }
}
