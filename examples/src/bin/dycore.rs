//! The nonhydrostatic dynamical core of `stencil_examples::dycore` on its test cases: the Straka
//! density current (`--case straka`), a rising warm bubble (`--case bubble`), the moist bubble
//! of Bryan and Fritsch (`--case moist-bubble`) and a stratified atmosphere at rest over steep
//! terrain (`--case rest`), run on the CPU, a GPU, subdomains or MPI ranks (the same code and
//! the same bits everywhere). Prints the case's measures (front and θ′min, winds, mass, water)
//! and writes a PNG of θ′ in the x–z plane, and with `--netcdf` a NetCDF file of sections.
//! `--help` lists the options.

use std::path::PathBuf;

use clap::Parser;
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::dycore::{
    self, Case, Coordinate, Dycore, Finished, Frame, MomentumAdvection, Precision, Reference,
};
use stencil_examples::mountain_wave;
use stencil_examples::output::write_png_field;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
use stencil_runtime::{Executor, Field2, Field3, Overlap, Shape2};

/// A nonhydrostatic dynamical core (HE-VI, terrain following, C grid; dry, or moist with warm
/// rain) on a standard test.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The test case.
    #[arg(long, value_enum, default_value_t = Case::Straka)]
    case: Case,
    /// Horizontal grid spacing, m (Δz = Δx; Δx/2 for `rest`, 0.6 Δx for `mountain-wave`).
    #[arg(long, default_value_t = 200.0)]
    dx: f64,
    /// Vertical grid spacing, m (default: the case's, from `--dx`).
    #[arg(long)]
    dz: Option<f64>,
    /// Cells across (y); 1: a vertical slice.
    #[arg(long, default_value_t = 1)]
    ny: usize,
    /// End time, s (default: 900 for straka, 1000 for the bubbles, 21600 for rest and
    /// mountain-wave).
    #[arg(long)]
    t_end: Option<f64>,
    /// Short (sound) steps per long step.
    #[arg(long, default_value_t = 6)]
    sound_steps: usize,
    /// Diffusivity ν of u, v, w and θ − θ̄, m²/s (default: the case's: 75 for straka, else 0).
    #[arg(long)]
    nu: Option<f64>,
    /// Off-centering β of the vertically implicit solve (0: Crank–Nicolson).
    #[arg(long, default_value_t = 0.2)]
    beta: f64,
    /// Height of the mountain, m (default: 1000 for `rest`, 250 for `mountain-wave`).
    #[arg(long)]
    mountain: Option<f64>,
    /// The vertical coordinate over terrain (default: sleve for `mountain-wave`, else gal-chen).
    #[arg(long, value_enum)]
    coordinate: Option<Coordinate>,
    /// The Rayleigh sponge's rate at the lid, 1/s (default: the case's: 0.05 for `rest`, 0.01 for `mountain-wave`).
    #[arg(long)]
    sponge_rate: Option<f64>,
    /// The Rayleigh sponge's depth below the lid, m (default: the case's: 5000 for `rest`, 10800
    /// for `mountain-wave`).
    #[arg(long)]
    sponge_depth: Option<f64>,
    /// The pressure the horizontal pressure gradient subtracts first.
    #[arg(long, value_enum, default_value_t = Reference::Discrete)]
    reference: Reference,
    /// Kessler rain (autoconversion, accretion, fall) in the moist bubble; without it, Bryan and
    /// Fritsch's reversible saturation adjustment only.
    #[arg(long)]
    rain: bool,
    /// Also write `dycore.nc` (CF NetCDF: θ′, u, w, and q_r and θ_e′ when moist, in the x–z
    /// plane) at the end and every `--netcdf-every` seconds.
    #[arg(long)]
    netcdf: bool,
    /// Seconds between the NetCDF file's output times (default: only the end).
    #[arg(long)]
    netcdf_every: Option<f64>,
    /// The fields' element type (the set-up, diagnostics and output are f64 either way).
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    precision: Precision,
    /// How the long step advects momentum: Koren-limited (ASUCA's) or unlimited third-order upwind.
    #[arg(long, value_enum, default_value_t = MomentumAdvection::Koren)]
    momentum_advection: MomentumAdvection,
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
    if let Some(dz) = args.dz {
        d = d.with_dz(dz)?;
    }
    let t_end = args.t_end.unwrap_or(match args.case {
        Case::Straka => 900.0,
        Case::Bubble | Case::MoistBubble => 1000.0,
        Case::Rest | Case::MountainWave => 21_600.0,
    });
    if !(t_end > 0.0 && t_end.is_finite()) || args.sound_steps == 0 || !(0.0..=1.0).contains(&args.beta) {
        return Err("need --t-end > 0, --sound-steps >= 1 and 0 <= --beta <= 1".into());
    }
    if (args.rain && !d.moist()) || (args.netcdf_every.is_some() && !args.netcdf) {
        return Err("--rain needs --case moist-bubble, --netcdf-every needs --netcdf".into());
    }
    let every = args.netcdf.then(|| args.netcdf_every.unwrap_or(t_end));
    if every.is_some_and(|e| !(e > 0.0 && e.is_finite())) {
        return Err("need --netcdf-every > 0".into());
    }
    if let Some(rate) = args.sponge_rate.filter(|r| !(r.is_finite() && *r >= 0.0)) {
        return Err(format!("--sponge-rate must be a finite rate >= 0 (1/s), not {rate}").into());
    }
    if let Some(depth) = args.sponge_depth.filter(|h| !(h.is_finite() && *h >= 0.0 && *h <= d.top())) {
        return Err(format!("--sponge-depth must be between 0 and the lid's {} m, not {depth}", d.top()).into());
    }
    if d.moist() && args.reference != Reference::Discrete {
        return Err(
            "a moist run subtracts its discrete base state: --reference analytic or none needs a dry case".into()
        );
    }
    if args.mountain.is_some() && !matches!(d.case, Case::Rest | Case::MountainWave) {
        return Err("--mountain needs --case rest or mountain-wave".into());
    }
    (d.sound_steps, d.beta, d.reference, d.rain, d.precision, d.momentum) =
        (args.sound_steps, args.beta, args.reference, args.rain, args.precision, args.momentum_advection);
    (d.coordinate, d.sponge.1) = (args.coordinate.unwrap_or(d.coordinate), args.sponge_rate.unwrap_or(d.sponge.1));
    d.mountain = args.mountain.unwrap_or(d.mountain);
    d.sponge.0 = args.sponge_depth.unwrap_or(d.sponge.0);
    if let Some(nu) = args.nu {
        if !(nu.is_finite() && nu >= 0.0) {
            return Err(format!("--nu must be a finite diffusivity >= 0 (m²/s), not {nu}").into());
        }
        d.nu = nu;
    }
    // 44 fields on the executor (59 moist); the initial state, metrics and result on the host.
    let bytes = if d.precision == Precision::F32 { 4 } else { 8 };
    let footprint = Footprint { executor: if d.moist() { 59 } else { 44 } * bytes, host: 20 * 8 };
    let decompose = |domains| d.decompose(domains, args.placement.grid);
    let placement = processes.place("dycore", &args.placement, &d.shape(), footprint, decompose)?;
    let [nx, ny, nz] = d.n;
    println!(
        "dycore: {:?}, {nx} x {ny} x {nz} cells (dx = {} m, dz = {} m), dt = {:.3} s, {} sound steps, beta = {}, \
         t_end = {t_end} s, {:?}",
        d.case, d.h[0], d.h[2], d.dt, d.sound_steps, d.beta, d.precision
    );
    placement.print();
    let rank0 = processes.world().rank() == 0;
    let timed = Timed::new(progress::time(rank0), dycore::WARM_UP);
    let plan = args.checkpoint.plan("dycore", processes)?;
    let job = Job { d: &d, t_end, every, plan: &plan, timed: &timed };
    let run = processes.run(placement, args.overlap.or(Overlap::Auto), "dycore", job);
    timed.bar.finish_and_clear();
    let (Finished { state: q, initial: q0, steps, .. }, frames) = run?;
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
    // The x–z section of the end state: θ′ for the picture, the maxima of q_r and θ_e′ when moist.
    let end = d.section(t_end, &q);
    if d.moist() {
        let ((dry0, water0, _), (dry, water, ground)) = (d.water(&q0), d.water(&q));
        let (qr, theta_e) = (max(&end.values[3]), max(&end.values[4]));
        println!("theta_e' max {theta_e:.4} K, q_r max {qr:.3e} kg/kg, rain on the ground {ground:.4e} kg");
        let budget = (water + ground - water0) / water0;
        println!("relative change: dry air {:.3e}, water + rain on the ground {budget:.3e}", (dry - dry0) / dry0);
    }
    if d.case == Case::Straka {
        println!("front at {:.1} m (Straka et al. 1993: about 15500 m; theta'min about -9.8 K)", front);
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    if d.case == Case::MountainWave {
        mountain_wave::report(&d, &q, &args.out)?;
    }
    let path = args.out.join("theta_xz.png");
    let field = Field2::from_fn(Shape2::new([nx, nz]), |[i, k]| end.values[0][i as usize + nx * k as usize]);
    let (lo, hi) = write_png_field(&path, &field)?;
    println!("wrote {} (theta' in the x-z plane, {lo:.3} to {hi:.3} K)", path.display());
    if args.netcdf {
        let path = args.out.join("dycore.nc");
        d.write_netcdf(&path, &frames)?;
        println!("wrote {} ({} output times)", path.display(), frames.len());
    }
    Ok(())
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::MIN, f64::max)
}

/// The run on whatever executor the options chose.
struct Job<'a> {
    d: &'a Dycore,
    t_end: f64,
    every: Option<f64>,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for Job<'_> {
    type Output = (Finished, Vec<Frame>);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let Job { d, t_end, every, plan, timed } = self;
        timed.bar.println(format!("running on {}", exec.describe()));
        // Each step downloads nothing: the ticks follow the issue of the work (on a GPU).
        // The sections at the output times of the NetCDF file.
        let mut frames = Vec::new();
        let out = |t: f64, q: &[Field3<f64>]| {
            frames.push(d.section(t, q));
            Ok(())
        };
        let finished = d.run_with(exec, t_end, plan, every, |step, t| timed.tick_at(step, t, t_end), out)?;
        Ok((finished, frames))
    }
}
