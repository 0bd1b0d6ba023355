//! Seed paper 000's shallow water model on the CPU (or a GPU): a circular dam break in a square
//! basin with reflective walls (`examples/src/swe.rs`: MUSCL-minmod, HLL, SSP-RK3). Prints the
//! total mass at the start and the end (conserved to round-off) and writes a PNG of the depth.
//! `--domains N` splits the grid over N host subdomains (halo exchange between them; over MPI
//! ranks with the `mpi` feature, `mpiexec -n R` with N a multiple of R), `--grid PX,PY` gives
//! the process grid; the result is the single-domain one, bit for bit. `--gpus N` (GPU
//! subdomains) is not available for swe2d: `--gpu N` runs on one GPU. `--checkpoint-every N`
//! writes the state every N steps (one part per subdomain with `--domains`), `--restart FILE`
//! resumes from such a checkpoint, bit for bit.
//! `cargo run --release -p stencil-examples --bin swe2d -- --help` lists the options.

use std::path::PathBuf;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use stencil_examples::checkpoint::{self, CheckpointArgs, Plan};
use stencil_examples::output::write_png_image;
use stencil_examples::placement::{parse_grid_of, print_decomposition, Processes, Target};
use stencil_examples::swe::{circular_dam, DomainSolver, Edge, Model, Solver, State};
use stencil_runtime::{Domains, Executor, Field2, Host};

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
    #[arg(long)]
    gpu: Option<usize>,
    /// Split the grid over N host subdomains (halo exchange between them; over the MPI ranks of
    /// `mpiexec -n R` with the `mpi` feature, N a multiple of R).
    #[arg(long, value_name = "N")]
    domains: Option<usize>,
    /// GPU subdomains: not available for swe2d in this build (use --gpu for one GPU, --domains
    /// for host subdomains).
    #[arg(long, value_name = "N")]
    gpus: Option<usize>,
    /// Process grid of the subdomains, e.g. 2,3 or 2x3 (with --domains; its product must be N).
    /// Chosen for the least halo surface when not given.
    #[arg(long, value_name = "PX,PY", value_parser = parse_grid_of::<2>)]
    grid: Option<[usize; 2]>,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = Processes::start().map_err(Into::into).and_then(|p| run(&args, &p)) {
        eprintln!("swe2d: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    if args.gpus.is_some() {
        return Err("--gpus: GPU subdomains are not available for swe2d in this build: run on one GPU with --gpu N \
                    (a build with `--features cuda`), or over host subdomains with --domains N (over MPI ranks too)"
            .into());
    }
    let target = match (args.gpu, args.domains) {
        (Some(_), Some(_)) => {
            return Err("--gpu N runs on one GPU and --domains N over host subdomains: give one of them".into())
        }
        (None, None) if args.grid.is_some() => {
            return Err("--grid gives the process grid of --domains N: give --domains too".into())
        }
        (Some(ordinal), None) => Target::Gpu(ordinal),
        (None, Some(domains)) => Target::HostDomains(domains),
        (None, None) => Target::Host,
    };
    let ranks = processes.world().size();
    if ranks > 1 && target.domains().is_none() {
        return Err(format!(
            "{ranks} ranks, but the run is not decomposed: give --domains N (a multiple of the rank count)"
        )
        .into());
    }
    if args.size < 4 || args.length <= 0.0 || args.t_end <= 0.0 || !(args.cfl > 0.0 && args.cfl <= 0.5) {
        return Err("need --size >= 4, --length > 0, --t-end > 0 and 0 < --cfl <= 0.5".into());
    }
    if args.h_in <= 0.0 || args.h_out <= 0.0 {
        return Err("--h-in and --h-out must be positive: dry cells are not handled".into());
    }
    let dx = args.length / args.size as f64;
    let model = Model { n: [args.size; 2], dx: [dx; 2], edges: [Edge::Wall; 2], cfl: args.cfl };
    // Decompose before anything runs, so that a grid that does not fit is reported at once.
    let decomposition = match target {
        Target::HostDomains(domains) => Some(model.decompose(domains, args.grid)?),
        _ => None,
    };
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
    if let Some(d) = &decomposition {
        print_decomposition(d);
    }
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
    args.checkpoint.check()?;
    let plan = Plan::new("swe2d", &args.checkpoint);
    if let Some(n) = plan.every {
        let parts = if decomposition.is_some() { " (one part per subdomain)" } else { "" };
        println!("checkpoints every {n} steps into {}{parts}", plan.dir.display());
    }
    let outcome = match (target, decomposition) {
        (Target::HostDomains(_), Some(d)) => processes
            .host_domains(d)
            .map_err(Into::into)
            .and_then(|domains| advance_domains(&domains, model, &q0, args.t_end, &plan, &bar)),
        (Target::Gpu(ordinal), _) => run_on_gpu(model, &q0, args.t_end, ordinal, &plan, &bar),
        _ => advance(Host, model, &q0, args.t_end, &plan, &bar),
    };
    bar.finish_and_clear();
    let (steps, q) = outcome?;
    // Ranks other than 0 hold no global result.
    let Some(q) = q else { return Ok(()) };
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

/// The steps taken and the final host state (on rank 0; `None` on the other ranks of a
/// decomposed run), or what went wrong.
type Outcome = Result<(usize, Option<State<Field2<f64>>>), Box<dyn std::error::Error>>;

/// Runs `model` from `q0` (or the checkpoint `plan.restart`) to `t_end` on `exec` with the
/// progress bar, writing checkpoints as `plan` says; returns the steps and the final host state.
fn advance<E: Executor>(
    exec: E,
    model: Model,
    q0: &State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    bar: &ProgressBar,
) -> Outcome {
    let progress = |s: &Solver<E>| {
        bar.set_position((s.t / t_end * 1000.0).round() as u64);
        bar.set_message(format!("t = {:.3} s, step {}", s.t, s.steps));
    };
    if plan.every.is_some() || plan.restart.is_some() {
        let (solver, start) = checkpoint::swe(exec, model, q0, t_end, plan, progress)?;
        if start > 0 {
            println!("restarted from step {start}");
        }
        return Ok((solver.steps, Some(solver.state()?)));
    }
    let mut solver = Solver::new(exec, model, q0)?;
    solver.run_until(t_end, progress)?;
    Ok((solver.steps, Some(solver.state()?)))
}

/// [`advance`] over the subdomains of `domains` ([`DomainSolver`]; with checkpoints, one part
/// per subdomain, [`checkpoint::swe_decomposed`]); the final state is gathered on rank 0.
fn advance_domains<E: Executor>(
    domains: &Domains<E, 2>,
    model: Model,
    q0: &State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    bar: &ProgressBar,
) -> Outcome {
    for (s, exec) in domains.subdomains().zip(domains.execs()) {
        bar.println(format!("subdomain {} on {}", s.index, exec.describe()));
    }
    let progress = |s: &DomainSolver<E>| {
        bar.set_position((s.t / t_end * 1000.0).round() as u64);
        bar.set_message(format!("t = {:.3} s, step {}", s.t, s.steps));
    };
    if plan.every.is_some() || plan.restart.is_some() {
        let (solver, start) = checkpoint::swe_decomposed(domains, model, q0, t_end, plan, progress)?;
        if start > 0 {
            println!("restarted from step {start}");
        }
        return Ok((solver.steps, solver.gather()?));
    }
    let mut solver = DomainSolver::new(domains, model, q0)?;
    solver.run_until(t_end, progress)?;
    Ok((solver.steps, solver.gather()?))
}

#[cfg(feature = "cuda")]
fn run_on_gpu(
    model: Model,
    q0: &State<Field2<f64>>,
    t_end: f64,
    ordinal: usize,
    plan: &Plan,
    bar: &ProgressBar,
) -> Outcome {
    let gpu = stencil_runtime::cuda::Gpu::new(ordinal)?;
    bar.println(format!("running on GPU {ordinal}: {}", gpu.name()));
    advance(gpu, model, q0, t_end, plan, bar)
}

#[cfg(not(feature = "cuda"))]
fn run_on_gpu(_: Model, _: &State<Field2<f64>>, _: f64, _: usize, _: &Plan, _: &ProgressBar) -> Outcome {
    Err("this build has no GPU support: rebuild with \
         `cargo run --release -p stencil-examples --features cuda --bin swe2d -- --gpu 0`"
        .into())
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
