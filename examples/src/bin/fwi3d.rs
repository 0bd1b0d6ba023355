//! Full-waveform inversion on the acoustic model (`stencil_examples::fwi`): "observed" traces
//! from a true model (two layers, a smooth background, an anomaly), then gradient descent from
//! the model without the anomaly, the gradient from an adjoint run over Revolve checkpoints.
//! On the CPU, host subdomains or a GPU. `cargo run --release --bin fwi3d -- --help` lists the
//! options.

use std::path::PathBuf;

use clap::Parser;
use stencil_examples::fwi::{Fwi, Survey};
use stencil_examples::placement::{main_of, Footprint, OnExecutor, PlacementArgs, Processes};
use stencil_runtime::revolve::Held;
use stencil_runtime::{Executor, Overlap};

/// Full-waveform inversion of a transmission survey (sources near x = 0 and the top, receivers
/// near x = max and the bottom).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Points of the physical domain along every axis (10 m apart).
    #[arg(long, default_value_t = 32)]
    size: usize,
    /// Width of the damping sponge, points.
    #[arg(long, default_value_t = 10)]
    sponge: usize,
    /// Time steps per shot.
    #[arg(long, default_value_t = 250)]
    steps: usize,
    /// Shots (alternating: a vertical line near x = 0, a line along x near the top).
    #[arg(long, default_value_t = 4)]
    shots: usize,
    /// Gradient-descent iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Checkpoint slots of the reverse run (0: every step stored; default: a tenth of the steps).
    #[arg(long)]
    slots: Option<usize>,
    /// Keep the checkpoints in host memory rather than with the state (GPU memory for a GPU
    /// run): each store and restore then crosses the bus.
    #[arg(long)]
    checkpoints_on_host: bool,
    /// Peak frequency of the Ricker wavelet, Hz (default: 10 Hz × 32 / size).
    #[arg(long)]
    f0: Option<f64>,
    /// Directory for the models, the gradient and the misfit curve (.npy and .png).
    #[arg(long, default_value = "fwi3d-out")]
    out: PathBuf,
    /// Where to run: --gpu, --domains, --gpus, --grid.
    #[command(flatten)]
    placement: PlacementArgs,
}

fn main() {
    let args = Args::parse();
    main_of("fwi3d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    if args.size < 8 || args.shots == 0 || args.steps == 0 {
        return Err(format!(
            "--size {} --shots {} --steps {}: give a size of 8 or more, and shots and steps",
            args.size, args.shots, args.steps
        )
        .into());
    }
    let mut survey = Survey::transmission(args.size, args.steps, args.shots);
    survey.sponge = args.sponge;
    if let Some(f0) = args.f0 {
        survey.f0 = f0;
    }
    survey.slots = match args.slots {
        Some(0) => None,
        Some(s) => Some(s),
        None => Some((args.steps / 10).max(1)),
    };
    if args.checkpoints_on_host {
        survey.held = Held::OnHost;
    }
    survey.check()?;
    // Executor: 13 fields plus two per checkpoint slot (on the host with --checkpoints-on-host);
    // host: 6 fields.
    let slots = survey.slots.unwrap_or(args.steps);
    let footprint = match survey.held {
        Held::OnExecutor => Footprint { executor: 8 * (13 + 2 * slots), host: 8 * 6 },
        Held::OnHost => Footprint { executor: 8 * 13, host: 8 * (6 + 2 * slots) },
    };
    let decompose = |domains| survey.decompose(domains, args.placement.grid);
    let placement = processes.place("fwi3d", &args.placement, &survey.shape(), footprint, decompose)?;
    let [nx, ny, nz] = survey.n;
    let s = &survey;
    println!(
        "fwi3d: {nx}x{ny}x{nz} (+{} sponge), {} shots, {} receivers, {} steps of {:.3e} s, f0 {:.1} Hz, {} iterations, {}",
        s.sponge, s.shots.len(), s.receivers.len(), s.steps, s.dt, s.f0, args.iterations,
        s.slots.map_or("every step stored".into(), |k| format!("{k} checkpoint slots"))
            + if s.held == Held::OnHost { " on the host" } else { "" }
    );
    placement.print();
    let job = Invert { survey: &survey, iterations: args.iterations, out: &args.out };
    processes.run(placement, Overlap::Auto, "fwi3d", job)
}

/// The inversion on whatever executor the options chose.
struct Invert<'a> {
    survey: &'a Survey,
    iterations: usize,
    out: &'a PathBuf,
}

impl OnExecutor for Invert<'_> {
    type Output = ();

    fn run<E: Executor>(self, exec: &E) -> Result<(), Box<dyn std::error::Error>> {
        println!("running on {}", exec.describe());
        let (s, clock) = (self.survey, std::time::Instant::now());
        let fwi = Fwi::new(exec, s.clone())?;
        let observed = fwi.observe(&fwi.upload(&s.slowness(true)?)?)?;
        let start = s.slowness(false)?;
        let inv = fwi.invert(&start, &observed, self.iterations, |k, phi| {
            println!("iteration {k:>3}: misfit {phi:.6e} ({:.1} s)", clock.elapsed().as_secs_f64());
        })?;
        let (first, last) = (inv.misfits[0], *inv.misfits.last().unwrap_or(&inv.misfits[0]));
        println!(
            "misfit {first:.6e} -> {last:.6e}: {:.1} % of the start ({:.1} s)",
            100.0 * last / first,
            clock.elapsed().as_secs_f64()
        );
        if let Some(why) = &inv.stopped {
            println!("stopped early: {why}");
        }
        let r = s.recovered(&start, &inv.model)?;
        let a = &s.anomaly;
        println!(
            "anomaly: true {:+.0} m/s at {:?} m; largest update {:+.1} m/s at {:?} m, {:.0} m from the centre; correlation {:.3}",
            a.dv, a.centre, r.peak_dv, r.peak, r.distance, r.correlation
        );
        s.write(self.out, &start, &inv)?;
        println!("wrote the models, the gradient and the misfit curve under {}", self.out.display());
        Ok(())
    }
}
