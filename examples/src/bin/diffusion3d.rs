//! ASUCA's `Diffusion3d` (`stencil_examples::diffusion`) on the CPU, a GPU, subdomains or MPI
//! ranks (the same code and the same bits everywhere): a Gaussian diffusing in a box, checked
//! against the analytic heat kernel. `cargo run --release -- --help` lists the options.

use clap::{Parser, ValueEnum};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::diffusion::{self, Real, Setup, WARM_UP};
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
use stencil_runtime::{Executor, Order, Overlap};

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
    /// Steps per pass over the grid on the CPU (temporal blocking; 1: one step per launch). A GPU
    /// or subdomains run one step per launch. The same bits either way.
    #[arg(long, default_value_t = 1)]
    pass_steps: usize,
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
    main_of("diffusion3d", |processes| run(&args, processes));
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
    if args.pass_steps == 0 {
        return Err("--pass-steps 0: give at least 1 (1 runs one step per launch)".into());
    }
    let setup = Setup { n, order, cfl: args.cfl, pass_steps: args.pass_steps, ..Setup::cube(n[0], args.steps) };
    // Two fields on the executor, the initial and the final global field on the host.
    let bytes = if matches!(args.precision, Precision::F64) { 8 } else { 4 };
    let footprint = Footprint { executor: 2 * bytes, host: 2 * bytes };
    let decompose = |domains| setup.decompose(domains, args.placement.grid);
    let placement = processes.place("diffusion3d", &args.placement, &setup.shape(), footprint, decompose)?;
    let [nx, ny, nz] = n;
    let (layout, precision) =
        (format!("{:?}", args.layout).to_lowercase(), format!("{:?}", args.precision).to_lowercase());
    let (steps, dt, cfl, threads) = (setup.steps, setup.dt(), setup.cfl, rayon::current_num_threads());
    let t = steps as f64 * dt;
    println!("diffusion3d: {nx}x{ny}x{nz} {layout} {precision}, {steps} steps of dt = {dt:.3e} (cfl {cfl}), t = {t:.3e}, {threads} threads");
    let plan = args.checkpoint.plan("diffusion3d", processes)?;
    placement.print();
    let rank0 = processes.world().rank() == 0;
    let timed = Timed::new(progress::shown_if(rank0, progress::steps(steps)), WARM_UP);
    let job = Diffuse { setup: &setup, precision: args.precision, plan: &plan, timed: &timed };
    let run = processes.run(placement, args.overlap.or(Overlap::Auto), "diffusion3d", job);
    timed.bar.finish_and_clear();
    let ([l2, max], start) = run?;
    if start > 0 {
        println!("restarted from step {start}");
    }
    if setup.wall_value(t) > 1e-6 {
        eprintln!(
            "diffusion3d: warning: the Gaussian has reached the walls (u = {:.1e} on the ghost layer); \
             the error includes the fixed zero boundary's: use fewer steps or more points",
            setup.wall_value(t)
        );
    }
    // The plain steps and the last wait for their work, so the timing covers the recorded ones.
    if let Some(timing) = timed.timing(None) {
        let rate = timing.per_second(setup.shape().interior_points() as f64) / 1e9;
        let note = format!("the first {WARM_UP} steps prepare the kernels and are not timed");
        println!("{steps} steps, {nx}x{ny}x{nz}; {timing}: {rate:.3} GPts/s ({note})");
    }
    println!("rel L2 error {l2:.3e}, rel max error {max:.3e} at t = {t:.3e}");
    Ok(())
}

/// The run on whatever executor the options chose, checkpointed or not: the errors at the end
/// ([`Setup::error`]) and the step it started from.
struct Diffuse<'a> {
    setup: &'a Setup,
    precision: Precision,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for Diffuse<'_> {
    type Output = ([f64; 2], usize);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        self.timed.bar.println(format!("running on {}", exec.describe()));
        if self.setup.pass_steps > 1 {
            self.timed.bar.println(format!(
                "up to {} steps per pass over the grid where the executor has passes (the host); elsewhere one step per launch",
                self.setup.pass_steps
            ));
        }
        match self.precision {
            Precision::F32 => self.run_in::<E, f32>(exec),
            Precision::F64 => self.run_in::<E, f64>(exec),
        }
    }
}

impl Diffuse<'_> {
    fn run_in<E: Executor, T: Real>(&self, exec: &E) -> Result<([f64; 2], usize), Box<dyn std::error::Error>> {
        let (f, start) = diffusion::run::<E, T>(exec, self.setup, self.plan, |s| self.timed.tick_to(s))?;
        Ok((self.setup.error(&f, self.setup.steps as f64 * self.setup.dt()), start))
    }
}
