//! A 3D blast wave with the compressible Euler model of `stencil_examples::euler` (seed paper
//! 000): a sphere of high pressure in a closed box (reflecting walls) of gas at rest, run to
//! `--t-end` on the CPU (or a GPU), printing the conserved totals at the start and the end and
//! writing a PNG of the density in the mid-height xy plane. `--domains N` splits the grid over N
//! host subdomains, `--gpus N` over N subdomains on GPUs (with the `cuda` feature), under
//! `mpiexec` over the ranks too; `--grid PX,PY,PZ` gives the process grid. The model's code is
//! the same everywhere (`Distributed`), and the result is the single-domain one, bit for bit.
//! `--checkpoint-every N` writes the state every N steps, `--restart FILE` resumes from such a
//! checkpoint on any placement, bit for bit.
//! `cargo run --release -p stencil-examples --bin euler3d -- --help` lists the options.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::euler::{Boundary, Conserved, Euler, Limiter, Riemann, Scheme};
use stencil_examples::output::write_png_image;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_runtime::{Executor, Field3, Overlap};

/// A spherical blast wave (pressure 10 inside radius 0.1, 0.1 outside, density 1) in the unit
/// box with reflecting walls: Euler equations, γ = 1.4, Koren-limited κ-scheme, SSP-RK3.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Cells along every axis.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// End time.
    #[arg(long, default_value_t = 0.12)]
    t_end: f64,
    /// Courant number of the time step (Δt = C / max Σ (|u_axis| + c) / h).
    #[arg(long, default_value_t = 0.5)]
    cfl: f64,
    /// Fused or split RK stages.
    #[arg(long, value_enum, default_value_t = Scheme::Fused)]
    scheme: Scheme,
    /// Riemann solver.
    #[arg(long, value_enum, default_value_t = Riemann::Hllc)]
    riemann: Riemann,
    /// Slope limiter.
    #[arg(long, value_enum, default_value_t = Limiter::Koren)]
    limiter: Limiter,
    /// Directory for the output files (created if missing).
    #[arg(long, default_value = "euler3d-out")]
    out: PathBuf,
    /// Where to run: --gpu, --domains, --gpus, --grid.
    #[command(flatten)]
    placement: PlacementArgs,
    /// How a decomposed run overlaps each stage's halo exchange (the fused scheme).
    #[command(flatten)]
    overlap: OverlapArgs,
    /// Compute the CFL time step every this many steps (on a GPU each costs a download of one
    /// field; the last step is reused meanwhile).
    #[arg(long, default_value_t = 1)]
    dt_every: usize,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    main_of("euler3d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if args.size < 2 || !positive(args.t_end) || !positive(args.cfl) {
        return Err("--size must be at least 2, --t-end and --cfl positive".into());
    }
    if args.cfl > 1.0 {
        return Err(format!(
            "--cfl {} is above 1: the time step sums the signal speeds over the three axes, and SSP-RK3 with \
             limited reconstruction is stable only up to 1; use --cfl 0.5",
            args.cfl
        )
        .into());
    }
    let mut e = Euler::cube(args.size, 1.0);
    e.cfl = args.cfl;
    // No overlap by default: with the hand-written binder on one H200, two subdomains ran 307
    // (64³) and 1166 (128³) M cell-updates/s per stage without it, 120-126 and 648-650 with it
    // (the fused stage on two-cell slabs runs far below its whole-subdomain rate).
    let overlap = args.overlap.or(Overlap::None);
    e.boundaries = [Boundary::Reflective; 3];
    (e.scheme, e.riemann, e.limiter) = (args.scheme, args.riemann, args.limiter);
    // Five conserved fields and two stage buffers (split: and fifteen face fluxes) on the
    // executor; the initial and the final state on the host.
    let fields = if e.scheme == Scheme::Split { 30 } else { 15 };
    let footprint = Footprint { executor: fields * 8, host: 10 * 8 };
    let decompose = |domains| e.decompose(domains, args.placement.grid);
    let placement = processes.place("euler3d", &args.placement, &e.shape(), footprint, decompose)?;
    let q0 = e.from_primitive(|x| {
        let r2: f64 = x.iter().map(|x| (x - 0.5) * (x - 0.5)).sum();
        let p = if r2 < 0.01 { 10.0 } else { 0.1 };
        [1.0, 0.0, 0.0, 0.0, p]
    });
    println!(
        "euler3d: blast wave, {n}^3 cells (h = {:.4e}), reflecting walls, t_end = {}, CFL {}, {:?} + {:?}, {:?} stages, {} threads",
        e.h[0],
        args.t_end,
        e.cfl,
        e.limiter,
        e.riemann,
        e.scheme,
        rayon::current_num_threads(),
        n = args.size,
    );
    placement.print();
    let start = e.totals(&q0);
    print_totals("start", &start);

    let bar = ProgressBar::new(1000);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} t = {msg}, {elapsed_precise} elapsed, eta {eta}")
            .expect("a valid template"),
    );
    // The clock starts after the first step, which prepares the kernels (compiles them on a
    // GPU); the next step's time-step download waits for it.
    // (After a restart, the first step run is the restart's.)
    // It stops after the last step is issued, before the final state is downloaded: each
    // step's time-step download waits for the step before it.
    let clock = std::cell::Cell::new(Instant::now());
    let stop = std::cell::Cell::new(None::<Instant>);
    let first = std::cell::Cell::new(None);
    let progress = |step: usize, t: f64| {
        bar.set_position((1000.0 * t / args.t_end) as u64);
        bar.set_message(format!("{t:.4} (step {step})"));
        stop.set(Some(Instant::now()));
        if first.get().is_none() {
            first.set(Some(step));
            clock.set(Instant::now());
        }
    };
    let plan = args.checkpoint.plan("euler3d", processes)?;
    let job = Blast { e: &e, q0: &q0, t_end: args.t_end, dt_every: args.dt_every, plan: &plan, progress };
    let run = processes.run(placement, overlap, "euler3d", job);
    bar.finish_and_clear();
    let (q, steps, restart) = run?;
    if restart > 0 {
        println!("restarted from step {restart}");
    }
    if processes.world().rank() != 0 {
        return Ok(()); // every rank holds the state; rank 0 reports it and writes the picture
    }
    let seconds = stop.get().map_or(0.0, |t| (t - clock.get()).as_secs_f64()).max(1e-9);
    let cells = (args.size as f64).powi(3);
    let first = first.get().unwrap_or(1);
    let timed = steps.saturating_sub(first).max(1);
    println!(
        "{steps} steps; steps {}..{steps} in {seconds:.2} s: {:.2} M cell-updates/s per RK stage ({} cells, 3 stages \
         per step; the first step prepares the kernels and is not timed)",
        first + 1,
        cells * timed as f64 * 3.0 / seconds / 1e6,
        cells,
    );
    let end = e.totals(&q);
    print_totals("end", &end);
    let rel = |v: usize| (end[v] - start[v]).abs() / start[v].abs();
    println!("mass and energy relative change: {:.2e}, {:.2e} (reflecting walls conserve both)", rel(0), rel(4));

    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let path = args.out.join("density_xy.png");
    let (slice, lo, hi) = density_slice(&e, &q);
    write_png_image(&path, &slice, args.size, lo, hi)?;
    println!("wrote:\n  {:<28} density in the xy plane at mid height (z = 0.5), {lo:.3} to {hi:.3}", path.display());
    Ok(())
}

fn print_totals(when: &str, t: &[f64; 5]) {
    println!(
        "{when:>5}: mass {:.12e}, momentum ({:+.3e}, {:+.3e}, {:+.3e}), energy {:.12e}",
        t[0], t[1], t[2], t[3], t[4]
    );
}

/// The density in the plane `k = n/2`, row-major (x across, y down), with its min and max.
fn density_slice(e: &Euler, q: &Conserved<Field3<f64>>) -> (Vec<f32>, f32, f32) {
    let (nx, k) = (e.n[0], e.n[2] / 2);
    let mut slice = vec![0.0f32; nx * e.n[1]];
    e.for_each_cell(q, |c, q| {
        if c[2] == k {
            slice[c[1] * nx + c[0]] = q[0] as f32;
        }
    });
    let lo = slice.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = slice.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    (slice, lo, hi)
}

/// The run on whatever executor the options chose, checkpointed or not (one loop: `plan` may
/// write none and restart from none): the final state, the step count and the step it
/// restarted from (0 without a restart).
struct Blast<'a, P> {
    e: &'a Euler,
    q0: &'a Conserved<Field3<f64>>,
    t_end: f64,
    dt_every: usize,
    plan: &'a Plan,
    progress: P,
}

impl<P: FnMut(usize, f64)> OnExecutor for Blast<'_, P> {
    type Output = (Conserved<Field3<f64>>, usize, usize);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let Blast { e, q0, t_end, dt_every, plan, progress } = self;
        println!("running on {}, CFL step from a download every {dt_every} steps", exec.describe());
        stencil_examples::euler::run_with(e, exec, q0, t_end, dt_every, plan, progress)
    }
}
