//! ASUCA's `Diffusion3d` on the CPU (or a GPU): a Gaussian diffusing in a box, checked against the
//! analytic heat kernel. `cargo run --release -- --help` lists the options. `--domains N` splits
//! the grid over N host subdomains (halo exchange between them), `--gpus N` over N subdomains on
//! GPUs (with the `cuda` feature); `--grid PX,PY,PZ` gives the process grid. `--checkpoint-every N`
//! writes a checkpoint every N steps (one part per subdomain when decomposed), `--restart FILE`
//! resumes from one (`stencil_examples::checkpoint`).

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use stencil_examples::checkpoint::{self, CheckpointArgs, Plan};
use stencil_examples::diffusion::{self, Outcome, Setup};
use stencil_examples::placement::{print_decomposition, OverlapArgs, PlacementArgs, Processes, Target};
use stencil_runtime::{Decomposition, Domains, Executor, Host, Order, Overlap};

/// 3D diffusion (7-point explicit scheme) of a Gaussian, against the analytic heat kernel.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Interior points along every axis (unless --nx/--ny/--nz say otherwise).
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Interior points along x.
    #[arg(long)]
    nx: Option<usize>,
    /// Interior points along y.
    #[arg(long)]
    ny: Option<usize>,
    /// Interior points along z.
    #[arg(long)]
    nz: Option<usize>,
    /// Time steps.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Element order of the fields.
    #[arg(long, value_enum, default_value_t = Layout::Ijk)]
    layout: Layout,
    /// Element type of the fields.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Time step as a fraction of the stability limit dx^2 / (6 kappa), in (0, 1].
    #[arg(long, default_value_t = 0.9)]
    cfl: f64,
    #[command(flatten)]
    overlap: OverlapArgs,
    /// Where to run: --gpu, --domains, --gpus, --grid.
    #[command(flatten)]
    placement: PlacementArgs,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Layout {
    /// x fastest, then y, then z.
    Ijk,
    /// z fastest, then x, then y (ASUCA's original order).
    Kij,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Precision {
    F32,
    F64,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = Processes::start().map_err(Into::into).and_then(|p| run(&args, &p)) {
        eprintln!("diffusion3d: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    let n = [args.nx, args.ny, args.nz].map(|v| v.unwrap_or(args.size));
    if n.contains(&0) {
        return Err(format!("the grid {n:?} has an empty axis; give every axis at least one point").into());
    }
    if !(args.cfl > 0.0 && args.cfl <= 1.0) {
        return Err(format!("--cfl {} is outside (0, 1]: the scheme is unstable above 1", args.cfl).into());
    }
    let order = match args.layout {
        Layout::Ijk => Order::Ijk,
        Layout::Kij => Order::Kij,
    };
    let setup = Setup { n, order, overlap: args.overlap.or(Overlap::TwoDivided), ..Setup::cube(n[0], args.steps) };
    let target = args.placement.target("diffusion3d")?;
    processes.check(target)?;
    // Decompose before anything runs, so that a grid that does not fit is reported at once.
    let decomposition = match target {
        Target::HostDomains(domains) | Target::GpuDomains(domains) => {
            Some(setup.decompose(domains, args.placement.grid)?)
        }
        Target::Host | Target::Gpu(_) => None,
    };
    let (layout, precision) =
        (format!("{:?}", args.layout).to_lowercase(), format!("{:?}", args.precision).to_lowercase());
    println!(
        "diffusion3d: {}x{}x{} {layout} {precision}, {} steps of dt = {:.3e} (cfl {}), t = {:.3e}, {} threads",
        n[0],
        n[1],
        n[2],
        setup.steps,
        setup.dt(),
        setup.cfl,
        setup.end_time(),
        rayon::current_num_threads()
    );
    if let Some(d) = &decomposition {
        print_decomposition(d);
    }
    args.checkpoint.check()?;
    let outcome = if args.checkpoint.active() {
        let plan = Plan::new("diffusion3d", &args.checkpoint);
        if let Some(n) = plan.every {
            println!("checkpoints every {n} steps into {}", plan.dir.display());
        }
        run_checkpointed(processes, target, decomposition, &setup, args.precision, &plan)?
    } else {
        run_plain(processes, target, decomposition, &setup, args.precision)?
    };
    // Ranks other than 0 hold no global result.
    let Some(outcome) = outcome else { return Ok(()) };
    if outcome.wall_value > 1e-6 {
        eprintln!(
            "diffusion3d: warning: the Gaussian has reached the walls (u = {:.1e} on the ghost layer); \
             the error includes the fixed zero boundary's: use fewer steps or more points",
            outcome.wall_value
        );
    }
    println!(
        "{} steps, {}x{}x{}, {:.3} s, {:.3} GPts/s, rel L2 error {:.3e}, rel max error {:.3e}",
        setup.steps, n[0], n[1], n[2], outcome.seconds, outcome.gpts_per_s, outcome.error.rel_l2, outcome.error.rel_max
    );
    Ok(())
}

/// The run without checkpoints: the model's own run functions.
fn run_plain(
    processes: &Processes,
    target: Target,
    decomposition: Option<Decomposition<3>>,
    setup: &Setup,
    precision: Precision,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    let outcome = match (target, decomposition) {
        (Target::Gpu(ordinal), _) => Some(run_on_gpu(ordinal, setup, precision)?),
        (Target::HostDomains(_), Some(d)) => run_domains_with_progress(&processes.host_domains(d)?, setup, precision)?,
        (Target::GpuDomains(_), Some(d)) => run_on_gpus(processes, d, setup, precision)?,
        _ => Some(run_with_progress(&Host, setup, precision)?),
    };
    Ok(outcome)
}

/// The run with checkpoints (`stencil_examples::checkpoint`), on the host, a GPU or subdomains;
/// the outcome on rank 0. The time covers the steps run (from the restart on) and the
/// checkpoints written.
fn run_checkpointed(
    processes: &Processes,
    target: Target,
    decomposition: Option<Decomposition<3>>,
    setup: &Setup,
    precision: Precision,
    plan: &Plan,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    match (target, decomposition) {
        (Target::HostDomains(_), Some(d)) => checkpointed_domains(&processes.host_domains(d)?, setup, precision, plan),
        (Target::GpuDomains(_), Some(d)) => checkpointed_gpus(processes, d, setup, precision, plan),
        (Target::Gpu(ordinal), _) => checkpointed_gpu(ordinal, setup, precision, plan),
        _ => checkpointed(&Host, setup, precision, plan),
    }
}

/// The outcome of a checkpointed run that ended with `f` after running steps `start + 1..`.
fn outcome_of<T: diffusion::Real>(
    setup: &Setup,
    f: &stencil_runtime::Field3<T>,
    start: usize,
    seconds: f64,
) -> Outcome {
    if start > 0 {
        println!("restarted from step {start}");
    }
    let t = setup.end_time();
    Outcome {
        seconds,
        gpts_per_s: (setup.shape().interior_points() * (setup.steps - start)) as f64 / seconds / 1e9,
        error: setup.error(f, t),
        wall_value: setup.wall_value(t),
    }
}

/// [`checkpoint::diffusion`] on `exec` with a progress bar.
fn checkpointed<E: Executor>(
    exec: &E,
    setup: &Setup,
    precision: Precision,
    plan: &Plan,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    let bar = progress_bar(setup.steps);
    bar.println(format!("running on {}", exec.describe()));
    let clock = std::time::Instant::now();
    let outcome = match precision {
        Precision::F32 => checkpoint::diffusion::<E, f32>(exec, setup, plan, |s| bar.set_position(s as u64))
            .map(|(f, start)| outcome_of(setup, &f, start, clock.elapsed().as_secs_f64())),
        Precision::F64 => checkpoint::diffusion::<E, f64>(exec, setup, plan, |s| bar.set_position(s as u64))
            .map(|(f, start)| outcome_of(setup, &f, start, clock.elapsed().as_secs_f64())),
    };
    bar.finish_and_clear();
    Ok(Some(outcome?))
}

/// [`checkpoint::diffusion_decomposed`] over `domains` with a progress bar.
fn checkpointed_domains<E: Executor>(
    domains: &Domains<E, 3>,
    setup: &Setup,
    precision: Precision,
    plan: &Plan,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    let bar = progress_bar(setup.steps);
    let clock = std::time::Instant::now();
    let outcome = match precision {
        Precision::F32 => {
            checkpoint::diffusion_decomposed::<E, f32>(domains, setup, plan, |s| bar.set_position(s as u64))
                .map(|(f, start)| f.map(|f| outcome_of(setup, &f, start, clock.elapsed().as_secs_f64())))
        }
        Precision::F64 => {
            checkpoint::diffusion_decomposed::<E, f64>(domains, setup, plan, |s| bar.set_position(s as u64))
                .map(|(f, start)| f.map(|f| outcome_of(setup, &f, start, clock.elapsed().as_secs_f64())))
        }
    };
    bar.finish_and_clear();
    outcome
}

#[cfg(feature = "cuda")]
fn checkpointed_gpu(ordinal: usize, setup: &Setup, precision: Precision, plan: &Plan) -> CheckpointedOutcome {
    checkpointed(&stencil_runtime::cuda::Gpu::new(ordinal)?, setup, precision, plan)
}

#[cfg(feature = "cuda")]
fn checkpointed_gpus(
    processes: &Processes,
    d: Decomposition<3>,
    setup: &Setup,
    precision: Precision,
    plan: &Plan,
) -> CheckpointedOutcome {
    checkpointed_domains(&processes.gpu_domains(d, "diffusion3d")?, setup, precision, plan)
}

#[cfg(not(feature = "cuda"))]
fn checkpointed_gpu(_: usize, _: &Setup, _: Precision, _: &Plan) -> CheckpointedOutcome {
    Err("this build has no GPU support: rebuild with `cargo run --release -p stencil-examples --features cuda -- --gpu 0`".into())
}

#[cfg(not(feature = "cuda"))]
fn checkpointed_gpus(_: &Processes, _: Decomposition<3>, _: &Setup, _: Precision, _: &Plan) -> CheckpointedOutcome {
    Err("--gpus: this build has no GPU support: rebuild with `cargo run --release -p stencil-examples --features cuda -- --gpus 2`".into())
}

/// What a checkpointed run returns.
type CheckpointedOutcome = Result<Option<Outcome>, Box<dyn std::error::Error>>;

/// Runs `setup` on `exec` in `precision` with a progress bar.
fn run_with_progress<E: Executor>(
    exec: &E,
    setup: &Setup,
    precision: Precision,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let bar = progress_bar(setup.steps);
    bar.println(format!("running on {}", exec.describe()));
    let outcome = match precision {
        Precision::F32 => diffusion::run::<E, f32>(exec, setup, |_| bar.inc(1)),
        Precision::F64 => diffusion::run::<E, f64>(exec, setup, |_| bar.inc(1)),
    };
    bar.finish_and_clear();
    Ok(outcome?)
}

/// A progress bar of `steps` steps.
fn progress_bar(steps: usize) -> ProgressBar {
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {elapsed_precise} elapsed, eta {eta}")
            .expect("a valid template"),
    );
    bar
}

/// Runs `setup` over the subdomains of `domains` in `precision` with a progress bar (the outcome
/// on rank 0).
fn run_domains_with_progress<E: Executor>(
    domains: &Domains<E, 3>,
    setup: &Setup,
    precision: Precision,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    let bar = progress_bar(setup.steps);
    for (s, exec) in domains.subdomains().zip(domains.execs()) {
        bar.println(format!("subdomain {} on {}", s.index, exec.describe()));
    }
    let outcome = match precision {
        Precision::F32 => diffusion::run_decomposed::<E, f32>(domains, setup, |_| bar.inc(1)),
        Precision::F64 => diffusion::run_decomposed::<E, f64>(domains, setup, |_| bar.inc(1)),
    };
    bar.finish_and_clear();
    Ok(outcome?)
}

/// [`run_domains_with_progress`] with subdomain i on GPU `i % count` ([`Processes::gpu_domains`]).
#[cfg(feature = "cuda")]
fn run_on_gpus(
    processes: &Processes,
    d: Decomposition<3>,
    setup: &Setup,
    precision: Precision,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    run_domains_with_progress(&processes.gpu_domains(d, "diffusion3d")?, setup, precision)
}

#[cfg(not(feature = "cuda"))]
fn run_on_gpus(
    _: &Processes,
    _: Decomposition<3>,
    _: &Setup,
    _: Precision,
) -> Result<Option<Outcome>, Box<dyn std::error::Error>> {
    Err("--gpus: this build has no GPU support: rebuild with `cargo run --release -p stencil-examples --features cuda -- --gpus 2`".into())
}

/// [`run_with_progress`] on GPU `ordinal`.
#[cfg(feature = "cuda")]
fn run_on_gpu(ordinal: usize, setup: &Setup, precision: Precision) -> Result<Outcome, Box<dyn std::error::Error>> {
    let gpu = stencil_runtime::cuda::Gpu::new(ordinal)?;
    run_with_progress(&gpu, setup, precision)
}

#[cfg(not(feature = "cuda"))]
fn run_on_gpu(_: usize, _: &Setup, _: Precision) -> Result<Outcome, Box<dyn std::error::Error>> {
    Err("this build has no GPU support: rebuild with `cargo run --release -p stencil-examples --features cuda -- --gpu 0`".into())
}
