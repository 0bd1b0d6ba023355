//! Seed paper 002's seismic model on the CPU (or a GPU): the 8th-order acoustic wave equation in
//! a two-layer medium with a PML, a Ricker source near the surface and a line of receivers.
//! Writes a seismogram, the traces, a wavefield section and the 3D wavefield. The pictures show
//! the wavefield mid-run (`--snapshot`): by the last step of the default run the direct wave and
//! the reflection have left the physical domain.
//! `--domains N` splits the grid (PML included) over N host subdomains, `--gpus N` over N
//! subdomains on GPUs (with the `cuda` feature), under `mpiexec` over the ranks too; `--grid
//! PX,PY,PZ` gives the process grid. The model's code is the same everywhere (`Distributed`), and
//! so are the outputs, bit for bit. `--checkpoint-every N` writes the whole state (and the traces
//! so far) every N steps, `--restart FILE` resumes from such a checkpoint on any placement, with
//! the same outputs as an uninterrupted run.
//! `cargo run --release -p stencil-examples --bin acoustic3d -- --help` lists the options.

use std::path::{Path, PathBuf};

use clap::Parser;
use stencil_examples::acoustic::{self, courant_limit, Model, Outcome, VelocityGrid};
use stencil_examples::checkpoint::{CheckpointArgs, Plan};
use stencil_examples::output::{write_png_slice, write_seismogram_png, write_traces_csv, write_vtk};
use stencil_examples::placement::{main_of, Footprint, OnExecutor, OverlapArgs, PlacementArgs, Processes};
use stencil_examples::progress;
use stencil_examples::velocity;
use stencil_runtime::{Executor, Field3, Overlap};

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
    /// Directory for the output files (created if missing).
    #[arg(long, default_value = "acoustic3d-out")]
    out: PathBuf,
    /// Step whose wavefield goes into wavefield_xz.png and wavefield.vtk (default: 3/5 of
    /// --steps, when the direct, reflected and transmitted waves are all in the domain).
    #[arg(long)]
    snapshot: Option<usize>,
    /// Read the velocity model (m/s, one value per physical point) from this file instead of the
    /// two layers: a .npy array v[i, j, k] (x, y, z; z down) or a NetCDF variable v(z, y, x);
    /// the physical grid is the array's shape (--size is ignored), the spacing 10 m.
    #[arg(long, value_name = "FILE")]
    velocity: Option<PathBuf>,
    /// The NetCDF variable of --velocity (default: the file's only 3D variable).
    #[arg(long, value_name = "NAME")]
    velocity_var: Option<String>,
    /// The source at any point: x,y,z in metres from the first physical point (z down),
    /// injected into its cell's eight nodes with trilinear weights (default: a grid node near
    /// the surface, mid x and y).
    #[arg(long, value_name = "X,Y,Z", value_parser = velocity::parse_xyz)]
    source_at: Option<[f64; 3]>,
    /// Receivers at any points: a text file of lines `x,y,z` in metres (`#` starts a comment),
    /// each sampling u by trilinear interpolation (default: a line of receivers along x on the
    /// grid nodes just below the source).
    #[arg(long, value_name = "FILE")]
    receivers: Option<PathBuf>,
    /// Skip the 3D wavefield (wavefield.vtk, the largest file).
    #[arg(long)]
    no_vtk: bool,
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
    let overlap = args.overlap.or(Overlap::OneDivided);
    let mut model = Model::layered(args.size, args.steps);
    if let Some(path) = &args.velocity {
        let grid = velocity::read(path, args.velocity_var.as_deref())?;
        let n = grid.shape().interior();
        // Source and receivers where the layered model puts them on a grid of this size.
        (model.n, model.source, model.receiver_depth) = (n, [n[0] / 2, n[1] / 2, n[2] / 16], n[2] / 32);
        model.velocity_grid = Some(VelocityGrid(std::sync::Arc::new(grid)));
        println!(
            "velocity model: {} ({}x{}x{} points, {:.0} to {:.0} m/s)",
            path.display(),
            n[0],
            n[1],
            n[2],
            model.v_min(),
            model.v_max()
        );
    }
    model.pml = args.pml;
    model.f0 = args.f0;
    if let Some(p) = args.source_at {
        model.source_position = Some(p);
        // The sections go through the source's nearest node.
        model.source = std::array::from_fn(|a| ((p[a] / model.h).round().max(0.0) as usize).min(model.n[a] - 1));
    }
    if let Some(path) = &args.receivers {
        model.receiver_positions = Some(velocity::read_positions(path)?);
    }
    model.dt = args.courant * model.h / model.v_max();
    model.check()?;
    if model.steps == 0 {
        return Err("--steps 0: nothing to run; give at least one step".into());
    }
    let snapshot = args.snapshot.unwrap_or((3 * model.steps).div_ceil(5).max(1));
    if !(1..=model.steps).contains(&snapshot) {
        return Err(format!("--snapshot {snapshot} is not one of the steps 1..={}", model.steps).into());
    }
    // Five fields on the executor; the initial state, the snapshot and the last wavefields on
    // the host.
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
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let plan = args.checkpoint.plan("acoustic3d", processes)?;
    let job = Acoustic { model: &model, snapshot, plan: &plan };
    let run = processes.run(placement, overlap, "acoustic3d", job)?;
    if processes.world().rank() != 0 {
        return Ok(()); // every rank holds the outcome; rank 0 reports it and writes the files
    }
    let (points, timed, seconds) = (tx * ty * tz, run.timed_steps, run.seconds);
    println!(
        "{steps} steps; steps {}..{steps} in {seconds:.2} s: {:.3} GPts/s (all {points} points per step, PML included; \
         the first steps prepare the kernels and are not timed)",
        steps + 1 - timed,
        (points * timed) as f64 / seconds / 1e9,
    );
    // A run restarted after the snapshot step has no snapshot.
    let snap = run.snapshot.as_ref();
    let end_max = max_abs(&run.last.u);
    let end_energy = model.energy::<f32>(&run.last.u, &run.last.u_prev);
    match snap {
        Some(snap) => println!(
            "step {snapshot} (t = {:.4} s): max |u| = {:.4e}, energy {:.4e}",
            snapshot as f64 * model.dt,
            max_abs(&snap.u),
            model.energy::<f32>(&snap.u, &snap.u_prev)
        ),
        None => println!("step {snapshot}: before the restart, so no wavefield pictures (restart earlier for them)"),
    }
    println!(
        "step {} (t = {:.4} s): max |u| = {end_max:.4e}, energy {end_energy:.4e} (physical domain; \
         energy = sum of (du/dt)^2 / V^2 + |grad u|^2, times h^3)",
        model.steps,
        model.steps as f64 * model.dt
    );

    let written = write_outputs(&args.out, &model, &run.traces, snap.map(|s| &s.u), snapshot, !args.no_vtk)?;
    println!("wrote:");
    for (path, what) in written {
        println!("  {:<32} {what}", path.display());
    }
    Ok(())
}

/// The largest `|u|` of a field.
fn max_abs(field: &Field3<f32>) -> f32 {
    field.as_slice().iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

/// Writes the output files; returns each path with a line saying what it holds.
fn write_outputs(
    dir: &Path,
    model: &Model,
    traces: &[Vec<f32>],
    wavefield: Option<&Field3<f32>>,
    snapshot: usize,
    vtk: bool,
) -> Result<Vec<(PathBuf, String)>, Box<dyn std::error::Error>> {
    let mut written = Vec::new();
    let receivers = traces.first().map_or(0, Vec::len);
    let t = snapshot as f64 * model.dt;

    let path = dir.join("seismogram.png");
    write_seismogram_png(&path, traces)?;
    written.push((path, format!("{receivers} receivers (x) across, {} steps down, t^2 gain", traces.len())));

    let path = dir.join("traces.csv");
    write_traces_csv(&path, traces, model.dt)?;
    written.push((path, format!("time_s, then u at the {receivers} receivers; one row per step")));

    let Some(wavefield) = wavefield else { return Ok(written) };
    let path = dir.join("wavefield_xz.png");
    let y = (model.pml + model.source[1]) as isize;
    write_png_slice(&path, wavefield, y, model.pml)?;
    written.push((path, format!("u at step {snapshot} (t = {t:.3} s), xz section through the source, PML cut off")));

    if vtk {
        let path = dir.join("wavefield.vtk");
        let velocity = Field3::from_fn(*wavefield.shape(), |g| model.velocity(g) as f32);
        let origin = [-(model.pml as f64) * model.h; 3];
        write_vtk(&path, &[("u", wavefield), ("velocity", &velocity)], model.h, origin)?;
        written.push((
            path,
            format!("u at step {snapshot} and velocity, PML included (physical domain from 0 m, z down)"),
        ));
    }
    Ok(written)
}

/// The run on whatever executor the options chose (each stencil's default strategy), with a
/// progress bar, checkpointed or not.
struct Acoustic<'a> {
    model: &'a Model,
    snapshot: usize,
    plan: &'a Plan,
}

impl OnExecutor for Acoustic<'_> {
    type Output = Outcome<f32>;

    fn run<E: Executor>(self, exec: &E) -> Result<Outcome<f32>, Box<dyn std::error::Error>> {
        let (model, snapshot) = (self.model, Some(self.snapshot));
        let bar = progress::steps(model.steps);
        bar.println(format!("running on {}", exec.describe()));
        let strategies = Default::default();
        let run =
            acoustic::run_with::<E, f32>(exec, &strategies, model, snapshot, self.plan, |s| bar.set_position(s as u64));
        if let Ok((_, start @ 1..)) = &run {
            bar.println(format!("restarted from step {start} (the traces before it come from the checkpoint)"));
        }
        bar.finish_and_clear();
        Ok(run?.0)
    }
}
