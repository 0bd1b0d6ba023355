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
use stencil_examples::placement::{
    check_fits, print_decomposition, Footprint, Memory, OnExecutor, OverlapArgs, PlacementArgs, Processes,
};
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
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_xyz)]
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
    if let Err(e) = Processes::start().map_err(Into::into).and_then(|p| run(&args, &p)) {
        eprintln!("acoustic3d: error: {e}");
        std::process::exit(1);
    }
}

/// A point `x,y,z` (metres).
fn parse_xyz(text: &str) -> Result<[f64; 3], String> {
    let values: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{text}` is not x,y,z in metres ({e})"))?;
    <[f64; 3]>::try_from(values).map_err(|v| format!("`{text}` has {} values; give x,y,z in metres", v.len()))
}

/// Receiver positions from a text file: one `x,y,z` (metres) per line; blank lines and `#`
/// comments are skipped. A line that is not three numbers is an error naming the file and line.
fn read_positions(path: &std::path::Path) -> Result<Vec<[f64; 3]>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--receivers {}: {e}", path.display()))?;
    let mut positions = Vec::new();
    for (line, content) in text.lines().enumerate() {
        let content = content.split('#').next().unwrap_or("").trim();
        if !content.is_empty() {
            positions
                .push(parse_xyz(content).map_err(|e| format!("--receivers {}:{}: {e}", path.display(), line + 1))?);
        }
    }
    Ok(positions)
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
        model.receiver_positions = Some(read_positions(path)?);
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
    let target = args.placement.target("acoustic3d")?;
    processes.check(target)?;
    // Decompose before anything runs, so that a grid that does not fit is reported at once.
    let decomposition = target.domains().map(|n| model.decompose(n, args.placement.grid)).transpose()?;
    // Five fields on the executor; the initial state, the snapshot and the last wavefields on
    // the host.
    let footprint = Footprint { executor: 5 * 4, host: 9 * 4 };
    let memory = Memory::of_this_machine(target);
    let halo = model.shape().halo_widths();
    let ranks = processes.world().size();
    check_fits(target, decomposition.as_ref(), model.shape().interior(), halo, footprint, &memory, ranks)?;
    let total = model.shape().interior();
    let [nx, ny, nz] = model.n;
    let physical = if nx == ny && ny == nz { format!("{nx}^3") } else { format!("{nx}x{ny}x{nz}") };
    println!(
        "acoustic3d: {physical} physical + {pml}-point PML = {}x{}x{} points (h = {h} m), {} steps of dt = {:.4e} s \
         (courant {}, limit {:.4}), t = {:.4} s, {} threads",
        total[0],
        total[1],
        total[2],
        model.steps,
        model.dt,
        args.courant,
        courant_limit(),
        model.steps as f64 * model.dt,
        rayon::current_num_threads(),
        pml = model.pml,
        h = model.h,
    );
    let per_wavelength = model.v_min() / (2.5 * model.f0) / model.h;
    if per_wavelength < 5.0 {
        eprintln!(
            "acoustic3d: warning: {per_wavelength:.1} points per shortest wavelength (V_min / 2.5 f0); \
             below about 5 the wavefield is visibly dispersive: lower --f0"
        );
    }
    if let Some(d) = &decomposition {
        print_decomposition(d);
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;

    args.checkpoint.check()?;
    let plan = Plan::new("acoustic3d", &args.checkpoint).written_by(processes.world().rank() == 0);
    if let Some(n) = plan.every {
        println!("checkpoints every {n} steps into {}", plan.dir.display());
    }
    let job = Acoustic { model: &model, snapshot, plan: &plan };
    let run = processes.on_executor(target, decomposition, overlap, "acoustic3d", job)?;
    if processes.world().rank() != 0 {
        return Ok(()); // every rank holds the outcome; rank 0 reports it and writes the files
    }
    let points = total.iter().product::<usize>();
    println!(
        "{} steps; steps {}..{} in {:.2} s: {:.3} GPts/s (all {points} points per step, PML included; the first \
         steps prepare the kernels and are not timed)",
        model.steps,
        model.steps + 1 - run.timed_steps,
        model.steps,
        run.seconds,
        (points * run.timed_steps) as f64 / run.seconds / 1e9,
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
