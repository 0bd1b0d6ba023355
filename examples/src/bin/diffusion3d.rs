//! ASUCA's `Diffusion3d` on the CPU (or a GPU): a Gaussian diffusing in a box, checked against the
//! analytic heat kernel. `cargo run --release -- --help` lists the options. `--domains N` splits
//! the grid over N host subdomains, `--gpus N` over N subdomains on GPUs (with the `cuda`
//! feature), under `mpiexec` over the ranks too; `--grid PX,PY,PZ` gives the process grid. The
//! model's code is the same everywhere (`Distributed` moves the halos). `--checkpoint-every N`
//! writes a checkpoint of the global field every N steps, `--restart FILE` resumes from one on
//! any placement (`stencil_examples::checkpoint`).

use clap::{Parser, ValueEnum};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::diffusion::{self, Outcome, Real, Setup};
use stencil_examples::placement::{
    check_fits, print_decomposition, Footprint, Memory, OnExecutor, OverlapArgs, PlacementArgs, Processes,
};
use stencil_examples::progress;
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
    let setup = Setup { n, order, cfl: args.cfl, ..Setup::cube(n[0], args.steps) };
    let target = args.placement.target("diffusion3d")?;
    processes.check(target)?;
    args.checkpoint.check()?;
    // Decompose before anything runs, so that a grid that does not fit is reported at once.
    let decomposition = target.domains().map(|domains| setup.decompose(domains, args.placement.grid)).transpose()?;
    // Two fields on the executor, the initial and the final global field on the host.
    let bytes = match args.precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    };
    let footprint = Footprint { executor: 2 * bytes, host: 2 * bytes };
    let memory = Memory::of_this_machine(target);
    let ranks = processes.world().size();
    check_fits(target, decomposition.as_ref(), n, [1; 3], footprint, &memory, ranks)?;
    println!(
        "diffusion3d: {}x{}x{} {} {}, {} steps of dt = {:.3e} (cfl {}), t = {:.3e}, {} threads",
        n[0],
        n[1],
        n[2],
        format!("{:?}", args.layout).to_lowercase(),
        format!("{:?}", args.precision).to_lowercase(),
        setup.steps,
        setup.dt(),
        setup.cfl,
        setup.end_time(),
        rayon::current_num_threads()
    );
    if let Some(d) = &decomposition {
        print_decomposition(d);
    }
    let plan = args.checkpoint.active().then(|| {
        let plan = Plan::new("diffusion3d", &args.checkpoint).written_by(processes.world().rank() == 0);
        if let Some(n) = plan.every {
            println!("checkpoints every {n} steps into {}", plan.dir.display());
        }
        plan
    });
    let job = Diffuse { setup: &setup, precision: args.precision, plan: plan.as_ref() };
    let overlap = args.overlap.or(Overlap::OneDivided);
    let outcome = processes.on_executor(target, decomposition, overlap, "diffusion3d", job)?;
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

/// The run on whatever executor the options chose, with a progress bar, checkpointed or not.
struct Diffuse<'a> {
    setup: &'a Setup,
    precision: Precision,
    plan: Option<&'a Plan>,
}

impl OnExecutor for Diffuse<'_> {
    type Output = Outcome;

    fn run<E: Executor>(self, exec: &E) -> Result<Outcome, Box<dyn std::error::Error>> {
        match self.precision {
            Precision::F32 => self.run_in::<E, f32>(exec),
            Precision::F64 => self.run_in::<E, f64>(exec),
        }
    }
}

impl Diffuse<'_> {
    fn run_in<E: Executor, T: Real + stencil_runtime::io::IoElement>(
        &self,
        exec: &E,
    ) -> Result<Outcome, Box<dyn std::error::Error>> {
        let bar = progress::steps(self.setup.steps);
        bar.println(format!("running on {}", exec.describe()));
        let plan = self.plan.cloned().unwrap_or_else(Plan::none);
        let (f, seconds, start) = diffusion::run_with::<E, T>(exec, self.setup, &plan, |s| bar.set_position(s as u64))?;
        if start > 0 {
            bar.println(format!("restarted from step {start}"));
        }
        let outcome = Outcome::of(self.setup, &f, self.setup.steps - start, seconds);
        bar.finish_and_clear();
        Ok(outcome)
    }
}
