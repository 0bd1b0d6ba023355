//! The nonhydrostatic dynamical core of `stencil_examples::dycore` on its test cases: the Straka
//! density current (`--case straka`), a rising warm bubble (`--case bubble`) and a stratified
//! atmosphere at rest over steep terrain (`--case rest`), run on the CPU, a GPU, subdomains or
//! MPI ranks (the same code and the same bits everywhere). Prints the case's measures (front
//! and θ′min, winds, mass) and writes a PNG of θ′ in the x–z plane. `--help` lists the options.

use std::path::PathBuf;

use clap::Parser;
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::dycore::{Case, Dycore};
use stencil_examples::output::write_png_field;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
use stencil_runtime::{Executor, Field2, Field3, Overlap, Shape2};

/// A dry nonhydrostatic dynamical core (HE-VI, terrain following, C grid) on a standard test.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The test case.
    #[arg(long, value_enum, default_value_t = Case::Straka)]
    case: Case,
    /// Horizontal grid spacing, m (Δz = Δx; Δx/2 for `rest`).
    #[arg(long, default_value_t = 200.0)]
    dx: f64,
    /// Cells across (y); 1: a vertical slice.
    #[arg(long, default_value_t = 1)]
    ny: usize,
    /// End time, s (default: 900 for straka, 1000 for bubble, 21600 for rest).
    #[arg(long)]
    t_end: Option<f64>,
    /// Short (sound) steps per long step.
    #[arg(long, default_value_t = 6)]
    sound_steps: usize,
    /// Off-centering β of the vertically implicit solve (0: Crank–Nicolson).
    #[arg(long, default_value_t = 0.2)]
    beta: f64,
    /// Height of the `rest` mountain, m.
    #[arg(long, default_value_t = 1000.0)]
    mountain: f64,
    /// Use the full pressure in the horizontal pressure gradient (no reference state).
    #[arg(long)]
    no_reference: bool,
    /// Directory for the output files (created if missing).
    #[arg(long, default_value = "dycore-out")]
    out: PathBuf,
    /// Where to run: --gpu, --domains, --gpus, --grid (PX,PY,1: columns stay whole).
    #[command(flatten)]
    placement: PlacementArgs,
    /// How a decomposed run overlaps its halo exchanges.
    #[command(flatten)]
    overlap: OverlapArgs,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    main_of("dycore", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    let mut d = Dycore::new(args.case, args.dx, args.ny)?;
    let t_end = args.t_end.unwrap_or(match args.case {
        Case::Straka => 900.0,
        Case::Bubble => 1000.0,
        Case::Rest => 21_600.0,
    });
    if !(t_end > 0.0 && t_end.is_finite()) || args.sound_steps == 0 || !(0.0..=1.0).contains(&args.beta) {
        return Err("need --t-end > 0, --sound-steps >= 1 and 0 <= --beta <= 1".into());
    }
    (d.sound_steps, d.beta, d.reference) = (args.sound_steps, args.beta, !args.no_reference);
    if d.case == Case::Rest {
        d.mountain = args.mountain;
    }
    // 43 fields on the executor; the initial state, metrics and result on the host.
    let footprint = Footprint { executor: 43 * 8, host: 16 * 8 };
    let decompose = |domains| d.decompose(domains, args.placement.grid);
    let placement = processes.place("dycore", &args.placement, &d.shape(), footprint, decompose)?;
    let [nx, ny, nz] = d.n;
    println!(
        "dycore: {:?}, {nx} x {ny} x {nz} cells (dx = {} m, dz = {} m), dt = {:.3} s, {} sound steps, beta = {}, \
         t_end = {t_end} s",
        d.case, d.h[0], d.h[2], d.dt, d.sound_steps, d.beta
    );
    placement.print();
    let (q0, _) = d.initial();
    let rank0 = processes.world().rank() == 0;
    let timed = Timed::new(progress::time(rank0), 1);
    let plan = args.checkpoint.plan("dycore", processes)?;
    let job = Job { d: &d, t_end, plan: &plan, timed: &timed };
    let run = processes.run(placement, args.overlap.or(Overlap::None), "dycore", job);
    timed.bar.finish_and_clear();
    let (q, steps, _) = run?;
    if !rank0 {
        return Ok(());
    }
    if let Some(t) = timed.timing(None) {
        let rate = t.per_second((nx * ny * nz) as f64) / 1e6;
        println!("{steps} steps; {t}: {rate:.3} M cell-updates/s per long step");
    }
    let (m0, m1) = (d.mass(&q0), d.mass(&q));
    let (um, wm) = d.max_wind(&q);
    let (front, tmin) = d.front(&q);
    let tmax = d.theta_prime(&q).iter().map(|c| c.3).fold(f64::MIN, f64::max);
    println!("theta' from {tmin:.4} K to {tmax:.4} K; max |u| {um:.4e} m/s, max |w| {wm:.4e} m/s");
    println!("mass relative change {:.3e}", (m1 - m0) / m0);
    if d.case == Case::Straka {
        println!("front at {:.1} m (Straka et al. 1993: about 15500 m; theta'min about -9.8 K)", front);
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let path = args.out.join("theta_xz.png");
    let mut slice = vec![0.0; nx * nz];
    for (i, j, k, t) in d.theta_prime(&q) {
        if j == ny / 2 {
            slice[i + nx * k] = t;
        }
    }
    let field = Field2::from_fn(Shape2::new([nx, nz]), |[i, k]| slice[i as usize + nx * k as usize]);
    let (lo, hi) = write_png_field(&path, &field)?;
    println!("wrote {} (theta' in the x-z plane, {lo:.3} to {hi:.3} K)", path.display());
    Ok(())
}

/// The run on whatever executor the options chose.
struct Job<'a> {
    d: &'a Dycore,
    t_end: f64,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for Job<'_> {
    type Output = ([Field3<f64>; 5], usize, usize);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let Job { d, t_end, plan, timed } = self;
        timed.bar.println(format!("running on {}", exec.describe()));
        // Each step downloads nothing: the ticks follow the issue of the work (on a GPU).
        d.run(exec, t_end, plan, |step, t| timed.tick_at(step, t, t_end))
    }
}
