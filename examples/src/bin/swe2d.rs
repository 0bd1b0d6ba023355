//! Seed paper 000's shallow water model on the CPU (or a GPU): a circular dam break in a square
//! basin with reflective walls (`examples/src/swe.rs`: MUSCL-minmod, HLL, SSP-RK3). Prints the
//! total mass at the start and the end (conserved to round-off) and writes a PNG of the depth.
//! `--domains N` splits the grid over N host subdomains, `--gpus N` over N subdomains on GPUs
//! (with the `cuda` feature), over MPI ranks with the `mpi` feature (`mpiexec -n R`, N a multiple
//! of R); `--grid PX,PY` gives the process grid. The model's code is the same everywhere
//! (`Distributed`), and the result is the single-domain one, bit for bit. `--checkpoint-every N`
//! writes the state every N steps, `--restart FILE` resumes from such a checkpoint on any
//! placement, bit for bit.
//! `cargo run --release -p stencil-examples --bin swe2d -- --help` lists the options.

use std::path::PathBuf;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::output::write_png_image;
use stencil_examples::placement::{main_of, parse_grid_of, Footprint, OnExecutor, PlacementArgs, Processes};
use stencil_examples::swe::{circular_dam, Edge, Model, State};
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
    /// Run on this GPU (needs a build with `--features cuda`).
    #[arg(long, env = "STENCIL_GPU")]
    gpu: Option<usize>,
    /// Split the grid over N host subdomains (over the MPI ranks of `mpiexec -n R` with the `mpi`
    /// feature, N a multiple of R).
    #[arg(long, value_name = "N", env = "STENCIL_DOMAINS")]
    domains: Option<usize>,
    /// Split the grid over N subdomains on GPUs, subdomain i on GPU i % (number of GPUs) (needs a
    /// build with `--features cuda`).
    #[arg(long, value_name = "N", env = "STENCIL_GPUS")]
    gpus: Option<usize>,
    /// Process grid of the subdomains, e.g. 2,3 or 2x3 (with --domains or --gpus; its product
    /// must be N). Chosen for the least halo surface when not given.
    #[arg(long, value_name = "PX,PY", value_parser = parse_grid_of::<2>, env = "STENCIL_GRID")]
    grid: Option<[usize; 2]>,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    main_of("swe2d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    let placement = PlacementArgs { gpu: args.gpu, domains: args.domains, gpus: args.gpus, grid: None };
    if args.grid.is_some() && placement.target("swe2d")?.domains().is_none() {
        return Err("--grid gives the process grid of --domains N or --gpus N: give one of them too".into());
    }
    if args.size < 4 || args.length <= 0.0 || args.t_end <= 0.0 || !(args.cfl > 0.0 && args.cfl <= 0.5) {
        return Err("need --size >= 4, --length > 0, --t-end > 0 and 0 < --cfl <= 0.5".into());
    }
    if args.h_in <= 0.0 || args.h_out <= 0.0 {
        return Err("--h-in and --h-out must be positive: dry cells are not handled".into());
    }
    let dx = args.length / args.size as f64;
    let model = Model { n: [args.size; 2], dx: [dx; 2], edges: [Edge::Wall; 2], cfl: args.cfl };
    // The state and two stage states on the executor (nine f64 fields), the initial and the final
    // state on the host.
    let footprint = Footprint { executor: 9 * 8, host: 6 * 8 };
    let decompose = |domains| model.decompose(domains, args.grid);
    let placement = processes.place("swe2d", &placement, &model.shape(), footprint, decompose)?;
    let q0 = model.initial(circular_dam(args.radius, args.h_in, args.h_out));
    println!(
        "swe2d: {n}x{n} cells of {dx:.4} m ({len} m basin, walls), dam r = {r} m, h = {hi} m inside, {ho} m \
         outside, t_end = {t} s, cfl {cfl}, HLL + MUSCL-minmod + SSP-RK3, {threads} threads",
        n = args.size,
        len = args.length,
        r = args.radius,
        hi = args.h_in,
        ho = args.h_out,
        t = args.t_end,
        cfl = args.cfl,
        threads = rayon::current_num_threads(),
    );
    placement.print();
    let m0 = model.mass(&q0);
    println!("mass at t = 0: {m0:.15e} m^3");
    if processes.world().rank() == 0 {
        std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    }

    let bar = ProgressBar::new(1000);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {msg}, {elapsed_precise} elapsed, eta {eta}").expect("a valid template"),
    );
    if processes.world().rank() != 0 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let start = std::time::Instant::now();
    let plan = args.checkpoint.plan("swe2d", processes)?;
    let job = DamBreak { model, q0: &q0, t_end: args.t_end, plan: &plan, bar: &bar };
    let outcome = processes.run(placement, Overlap::None, "swe2d", job);
    bar.finish_and_clear();
    let (steps, q) = outcome?;
    if processes.world().rank() != 0 {
        return Ok(()); // every rank holds the state; rank 0 reports it and writes the picture
    }
    let seconds = start.elapsed().as_secs_f64();
    let cells = args.size * args.size;
    println!(
        "{steps} steps in {seconds:.2} s: {:.1} Mcell-steps/s (3 stages each; the time includes the per-step \
         CFL reduction, one number read back from the executor)",
        (cells * steps) as f64 / seconds / 1e6
    );
    let m1 = model.mass(&q);
    println!("mass at t = {}: {m1:.15e} m^3 (relative change {:.2e})", args.t_end, (m1 - m0) / m0);
    let (lo, hi) = min_max(&q.h);
    println!("depth at t = {}: min {lo:.6} m, max {hi:.6} m", args.t_end);

    let path = args.out.join("depth.png");
    write_png_image(&path, &rows_top_down(&q.h), args.size, lo as f32, hi as f32)?;
    println!(
        "wrote:\n  {:<22} h at t = {} s ({}x{}, y up, min..max colour scale)",
        path.display(),
        args.t_end,
        args.size,
        args.size
    );
    Ok(())
}

/// The run on whatever executor the options chose, from `q0` (or the checkpoint `plan.restart`)
/// to `t_end` with the progress bar, writing checkpoints as `plan` says: the steps taken and the
/// final host state.
struct DamBreak<'a> {
    model: Model,
    q0: &'a State<Field2<f64>>,
    t_end: f64,
    plan: &'a Plan,
    bar: &'a ProgressBar,
}

impl OnExecutor for DamBreak<'_> {
    type Output = (usize, State<Field2<f64>>);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let DamBreak { model, q0, t_end, plan, bar } = self;
        bar.println(format!("running on {}", exec.describe()));
        let progress = |steps: usize, t: f64| {
            bar.set_position((t / t_end * 1000.0).round() as u64);
            bar.set_message(format!("t = {t:.3} s, step {steps}"));
        };
        // One loop with or without checkpoints (`plan` may write none and restart from none).
        let (solver, start) = stencil_examples::swe::run_with(exec.clone(), model, q0, t_end, plan, progress)?;
        if start > 0 {
            println!("restarted from step {start}");
        }
        Ok((solver.steps, solver.state()?))
    }
}

/// The interior of `f` as `f32` rows, the top row (largest y) first.
fn rows_top_down(f: &Field2<f64>) -> Vec<f32> {
    let [nx, ny] = f.shape().interior();
    (0..ny as isize)
        .rev()
        .flat_map(|j| (0..nx as isize).map(move |i| f.get([i, j]).expect("interior") as f32))
        .collect()
}

/// The smallest and largest interior value.
fn min_max(f: &Field2<f64>) -> (f64, f64) {
    let [nx, ny] = f.shape().interior();
    let mut r = (f64::INFINITY, f64::NEG_INFINITY);
    for j in 0..ny as isize {
        for i in 0..nx as isize {
            let v = f.get([i, j]).expect("interior");
            r = (r.0.min(v), r.1.max(v));
        }
    }
    r
}
