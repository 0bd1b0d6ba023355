//! A 3D blast wave with the compressible Euler model of `stencil_examples::euler`: a sphere of
//! high pressure in a closed box of gas at rest, run to `--t-end` on the CPU, a GPU, subdomains
//! or MPI ranks (the same code and the same bits everywhere), printing the conserved totals and
//! writing a PNG of the density in the mid-height xy plane. `--help` lists the options.

use std::path::PathBuf;

use clap::Parser;
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::euler::{self, Boundary, Conserved, Euler, Limiter, Riemann, Scheme};
use stencil_examples::output::write_png_xy;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
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
    /// Size the time step from the step's own state every K steps (the host waits for the GPU
    /// each time; the last size is reused meanwhile). Without it, each step's size comes from
    /// the state one step before, its reduction collected while the step runs, so the host
    /// never waits (other bits; the run stops if a step exceeds the CFL limit of 1).
    #[arg(long, value_name = "K", conflicts_with = "dt_on_device")]
    dt_every: Option<usize>,
    /// Size each step from its own state on the executor (the bits of --dt-every 1): the CFL
    /// rate and the clock are reduced into values held there and read by the stages, and after
    /// two steps each step is replayed as a recorded graph (GPU subdomains: with
    /// STENCIL_RECORD=1); the host reads the clock after each step.
    #[arg(long)]
    dt_on_device: bool,
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
    if args.dt_every == Some(0) {
        return Err("need --dt-every >= 1 (steps between time-step sizings)".into());
    }
    if args.size < 2 || !positive(args.t_end) || !positive(args.cfl) || args.cfl > 1.0 {
        let why = "SSP-RK3 with limited reconstruction and the step summed over three axes is stable up to 1";
        return Err(format!("need --size >= 2, --t-end > 0 and 0 < --cfl <= 1 ({why})").into());
    }
    let mut e = Euler::cube(args.size, 1.0);
    (e.cfl, e.boundaries) = (args.cfl, [Boundary::Reflective; 3]);
    (e.dt_lagged, e.dt_on_device) = (args.dt_every.is_none() && !args.dt_on_device, args.dt_on_device);
    (e.scheme, e.riemann, e.limiter) = (args.scheme, args.riemann, args.limiter);
    // Five conserved fields and two stage buffers (split: and fifteen face fluxes) on the
    // executor; the initial and the final state on the host.
    let fields = if e.scheme == Scheme::Split { 30 } else { 15 };
    let footprint = Footprint { executor: fields * 8, host: 10 * 8 };
    let decompose = |domains| e.decompose(domains, args.placement.grid);
    let placement = processes.place("euler3d", &args.placement, &e.shape(), footprint, decompose)?;
    let q0 = e.from_primitive(|x| {
        let r2: f64 = x.iter().map(|x| (x - 0.5) * (x - 0.5)).sum();
        [1.0, 0.0, 0.0, 0.0, if r2 < 0.01 { 10.0 } else { 0.1 }]
    });
    let (n, h, threads) = (args.size, e.h[0], rayon::current_num_threads());
    println!(
        "euler3d: blast wave, {n}^3 cells (h = {h:.4e}), reflecting walls, t_end = {}, CFL {}, {:?} + {:?}, {:?} \
         stages, {threads} threads",
        args.t_end, e.cfl, e.limiter, e.riemann, e.scheme,
    );
    placement.print();
    let totals = |when: &str, [m, x, y, z, e]: &[f64; 5]| {
        println!("{when:>5}: mass {m:.12e}, momentum ({x:+.3e}, {y:+.3e}, {z:+.3e}), energy {e:.12e}")
    };
    let start = e.totals(&q0);
    totals("start", &start);
    let rank0 = processes.world().rank() == 0;
    let timed = Timed::new(progress::time(rank0), euler::WARM_UP);
    let plan = args.checkpoint.plan("euler3d", processes)?;
    let job = Blast { e: &e, q0: &q0, args, plan: &plan, timed: &timed };
    let run = processes.run(placement, args.overlap.or(Overlap::Auto), "euler3d", job);
    timed.bar.finish_and_clear();
    let (q, steps, restart) = run?;
    if !rank0 {
        return Ok(()); // every rank holds the state; rank 0 reports it and writes the picture
    }
    if restart > 0 {
        println!("restarted from step {restart}");
    }
    // Each step's time-step download waits for the step before it: a tick follows the work.
    if let Some(t) = timed.timing(None) {
        let (rate, cells) = (t.per_second(3.0 * (n as f64).powi(3)) / 1e6, n.pow(3));
        println!(
            "{steps} steps; {t}: {rate:.2} M cell-updates/s per RK stage ({cells} cells, 3 stages per step; the first \
             step prepares the kernels and is not timed)"
        );
    }
    let end = e.totals(&q);
    totals("end", &end);
    let rel = |v: usize| (end[v] - start[v]).abs() / start[v].abs();
    println!("mass and energy relative change: {:.2e}, {:.2e} (reflecting walls conserve both)", rel(0), rel(4));

    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let path = args.out.join("density_xy.png");
    let (lo, hi) = write_png_xy(&path, &q[0], args.size / 2)?;
    println!("wrote:\n  {:<28} density in the xy plane at mid height (z = 0.5), {lo:.3} to {hi:.3}", path.display());
    Ok(())
}

/// The run on whatever executor the options chose, checkpointed or not: the final state, the
/// step count and the step it restarted from (0 without a restart).
struct Blast<'a> {
    e: &'a Euler,
    q0: &'a Conserved<Field3<f64>>,
    args: &'a Args,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for Blast<'_> {
    type Output = (Conserved<Field3<f64>>, usize, usize);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let Blast { e, q0, args, plan, timed } = self;
        let (t_end, dt_every) = (args.t_end, args.dt_every.unwrap_or(1));
        let when = match (e.dt_lagged, e.dt_on_device) {
            (_, true) => "every step on the executor".to_string(),
            (true, _) => "lagged by one step".to_string(),
            _ => format!("every {dt_every} steps"),
        };
        timed.bar.println(format!("running on {}, CFL step {when}", exec.describe()));
        e.run(exec, q0, t_end, dt_every, plan, |step, t| timed.tick_at(step, t, t_end))
    }
}
