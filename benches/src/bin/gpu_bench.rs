//! GPU benchmark: every strategy and a few tile shapes on 7-point diffusion and the 25-point
//! acoustic update (512³ f32), as time per step (CUDA events, median after warm-up), GPts/s,
//! effective GB/s (minimal bytes) and % of the device-to-device copy bandwidth measured in the
//! same run; plus the cold compile and cached load time of a kernel.
//!
//! Then the launch path: host time per stencil launch on a 16³ grid over 10⁵ launches (and the
//! kernel's own time from events), and a recorded step (two halo fills and two stencils) replayed
//! as a CUDA graph 10⁴ times against the same step issued launch by launch.
//!
//! `gpu_bench --reduce`: reductions at bandwidth, the sum and the max of 2³⁰ f32 (a 1024³ field)
//! and both in one pass, each launch timed whole (both passes and the read of the result), as %
//! of the copy bandwidth measured in the same process.
//!
//! `gpu_bench --columns [--levels L]`: the column model's sweeps (`stencil_examples::column`,
//! one thread per column; n² columns of L levels, f64, default 512² × 128): the two diffusion
//! sweeps, the warm-rain sweep and the whole step, as effective bandwidth (minimal bytes: 88 per
//! point for the diffusion, 88 for warm rain) in % of the copy measured in the same process, and
//! the state after one step against the host's; for fields of both orders (`Ijk`: columns
//! across a warp side by side; `Kij`: each column contiguous, a warp's threads a column apart).
//!
//! `gpu_bench [n] [--launch-only | --reduce | --columns] [--only LABEL]` (default 512; `--only` keeps the
//! strategies whose label contains LABEL and skips the compile and launch-path parts: one kernel
//! to profile).

use std::time::Instant;
use stencil_bench::{copy_bandwidth, median, Acoustic25, Acoustic25Fma, Diffusion7, Diffusion7Fma};
use stencil_runtime::cuda::{DiskCache, Gpu};
use stencil_runtime::prelude::*;
use stencil_runtime::DeviceField3;
use stencil_runtime::{cuda_kernel, Executor, HaloFill, Recorded, Strategy, TimeTiling};

/// The sum of a field, for the reduction rows.
#[stencil]
fn sum_f32(idx: Idx3, u: &Field3<f32>, total: &mut Sum<f32>) {
    total.fold(u[idx]);
}

/// The maximum of a field.
#[stencil]
fn max_f32(idx: Idx3, u: &Field3<f32>, peak: &mut Max<f32>) {
    peak.fold(u[idx]);
}

/// Both in one pass.
#[stencil]
fn sum_max_f32(idx: Idx3, u: &Field3<f32>, total: &mut Sum<f32>, peak: &mut Max<f32>) {
    total.fold(u[idx]);
    peak.fold(u[idx]);
}

const WARMUP: usize = 3;
const REPS: usize = 15;

fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::PointPerThread { block: [32, 4, 2] },
        Strategy::PointPerThread { block: [128, 2, 1] },
        Strategy::ZMarch { block_x: 64, block_y: 2, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 32, block_y: 8, points_per_thread: 32 },
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 8 },
        Strategy::ZMarch { block_x: 16, block_y: 16, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 32, block_y: 16, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 128, block_y: 1, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 64 },
        Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 32 },
        Strategy::ZMarch { block_x: 64, block_y: 2, points_per_thread: 32 },
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        Strategy::Stream25D { tile_x: 64, tile_y: 4 },
        Strategy::SharedTile3D { tile: [32, 4, 4] },
        Strategy::SharedTile3D { tile: [64, 4, 2] },
    ]
}

fn time_launches(
    gpu: &Gpu,
    mut launch: impl FnMut() -> Result<(), LaunchError>,
) -> Result<f64, Box<dyn std::error::Error>> {
    for _ in 0..WARMUP {
        launch()?;
    }
    let mut samples = Vec::new();
    for _ in 0..REPS {
        let (r, ms) = gpu.time_ms(|| Ok(launch()))?;
        r?;
        samples.push(ms);
    }
    Ok(median(samples))
}

/// A 7-point step pair with periodic halos: fill, f → g, fill, g → f (four kernels).
fn step_pair(
    gpu: &Gpu,
    range: &Loop3D,
    (f, g): &mut (DeviceField3<f32>, DeviceField3<f32>),
) -> Result<(), LaunchError> {
    let periodic = [Some(HaloFill::Periodic); 3];
    let c = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4);
    gpu.fill_halos(&mut [(&mut *f, periodic)])?;
    gpu.run(range, Diffusion7, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &*f, &mut *g))?;
    gpu.fill_halos(&mut [(&mut *g, periodic)])?;
    gpu.run(range, Diffusion7, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &*g, &mut *f))
}

/// Host microseconds per call of `issue` over `n` calls: the issue loop alone, timed in bursts of
/// `burst` calls after a synchronisation (fewer than the driver's launch queue holds, so the host
/// never waits for the GPU and the time is the host's own); then per call including the GPU, for
/// `n` calls back to back and a final synchronisation.
fn host_us(
    gpu: &Gpu,
    n: usize,
    burst: usize,
    mut issue: impl FnMut() -> Result<(), LaunchError>,
) -> Result<(f64, f64), LaunchError> {
    let mut issued = 0.0;
    for _ in 0..n / burst {
        gpu.synchronize()?;
        let start = Instant::now();
        for _ in 0..burst {
            issue()?;
        }
        issued += start.elapsed().as_secs_f64();
    }
    gpu.synchronize()?;
    let start = Instant::now();
    for _ in 0..n {
        issue()?;
    }
    gpu.synchronize()?;
    let done = start.elapsed().as_secs_f64();
    Ok((issued / n as f64 * 1e6, done / n as f64 * 1e6))
}

/// The launch-overhead rows: one stencil launch, a step launched kernel by kernel, the same
/// step replayed from a recording; and what the printing-and-hashing path this table replaced
/// costs per launch (print the kernel, hash its source, look the module up).
fn launch_overhead(gpu: &Gpu) -> Result<(), Box<dyn std::error::Error>> {
    const LAUNCHES: usize = 100_000;
    const STEPS: usize = 10_000;
    let shape = Shape3::new([16, 16, 16]).halo(1);
    let range = Loop3D::interior(&shape);
    let f = gpu.upload(&Field3::from_fn(shape, |[i, j, k]| ((i + 2 * j + 3 * k) % 17) as f32 * 0.01))?;
    let mut g = gpu.alloc::<f32, 3>(shape)?;
    let c = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4);
    let mut launch = || gpu.run(&range, Diffusion7, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &f, &mut g));
    time_launches(gpu, &mut launch)?;
    let kernel_ms = time_launches(gpu, &mut launch)?;
    let (issue_us, total_us) = host_us(gpu, LAUNCHES, 200, &mut launch)?;

    let default = Strategy::default_for(<Diffusion7 as Stencil<3>>::ir());
    let opts = stencil_runtime::cuda::KERNEL_OPTIONS;
    let old_n = 2_000;
    let start = Instant::now();
    for _ in 0..old_n {
        let k = cuda_kernel::<Diffusion7, 3>(default, &shape, &range)?;
        gpu.kernel_with_stats(&k.source, &k.entry, opts)?;
    }
    let old_us = start.elapsed().as_secs_f64() / old_n as f64 * 1e6;

    let mut state = (gpu.upload(&Field3::from_fn(shape, |[i, j, _]| ((i * j) % 5) as f32))?, gpu.alloc(shape)?);
    step_pair(gpu, &range, &mut state)?;
    let (step_issue_us, step_total_us) = host_us(gpu, STEPS, 50, || step_pair(gpu, &range, &mut state))?;
    let step_ms = time_launches(gpu, || step_pair(gpu, &range, &mut state))?;
    let mut rec = Recorded::new(gpu, &mut state, |e, s| step_pair(e, &range, s))?;
    rec.replay()?;
    let (replay_issue_us, replay_total_us) = host_us(gpu, STEPS, 50, || rec.replay())?;

    println!("\n| launch path (16³ f32 diffusion, {}) | host µs per call (bursts) | µs per call, back to back incl. GPU | host µs per kernel |", default);
    println!("|---|---:|---:|---:|");
    println!("| one stencil launch, {LAUNCHES} launches (kernel alone: {:.1} µs from events) | {issue_us:.2} | {total_us:.2} | {issue_us:.2} |", kernel_ms * 1e3);
    println!("| step of 4 kernels (2 halo fills, 2 stencils) launched one by one, {STEPS} steps (step alone: {:.1} µs from events) | {step_issue_us:.2} | {step_total_us:.2} | {:.2} |", step_ms * 1e3, step_issue_us / 4.0);
    println!("| the same step replayed as a CUDA graph, {STEPS} replays | {replay_issue_us:.2} | {replay_total_us:.2} | {:.2} |", replay_issue_us / 4.0);
    println!("| for comparison: print + hash + cache lookup per launch (the path before the launch table), {old_n} times | {old_us:.2} | | |");
    Ok(())
}

/// Halo-exchange bandwidth between subdomains on the GPUs present (subdomain i on GPU
/// i % count), through one [`HaloExchange`] built before the clock starts: an `n`³ grid split in
/// two along each axis in turn, halo 4 (the 25-point star's); one f32 field, then five f64
/// fields in one message per side (the Euler state). 20 exchanges after a warm-up, wall clock
/// with every GPU synchronised. Bytes count what crosses between the subdomains (both
/// directions): pack, copy and unpack are all in the time.
fn exchange_bandwidth(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    use stencil_runtime::{Decomposition, Domains, ErasedField, HaloExchange, HaloWidths};
    let count = Gpu::count()?;
    let gpus: Vec<Gpu> = (0..2).map(|i| Gpu::new(i % count)).collect::<Result<_, _>>()?;
    println!("halo exchange, {n}³ split in two, halo 4, {} GPU(s): {:?}", count.min(2), gpus);
    println!("\n| fields | split along | MB per exchange | ms per exchange | GB/s (both directions) |");
    println!("|---|---|---:|---:|---:|");
    for (what, fields, elem) in [("1 × f32", 1, 4), ("5 × f64", 5, 8)] {
        for axis in [2, 1, 0] {
            let mut grid = [1; 3];
            grid[axis] = 2;
            let d = Decomposition::new([n; 3], grid, [false; 3], [4; 3])?;
            let domains = Domains::new(d, gpus.clone())?;
            let like = Shape3::new([n; 3]).halo(4);
            let mut ex = HaloExchange::new(&domains);
            let (mut single, mut five) = (Vec::new(), Vec::new());
            if elem == 4 {
                ex.append::<f32>("u", HaloWidths([4; 3]));
            } else {
                for v in 0..fields {
                    ex.append::<f64>(&format!("q{v}"), HaloWidths([4; 3]));
                }
            }
            for s in d.subdomains() {
                let exec = domains.exec(s.index);
                if elem == 4 {
                    single.push(exec.alloc::<f32, 3>(s.shape(&like))?);
                } else {
                    let state = (0..fields).map(|_| exec.alloc::<f64, 3>(s.shape(&like)));
                    five.push(state.collect::<Result<Vec<_>, _>>()?);
                }
            }
            let mut erased: Vec<Vec<ErasedField<'_, 3>>> = if elem == 4 {
                single.iter_mut().map(|f| vec![ErasedField::of(f)]).collect()
            } else {
                five.iter_mut().map(|fs| fs.iter_mut().map(ErasedField::of).collect()).collect()
            };
            let sync = || gpus.iter().try_for_each(|g| g.synchronize());
            ex.exchange(&mut erased)?;
            sync()?;
            let reps = 20;
            let start = Instant::now();
            for _ in 0..reps {
                ex.exchange(&mut erased)?;
            }
            sync()?;
            let ms = start.elapsed().as_secs_f64() * 1e3 / reps as f64;
            let bytes = ex.bytes_sent()?;
            println!(
                "| {what} | {} | {:.1} | {ms:.3} | {:.0} |",
                ["x", "y", "z"][axis],
                bytes as f64 / 1e6,
                bytes as f64 / (ms * 1e-3) / 1e9
            );
        }
    }
    Ok(())
}

/// Overlap of the halo exchange with computation (`CompCommBinder`): the 7-point diffusion
/// stencil (f32) on an `n`³ grid split in two along z (subdomain i on GPU i % count), 50 steps
/// per configuration after a warm-up, wall clock with every GPU synchronised: the update alone
/// (no exchange), the exchange alone, then each mode. The exposed communication of a mode is its
/// step time less the update's; the hidden share is 1 − exposed / exchange.
fn overlap(n: usize, csv_path: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    use stencil_examples::diffusion::{halo, Real, Setup};
    use stencil_runtime::{CompCommBinder, Decomposition, Domains, ErasedField, HaloExchange, Halos, Overlap};
    let count = Gpu::count()?;
    let gpus: Vec<Gpu> = (0..2).map(|i| Gpu::new(i % count)).collect::<Result<_, _>>()?;
    let setup = Setup::cube(n, 50);
    let reach = halo()?.0;
    let d = Decomposition::new(setup.n, [1, 1, 2], [false; 3], reach)?;
    let domains = Domains::new(d, gpus.clone())?;
    let like = setup.shape();
    let ranges: Vec<_> = domains.subdomains().map(|s| Loop3D::interior(&s.shape(&like))).collect();
    let coefficients = setup.coefficients();
    let initial = setup.initial::<f32>()?;
    let mut state = (domains.scatter(&initial)?, domains.scatter(&initial)?);
    let mut ex = HaloExchange::new(&domains);
    ex.append::<f32>("f", stencil_runtime::HaloWidths(reach));
    println!("overlap, diffusion 7-point f32 {n}³ split in two along z, {} GPU(s): {gpus:?}", count.min(2));
    println!("\n| configuration | ms per step | exposed exchange (ms) | exchange hidden |");
    println!("|---|---:|---:|---:|");
    type Pair = (Vec<DeviceField3<f32>>, Vec<DeviceField3<f32>>);
    let mut time = |mode: Overlap, exchange: bool, update: bool| -> Result<f64, Box<dyn std::error::Error>> {
        let binder = CompCommBinder::new(&domains, ranges.clone(), reach, mode)?;
        let mut fill = |(f, g): &mut Pair, halos: Halos| {
            if !exchange {
                return Ok(());
            }
            let fields = if halos == Halos::Read { f } else { g };
            ex.exchange(&mut fields.iter_mut().map(|f| vec![ErasedField::of(f)]).collect::<Vec<_>>())
        };
        let step = |exec: &Gpu, i: usize, range: &Loop3D, (f, g): &mut Pair| {
            if update {
                f32::step(exec, range, &coefficients, &f[i], &mut g[i])
            } else {
                Ok(())
            }
        };
        binder.prime(&mut state, &mut fill)?;
        for _ in 0..3 {
            binder.step(&domains, &mut state, &mut fill, step)?;
        }
        domains.synchronize()?;
        let start = Instant::now();
        for _ in 0..setup.steps {
            binder.step(&domains, &mut state, &mut fill, step)?;
            std::mem::swap(&mut state.0, &mut state.1);
        }
        domains.synchronize()?;
        Ok(start.elapsed().as_secs_f64() * 1e3 / setup.steps as f64)
    };
    let compute = time(Overlap::None, false, true)?;
    let exchange = time(Overlap::None, true, false)?;
    println!("| update only | {compute:.3} | | |");
    println!("| exchange only | {exchange:.3} | | |");
    // The breakdown per configuration: update, exposed exchange (ms per step).
    let mut csv =
        format!("configuration,update_ms,exposed_ms\nupdate only,{compute:.5},0\nexchange only,0,{exchange:.5}\n");
    for mode in Overlap::ALL {
        let t = time(mode, true, true)?;
        let exposed = t - compute;
        println!("| {mode:?} | {t:.3} | {exposed:.3} | {:.0}% |", 100.0 * (1.0 - exposed / exchange));
        csv.push_str(&format!("{mode:?},{compute:.5},{:.5}\n", exposed.max(0.0)));
    }
    if let Some(path) = csv_path {
        std::fs::write(path, csv)?;
        println!("wrote {path} (scripts/plot-overlap draws it)");
    }
    Ok(())
}

/// Reductions over 2³⁰ f32 (1024³, no halo): each launch timed from before its first kernel to
/// after its result is on the host, against the copy bandwidth measured here on the same bytes.
fn reductions(gpu: &Gpu) -> Result<(), Box<dyn std::error::Error>> {
    let n = 1024;
    let bytes = n * n * n * 4;
    let copy = copy_bandwidth(gpu, bytes)?;
    let shape = Shape3::new([n, n, n]);
    let host = Field3::from_fn(shape, |[i, j, k]| ((i * 7 + j * 13 + k * 3) % 1001) as f32 * 1e-3);
    let exact: f64 = host.as_slice().iter().map(|&v| v as f64).sum();
    let u = gpu.upload(&host)?;
    drop(host);
    let range = Loop3D::interior(&shape);
    let (mut total, mut peak) = (Sum::new(), Max::new());
    let sum_ms = time_launches(gpu, || {
        total = Sum::new();
        gpu.run(&range, SumF32, (&u, &mut total))
    })?;
    let max_ms = time_launches(gpu, || {
        peak = Max::new();
        gpu.run(&range, MaxF32, (&u, &mut peak))
    })?;
    // The fixed cost of a launch: one plane, 2^20 points (4 MiB, about 1 µs of reading).
    let plane = Loop3D::from_bounds(shape.extent(), [0, 0, 0], [n, n, 1])?;
    let mut small = Sum::new();
    let small_ms = time_launches(gpu, || gpu.run(&plane, SumF32, (&u, &mut small)))?;
    let (mut t2, mut p2) = (Sum::new(), Max::new());
    let both_ms = time_launches(gpu, || {
        (t2, p2) = (Sum::new(), Max::new());
        gpu.run(&range, SumMaxF32, (&u, &mut t2, &mut p2))
    })?;
    println!("\nreductions over 2^30 f32 ({n}³): sum {} (f64 sum on the host {exact:.6e}, relative difference {:.1e}), max {}", total.get(), (total.get() as f64 - exact).abs() / exact, peak.get());
    // Another kernel may hold another number of blocks at once, so another grid and summation
    // order: the sums agree to rounding, the maxima exactly.
    assert_eq!(p2.get(), peak.get(), "the max of one pass = that of its own pass");
    assert!(((t2.get() - total.get()) / total.get()).abs() < 1e-5, "sums {} and {}", t2.get(), total.get());
    println!("\n| reduction (2^30 f32, one launch: both passes + result read) | ms | GB/s read | % of copy ({copy:.0} GB/s) |");
    println!("|---|---:|---:|---:|");
    for (what, ms) in [("sum", sum_ms), ("max", max_ms), ("sum and max in one pass", both_ms)] {
        let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
        println!("| {what} | {ms:.3} | {gbs:.0} | {:.1}% |", 100.0 * gbs / copy);
    }
    println!("\nfixed cost of a reducing launch (sum over one 1024² plane, 4 MiB): {:.3} ms", small_ms);
    Ok(())
}

/// The column model's sweeps on the GPU (module docs), checked against one host step.
fn column_sweeps(gpu: &Gpu, n: usize, levels: usize) -> Result<(), Box<dyn std::error::Error>> {
    use stencil_examples::column::{moist_bubble, Column, State};
    const DT: f64 = 5.0;
    const DZ: f64 = 100.0;
    const DIFFUSIVITY: f64 = 20.0;
    const BYTES: f64 = 88.0;
    let bytes = n * n * levels * 8;
    let copy = copy_bandwidth(gpu, bytes)?;
    let ijk = moist_bubble([n, n, levels], DZ);
    let points = (n * n * levels) as f64;
    println!("\n| {n} × {n} × {levels} f64 | order | ms | M points/s | effective GB/s | % of copy ({copy:.0} GB/s) |");
    println!("|---|---|---:|---:|---:|---:|");
    let mut checks = Vec::new();
    for order in [Order::Ijk, Order::Kij] {
        let reorder = |f: &Field3<f64>| Field3::from_fn(f.shape().order(order), |g| f.get(g).expect("a point of f"));
        let initial: State<Field3<f64>> = ijk.map(reorder);
        // One step on each executor from the same state: the diffusion gives the host's bits,
        // warm rain agrees to rounding (CUDA's `exp` and `pow` may differ from Rust's in the
        // last bit).
        let mut host = Column::new(&Host, &initial, DIFFUSIVITY, DZ)?;
        host.diffuse(&Host, DT)?;
        let mut dev = Column::new(gpu, &initial, DIFFUSIVITY, DZ)?;
        dev.diffuse(gpu, DT)?;
        let same = dev
            .state
            .t
            .download()?
            .as_slice()
            .iter()
            .zip(host.state.t.as_slice())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        host.rain(&Host, DT)?;
        dev.rain(gpu, DT)?;
        let worst = [(&dev.state.t, &host.state.t), (&dev.state.qv, &host.state.qv), (&dev.state.qr, &host.state.qr)]
            .into_iter()
            .map(|(d, h)| {
                let d = d.download().expect("download");
                d.as_slice()
                    .iter()
                    .zip(h.as_slice())
                    .map(|(a, b)| (a - b).abs() / b.abs().max(1e-30))
                    .fold(0.0, f64::max)
            })
            .fold(0.0, f64::max);
        checks.push(format!(
            "{order:?}: one step against the host: diffusion {}, largest relative difference after warm rain {worst:.1e}",
            if same { "bit-equal" } else { "DIFFERENT" }
        ));
        let diffuse_ms = time_launches(gpu, || dev.diffuse(gpu, DT))?;
        let rain_ms = time_launches(gpu, || dev.rain(gpu, DT))?;
        let step_ms = time_launches(gpu, || dev.step(gpu, DT))?;
        for (what, ms, b) in [
            ("diffusion (2 sweeps, 88 B/point)", diffuse_ms, BYTES),
            ("warm rain (1 sweep, 88 B/point)", rain_ms, BYTES),
            ("whole step (3 sweeps)", step_ms, 2.0 * BYTES),
        ] {
            let gbs = b * points / (ms * 1e-3) / 1e9;
            let rate = points / (ms * 1e-3) / 1e6;
            println!("| {what} | {order:?} | {ms:.3} | {rate:.0} | {gbs:.0} | {:.1}% |", 100.0 * gbs / copy);
        }
    }
    for line in checks {
        println!("{line}");
    }
    Ok(())
}

/// S1 (the 7-point diffusion, f32) run for many steps: the single-step sweeps of the fastest
/// strategies against sweeps of several steps (`run_steps_with`), as effective bandwidth (8 bytes
/// per point and step) in % of the copy measured in this process; each tiling's result is
/// checked bit for bit against the single steps'. `temporal_blocking_fma`: the same with the
/// products fused (`#[stencil(fma)]`: 7 instead of 13 floating-point operations per point).
macro_rules! temporal_blocking {
    ($name:ident, $functor:ident) => {
        fn $name(gpu: &Gpu, n: usize, only: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
            let shape = Shape3::new([n, n, n]).halo(1);
            let range = Loop3D::interior(&shape);
            let copy = gpu.copy_bandwidth_gbs(n * n * n * 4, 20)?;
            println!("device: {}; copy of {} MiB: {copy:.0} GB/s", gpu.name(), (n * n * n * 4) >> 20);
            let start = Field3::from_fn(shape, |[i, j, k]| ((i * 7 + j * 3 + k) % 29) as f32 * 0.03);
            let c = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4);
            let total = 30;
            let pct = |ms_per_step: f64| 100.0 * (n * n * n * 8) as f64 / (ms_per_step * 1e-3) / 1e9 / copy;
            println!("\n{total} steps of {n}^3 per timed run (median of 5)\n");
            // The median of 5 timed runs of `total` steps, per step.
            let ms_per_step = |mut run: Box<dyn FnMut() -> Result<(), LaunchError> + '_>| -> Result<f64, LaunchError> {
                let mut samples = Vec::new();
                for _ in 0..5 {
                    let (r, ms) = gpu.time_ms(|| Ok(run()))?;
                    r?;
                    samples.push(ms / total as f64);
                }
                Ok(median(samples))
            };
            println!("| sweep | steps per sweep | ms per step | effective % of copy | bits as single steps |");
            println!("|---|---:|---:|---:|---|");
            let single = [
                Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 8 },
                Strategy::ZMarch { block_x: 128, block_y: 1, points_per_thread: 16 },
                Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
            ];
            let mut reference = None;
            for s in single {
                let (mut f, mut g) = (gpu.upload(&start)?, gpu.upload(&start)?);
                let run = |f: &mut DeviceField3<f32>, g: &mut DeviceField3<f32>| -> Result<(), LaunchError> {
                    for _ in 0..total {
                        range.with_strategy(s).run_on(
                            gpu,
                            $functor,
                            (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &*f, &mut *g),
                        )?;
                        std::mem::swap(f, g);
                    }
                    Ok(())
                };
                run(&mut f, &mut g)?;
                if reference.is_none() {
                    reference = Some(f.download()?);
                }
                let ms = ms_per_step(Box::new(|| run(&mut f, &mut g)))?;
                println!("| {s} | 1 | {ms:.3} | {:.1}% | (reference) |", pct(ms));
            }
            let reference = reference.expect("a single-step run");
            let mut tilings = Vec::new();
            // Threads along c and m, points per thread along c.
            let shapes = [
                (32, 32, 1),
                (32, 16, 1),
                (32, 32, 2),
                (16, 32, 2),
                (16, 64, 2),
                (16, 16, 4),
                (8, 32, 4),
                (8, 64, 4),
                (16, 32, 4),
            ];
            for steps in [3, 5, 7] {
                for (x, y, lanes) in shapes {
                    for planes in [64, 128] {
                        tilings.push(TimeTiling { tile_x: x, tile_y: y, steps, planes, lanes });
                    }
                }
            }
            for t in tilings.into_iter().filter(|t| only.is_none_or(|o| t.label().contains(o))) {
                let (mut f, mut g) = (gpu.upload(&start)?, gpu.upload(&start)?);
                let run = |f: &mut DeviceField3<f32>, g: &mut DeviceField3<f32>| {
                    gpu.run_steps_with(&range, $functor, total, Some(t), (f, g), &(), |f, g, _| {
                        (c.0, c.1, c.2, c.3, c.4, c.5, c.6, f, g)
                    })
                };
                if let Err(e) = run(&mut f, &mut g) {
                    println!("| {t} | {} | - | - | cannot run: {e} |", t.steps);
                    continue;
                }
                let same =
                    f.download()?.as_slice().iter().zip(reference.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits());
                let ms = ms_per_step(Box::new(|| run(&mut f, &mut g)))?;
                println!(
                    "| {t} | {} | {ms:.3} | {:.1}% | {} |",
                    t.steps,
                    pct(ms),
                    if same { "equal" } else { "DIFFERENT" }
                );
            }
            Ok(())
        }
    };
}
temporal_blocking!(temporal_blocking, Diffusion7);
temporal_blocking!(temporal_blocking_fma, Diffusion7Fma);

#[derive(clap::Parser)]
#[command(about = "GPU strategies against the copy bandwidth; launch path, exchange, overlap and reduction parts")]
struct Args {
    /// Points per axis of the cube.
    #[arg(default_value_t = 512)]
    n: usize,
    /// The halo exchange between two subdomains on this GPU instead.
    #[arg(long, conflicts_with_all = ["overlap", "reduce", "launch_only"])]
    exchange: bool,
    /// The overlap modes' per-step breakdown instead.
    #[arg(long, conflicts_with_all = ["reduce", "launch_only"])]
    overlap: bool,
    /// With --overlap: also write the breakdown as CSV (scripts/plot-overlap draws it).
    #[arg(long, requires = "overlap")]
    csv: Option<String>,
    /// Reductions over 2^30 f32 instead.
    #[arg(long, conflicts_with = "launch_only")]
    reduce: bool,
    /// Only the launch path.
    #[arg(long)]
    launch_only: bool,
    /// Several 7-point steps per sweep (temporal blocking) against the best single-step sweeps.
    #[arg(long, conflicts_with_all = ["exchange", "overlap", "reduce", "launch_only"])]
    steps: bool,
    /// With --steps: only the tilings whose label contains this.
    #[arg(long, requires = "steps")]
    tilings: Option<String>,
    /// With --steps: the stencil with its products fused (`#[stencil(fma)]`).
    #[arg(long, requires = "steps")]
    fma: bool,
    /// The column model's sweeps (n² columns) instead.
    #[arg(long, conflicts_with_all = ["exchange", "overlap", "reduce", "launch_only", "steps"])]
    columns: bool,
    /// With --columns: levels per column.
    #[arg(long, requires = "columns", default_value_t = 128)]
    levels: usize,
    /// Only the strategies whose label contains this (skips the compile and launch-path parts).
    #[arg(long)]
    only: Option<String>,
    /// The rows' alignment in elements (`Shape::align`; the default shape's otherwise).
    #[arg(long)]
    align: Option<usize>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = <Args as clap::Parser>::parse();
    let n = args.n;
    let gpu = Gpu::new(0)?;
    if args.exchange {
        return exchange_bandwidth(n);
    }
    if args.overlap {
        return overlap(n, args.csv.as_deref());
    }
    if args.reduce {
        return reductions(&gpu);
    }
    if args.steps && args.fma {
        return temporal_blocking_fma(&gpu, n, args.tilings.as_deref());
    }
    if args.steps {
        return temporal_blocking(&gpu, n, args.tilings.as_deref());
    }
    if args.columns {
        return column_sweeps(&gpu, n, args.levels);
    }
    if args.launch_only {
        println!("device: {} (sm_{}{})", gpu.name(), gpu.compute_capability().0, gpu.compute_capability().1);
        return launch_overhead(&gpu);
    }
    let copy_bytes = n * n * n * 4;
    let copy = copy_bandwidth(&gpu, copy_bytes)?;
    let points = (n * n * n) as f64;
    let mut rows = Vec::new();
    let only = args.only;
    let strategies =
        || strategies().into_iter().filter(|s| only.as_ref().is_none_or(|o| s.label().contains(o.as_str())));

    let aligned = |s: Shape3| args.align.map_or(s, |a| s.align(a));
    let s1 = aligned(Shape3::new([n, n, n]).halo(1));
    let r1 = Loop3D::interior(&s1);
    let f = gpu.upload(&Field3::from_fn(s1, |[i, j, k]| ((i + 2 * j + 3 * k) % 17) as f32 * 0.01))?;
    let mut g = gpu.alloc::<f32, 3>(s1)?;
    for s in strategies() {
        let ms = time_launches(&gpu, || {
            r1.with_strategy(s).run_on(&gpu, Diffusion7, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut g))
        })?;
        rows.push(("diffusion7", s, ms, 8.0));
        // The same with its products fused (#[stencil(fma)]): fewer instructions, other bits.
        let ms = time_launches(&gpu, || {
            r1.with_strategy(s).run_on(&gpu, Diffusion7Fma, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut g))
        })?;
        rows.push(("diffusion7 fma", s, ms, 8.0));
    }
    drop((f, g));

    let s4 = aligned(Shape3::new([n, n, n]).halo(4));
    let r4 = Loop3D::interior(&s4);
    let u = gpu.upload(&Field3::from_fn(s4, |[i, j, k]| ((i + j + k) % 13) as f32 * 0.01))?;
    let up = gpu.upload(&Field3::from_fn(s4, |[i, j, k]| ((i * j + k) % 7) as f32 * 0.01))?;
    let v2 = gpu.upload(&Field3::filled(s4, 0.25f32))?;
    let mut un = gpu.alloc::<f32, 3>(s4)?;
    for s in strategies() {
        let ms = time_launches(&gpu, || r4.with_strategy(s).run_on(&gpu, Acoustic25, (0.1, &u, &up, &v2, &mut un)))?;
        rows.push(("acoustic25", s, ms, 16.0));
        let ms = time_launches(&gpu, || r4.with_strategy(s).run_on(&gpu, Acoustic25Fma, (0.1, &u, &up, &v2, &mut un)))?;
        rows.push(("acoustic25 fma", s, ms, 16.0));
    }
    drop((u, up, v2, un));

    println!("\n| stencil | strategy | ms/step | GPts/s | effective GB/s | % of copy |");
    println!("|---|---|---:|---:|---:|---:|");
    for (name, s, ms, bytes) in &rows {
        let gpts = points / (ms * 1e-3) / 1e9;
        let gbs = gpts * bytes;
        println!("| {name} | {s} | {ms:.3} | {gpts:.1} | {gbs:.0} | {:.1}% |", 100.0 * gbs / copy);
    }
    for name in ["diffusion7", "diffusion7 fma", "acoustic25", "acoustic25 fma"] {
        let best = rows.iter().filter(|r| r.0 == name).min_by(|a, b| a.2.total_cmp(&b.2)).expect("rows");
        let gbs = points / (best.2 * 1e-3) / 1e9 * best.3;
        println!("best {name}: {} at {:.1}% of copy bandwidth", best.1, 100.0 * gbs / copy);
    }
    if only.is_some() {
        return Ok(());
    }

    // Compile costs: a cold NVRTC compile, a load from the disk cache, a memory-cache hit.
    let dir = std::env::temp_dir().join(format!("stencil-bench-cache-{}", std::process::id()));
    let fresh = Gpu::with_disk_cache(0, Some(DiskCache::new(&dir)))?;
    let k =
        cuda_kernel::<Acoustic25, 3>(Strategy::ZMarch { block_x: 64, block_y: 2, points_per_thread: 16 }, &s4, &r4)?;
    let opts = stencil_runtime::cuda::KERNEL_OPTIONS;
    let (_, cold) = fresh.kernel_with_stats(&k.source, &k.entry, opts)?;
    fresh.clear_memory_cache();
    let (_, disk) = fresh.kernel_with_stats(&k.source, &k.entry, opts)?;
    let (_, mem) = fresh.kernel_with_stats(&k.source, &k.entry, opts)?;
    println!("\nkernel acoustic25/zmarch: cold compile {:.1} ms ({:?}), disk-cache load {:.3} ms ({:?}), memory-cache hit {:.3} ms ({:?})",
        cold.elapsed.as_secs_f64() * 1e3, cold.origin, disk.elapsed.as_secs_f64() * 1e3, disk.origin, mem.elapsed.as_secs_f64() * 1e3, mem.origin);
    let _ = std::fs::remove_dir_all(&dir);
    launch_overhead(&gpu)
}
