//! The seismic model of Sai et al. 2020 (`stencil_examples::acoustic`) on the CPU, a GPU or
//! subdomains: the 8th-order acoustic wave equation in a two-layer medium with a PML, a Ricker
//! source and receivers. Writes a seismogram, the traces, a wavefield section and the 3D
//! wavefield, the same bits on every placement, restarts included; the acoustic3d page of the
//! examples docs has the details. `cargo run --release -p stencil-examples --bin acoustic3d --
//! --help` lists the options.

use clap::Parser;
use stencil_examples::acoustic::{self, courant_limit, Model, Outcome, Wavefields};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::output::Acoustic3dOutput;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress::{self, Timed};
use stencil_examples::velocity::InputArgs;
use stencil_runtime::{Executor, Overlap};

/// The 8th-order acoustic wave equation (1500 m/s over 2500 m/s at half depth, 10 m spacing)
/// with a PML, a Ricker source and receivers along x just below it.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Physical points along every axis (the PML comes on top).
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Time steps.
    #[arg(long, default_value_t = 700)]
    steps: usize,
    /// Width of the absorbing layer (PML) on every side, in points (0: reflecting walls).
    #[arg(long, default_value_t = 16)]
    pml: usize,
    /// Courant number V_max dt / h (dt = courant * h / V_max); the scheme is stable up to about 0.453.
    #[arg(long, default_value_t = 0.4)]
    courant: f64,
    /// Peak frequency of the Ricker source, Hz.
    #[arg(long, default_value_t = 10.0)]
    f0: f64,
    /// Outputs: --out, --snapshot, --no-vtk.
    #[command(flatten)]
    output: Acoustic3dOutput,
    /// Inputs: --velocity, --velocity-var, --source-at, --receivers.
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    overlap: OverlapArgs,
    /// Where to run: --gpu, --domains, --gpus, --grid.
    #[command(flatten)]
    placement: PlacementArgs,
    /// Checkpoints: --checkpoint-every, --checkpoint-dir, --restart.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
}

fn main() {
    let args = Args::parse();
    main_of("acoustic3d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    let mut model = Model { pml: args.pml, f0: args.f0, ..Model::layered(args.size, args.steps) };
    args.input.apply(&mut model)?;
    model.dt = args.courant * model.h / model.v_max();
    model.check()?;
    if model.steps == 0 {
        return Err("--steps 0: nothing to run; give at least one step".into());
    }
    let snapshot = args.output.prepare(model.steps)?;
    // Five fields on the executor; on the host the initial state, the snapshot and the last wavefields.
    let footprint = Footprint { executor: 5 * 4, host: 9 * 4 };
    let decompose = |domains| model.decompose(domains, args.placement.grid);
    let placement = processes.place("acoustic3d", &args.placement, &model.shape(), footprint, decompose)?;
    let ([tx, ty, tz], [nx, ny, nz]) = (model.shape().interior(), model.n);
    let physical = if nx == ny && ny == nz { format!("{nx}^3") } else { format!("{nx}x{ny}x{nz}") };
    let (pml, h, steps, dt, courant, limit) =
        (model.pml, model.h, model.steps, model.dt, args.courant, courant_limit());
    println!(
        "acoustic3d: {physical} physical + {pml}-point PML = {tx}x{ty}x{tz} points (h = {h} m), {steps} steps of dt = \
         {dt:.4e} s (courant {courant}, limit {limit:.4}), t = {:.4} s, {} threads",
        steps as f64 * dt,
        rayon::current_num_threads(),
    );
    let per_wavelength = model.v_min() / (2.5 * model.f0) / model.h;
    if per_wavelength < 5.0 {
        eprintln!(
            "acoustic3d: warning: {per_wavelength:.1} points per shortest wavelength (V_min / 2.5 f0); \
             below about 5 the wavefield is visibly dispersive: lower --f0"
        );
    }
    placement.print();
    let plan = args.checkpoint.plan("acoustic3d", processes)?;
    let timed = Timed::new(progress::steps(model.steps), acoustic::WARM_UP);
    let job = Acoustic { model: &model, snapshot, plan: &plan, timed: &timed };
    let run = processes.run(placement, args.overlap.or(Overlap::Auto), "acoustic3d", job)?;
    if processes.world().rank() != 0 {
        return Ok(()); // every rank holds the outcome; rank 0 reports it and writes the files
    }
    if let Some(t) = timed.timing(Some(snapshot)) {
        let (points, (first, last)) = (tx * ty * tz, t.steps);
        println!(
            "{steps} steps; steps {first}..{last} in {:.2} s: {:.3} GPts/s (all {points} points per step, PML included; \
             the first steps prepare the kernels and are not timed, nor is the snapshot's step)",
            t.seconds,
            t.per_second(points as f64) / 1e9,
        );
    }
    let report = |step: usize, w: &Wavefields<f32>| {
        let max = w.u.as_slice().iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let energy = model.energy::<f32>(&w.u, &w.u_prev);
        format!("step {step} (t = {:.4} s): max |u| = {max:.4e}, energy {energy:.4e}", step as f64 * model.dt)
    };
    // A run restarted after the snapshot step has no snapshot.
    match &run.snapshot {
        Some(snap) => println!("{}", report(snapshot, snap)),
        None => println!("step {snapshot}: before the restart, so no wavefield pictures (restart earlier for them)"),
    }
    let energy = "energy = sum of (du/dt)^2 / V^2 + |grad u|^2, times h^3";
    println!("{} (physical domain; {energy})", report(model.steps, &run.last));
    args.output.write(&model, &run.traces, run.snapshot.as_ref().map(|s| &s.u), snapshot)?;
    Ok(())
}

/// The run on the executor the options chose (default strategies), with its progress bar.
struct Acoustic<'a> {
    model: &'a Model,
    snapshot: usize,
    plan: &'a Plan,
    timed: &'a Timed,
}

impl OnExecutor for Acoustic<'_> {
    type Output = Outcome<f32>;

    fn run<E: Executor>(self, exec: &E) -> Result<Outcome<f32>, Box<dyn std::error::Error>> {
        let bar = &self.timed.bar;
        bar.println(format!("running on {}", exec.describe()));
        let tick = |s: usize| {
            bar.set_position(s as u64);
            self.timed.tick(s);
        };
        let run = acoustic::run(exec, &Default::default(), self.model, Some(self.snapshot), self.plan, tick);
        if let Ok(Outcome { start: start @ 1.., .. }) = &run {
            bar.println(format!("restarted from step {start} (the traces before it come from the checkpoint)"));
        }
        bar.finish_and_clear();
        run
    }
}
