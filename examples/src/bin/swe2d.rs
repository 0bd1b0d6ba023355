//! The shallow water model of Xu et al. 2019 (`stencil_examples::swe`: MUSCL-minmod, HLL, SSP-RK3): a
//! circular dam break in a square basin with reflective walls, run on the CPU, a GPU, subdomains
//! or MPI ranks (the same code and the same bits everywhere), printing the total mass at the
//! start and the end (conserved to round-off) and writing a PNG of the depth. `--help` lists the
//! options.

use std::path::PathBuf;

use clap::Parser;
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::output::write_png_field;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
use stencil_examples::swe::{self, circular_dam, Edge, Model, State};
use stencil_runtime::{Executor, Field2, Overlap};

/// Circular dam break: depth --h-in within --radius of the centre of a walled square basin,
/// --h-out outside, water at rest; shallow water equations until --t-end.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Cells along each side.
    #[arg(long, default_value_t = 400)]
    size: usize,
    /// Side of the basin, m.
    #[arg(long, default_value_t = 40.0)]
    length: f64,
    /// Radius of the dam, m.
    #[arg(long, default_value_t = 8.0)]
    radius: f64,
    /// Depth inside the dam, m.
    #[arg(long, default_value_t = 2.0)]
    h_in: f64,
    /// Depth outside the dam, m (keep it positive: dry cells are not handled).
    #[arg(long, default_value_t = 1.0)]
    h_out: f64,
    /// Simulated time, s.
    #[arg(long, default_value_t = 4.0)]
    t_end: f64,
    /// CFL number: dt = cfl * dx / max(max(|u|, |v|) + sqrt(g h)).
    #[arg(long, default_value_t = 0.4)]
    cfl: f64,
    /// Directory for the output file (created if missing).
    #[arg(long, default_value = "swe2d-out")]
    out: PathBuf,
    /// Where to run: --gpu, --domains, --gpus, --grid (PX,PY).
    #[command(flatten)]
    placement: PlacementArgs<2>,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    main_of("swe2d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    if args.size < 4 || args.length <= 0.0 || args.t_end <= 0.0 || !(args.cfl > 0.0 && args.cfl <= 0.5) {
        return Err("need --size >= 4, --length > 0, --t-end > 0 and 0 < --cfl <= 0.5".into());
    }
    if args.h_in <= 0.0 || args.h_out <= 0.0 {
        return Err("--h-in and --h-out must be positive: dry cells are not handled".into());
    }
    let (n, dx, t_end) = (args.size, args.length / args.size as f64, args.t_end);
    let model = Model { n: [n; 2], dx: [dx; 2], edges: [Edge::Wall; 2], cfl: args.cfl };
    // The state and two stage states on the executor (nine f64 fields), the initial and the final
    // state on the host.
    let footprint = Footprint { executor: 9 * 8, host: 6 * 8 };
    let decompose = |domains| model.decompose(domains, args.placement.grid);
    let placement = processes.place("swe2d", &args.placement, &model.shape(), footprint, decompose)?;
    let q0 = model.initial(circular_dam(args.radius, args.h_in, args.h_out));
    let (len, r, threads) = (args.length, args.radius, rayon::current_num_threads());
    println!(
        "swe2d: {n}x{n} cells of {dx:.4} m ({len} m basin, walls), dam r = {r} m, h = {} m inside, {} m outside, \
         t_end = {t_end} s, cfl {}, HLL + MUSCL-minmod + SSP-RK3, {threads} threads",
        args.h_in, args.h_out, args.cfl,
    );
    placement.print();
    let m0 = model.mass(&q0);
    println!("mass at t = 0: {m0:.15e} m^3");
    let rank0 = processes.world().rank() == 0;
    if rank0 {
        std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    }
    let timed = Timed::new(progress::time(rank0), 1);
    let plan = args.checkpoint.plan("swe2d", processes)?;
    let job = DamBreak { model, q0: &q0, t_end, plan: &plan, timed: &timed };
    let run = processes.run(placement, Overlap::None, "swe2d", job);
    timed.bar.finish_and_clear();
    let (steps, q, start) = run?;
    if !rank0 {
        return Ok(()); // every rank holds the state; rank 0 reports it and writes the picture
    }
    if start > 0 {
        println!("restarted from step {start}");
    }
    // Each step's CFL reduction (one number read back) waits for the step before it.
    if let Some(t) = timed.timing(None) {
        let rate = t.per_second((n * n) as f64) / 1e6;
        let note = "3 stages each, the CFL reduction included; the first step prepares the kernels and is not timed";
        println!("{steps} steps; {t}: {rate:.1} Mcell-steps/s ({note})");
    }
    let m1 = model.mass(&q);
    println!("mass at t = {t_end}: {m1:.15e} m^3 (relative change {:.2e})", (m1 - m0) / m0);
    let path = args.out.join("depth.png");
    let (lo, hi) = write_png_field(&path, &q.h)?;
    println!("depth at t = {t_end}: min {lo:.6} m, max {hi:.6} m");
    println!("wrote:\n  {:<22} h at t = {t_end} s ({n}x{n}, y up, min..max colour scale)", path.display());
    Ok(())
}

/// The run on whatever executor the options chose, from `q0` (or the checkpoint `plan.restart`)
/// to `t_end`, checkpointed as `plan` says: the steps taken, the final host state and the step it
/// started from.
struct DamBreak<'a> {
    model: Model,
    q0: &'a State<Field2<f64>>,
    t_end: f64,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for DamBreak<'_> {
    type Output = (usize, State<Field2<f64>>, usize);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let DamBreak { model, q0, t_end, plan, timed } = self;
        timed.bar.println(format!("running on {}", exec.describe()));
        let tick = |step, t| timed.tick_at(step, t, t_end);
        let (solver, start) = swe::run_with(exec.clone(), model, q0, t_end, plan, tick)?;
        Ok((solver.steps, solver.state()?, start))
    }
}
