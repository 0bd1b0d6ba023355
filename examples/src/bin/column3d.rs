//! Column physics with column sweeps (`examples/src/column.rs`): a warm, supersaturated bubble
//! in a moist atmosphere at rest condenses, rains out and diffuses vertically. Each step runs
//! three sweeps over every column: the implicit vertical diffusion (Thomas algorithm, up then
//! down) and warm rain (saturation adjustment, autoconversion, accretion, sedimentation from
//! the top down). Prints the rain that reached the ground and the water budget, which closes to
//! round-off, and writes a PNG of the rain accumulated at the ground (`--out`). `--gpu N` runs on
//! a GPU (with the `cuda` feature), `--domains N` splits the columns over N host subdomains and
//! `--gpus N` over N GPU subdomains (`--grid PX,PY,1`: whole columns), under `mpiexec` over the
//! ranks too; the model's code is the same everywhere (`Distributed`).
//! `cargo run --release -p stencil-examples --bin column3d -- --help` lists the options.

use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;
use stencil_examples::column::{column_water, moist_bubble, Column, State};
use stencil_examples::output::write_png_image;
use stencil_examples::placement::{main_of, Footprint, OnExecutor, PlacementArgs, Processes};
use stencil_runtime::{Decomposition, Executor, Field3, Loop3D, Overlap};

/// A moist bubble raining out: implicit vertical diffusion and warm rain in every column.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Columns along x and y.
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Levels per column.
    #[arg(long, default_value_t = 64)]
    levels: usize,
    /// Level spacing, m.
    #[arg(long, default_value_t = 100.0)]
    dz: f64,
    /// Time step, s (the rain falls at most ~10 m/s: keep 10 dt / dz below 1).
    #[arg(long, default_value_t = 5.0)]
    dt: f64,
    /// Steps.
    #[arg(long, default_value_t = 240)]
    steps: usize,
    /// Vertical eddy diffusivity, m²/s.
    #[arg(long, default_value_t = 20.0)]
    diffusivity: f64,
    /// Where to run: --gpu, --domains, --gpus, --grid (`PX,PY,1`: whole columns; default the
    /// split of x and y with the least boundary).
    #[command(flatten)]
    placement: PlacementArgs,
    /// Directory for the PNG of the rain at the ground (created if missing).
    #[arg(long, default_value = "column3d-out")]
    out: PathBuf,
}

fn main() {
    let args = Args::parse();
    main_of("column3d", |processes| run(&args, processes));
}

fn run(args: &Args, processes: &Processes) -> Result<(), Box<dyn std::error::Error>> {
    if args.size == 0 || args.levels == 0 || !(args.dt > 0.0 && args.dz > 0.0 && args.diffusivity >= 0.0) {
        return Err("--size and --levels must be positive, --dt and --dz positive, --diffusivity not negative".into());
    }
    let n = [args.size, args.size, args.levels];
    // Whole columns by default: the split of x and y with the least boundary.
    let decompose = |domains| {
        let grid = args.placement.grid.or_else(|| {
            let [x, y] = Decomposition::auto([n[0], n[1]], domains, [false; 2], [1; 2]).ok()?.grid();
            Some([x, y, 1])
        });
        Decomposition::with_grid(n, domains, grid, [false; 3], [0, 0, 1])
    };
    // Six state fields, three scratch fields and the rain flux on the executor (f64), the initial
    // and the final state on the host.
    let footprint = Footprint { executor: 10 * 8, host: 12 * 8 };
    let shape = stencil_runtime::Shape3::new(n).halo_per_axis([0, 0, 1]);
    let placement = processes.place("column3d", &args.placement, &shape, footprint, decompose)?;
    let grid = placement.decomposition.as_ref().map_or([1; 3], |d| d.grid());
    let initial = moist_bubble(n, args.dz);
    let job = Rain { initial: &initial, args };
    let (ground_rain, state, seconds) = processes.run(placement, Overlap::None, "column3d", job)?;
    let rained: f64 = ground_rain.iter().flatten().sum();
    let total = |w: Vec<Vec<f64>>| w.into_iter().flatten().sum::<f64>();
    let (before, after) = (total(column_water(&initial, args.dz)), total(column_water(&state, args.dz)));
    let points = (n[0] * n[1] * n[2] * args.steps) as f64;
    println!(
        "{} x {} columns of {} levels, {} steps of {} s, process grid {grid:?}",
        n[0], n[1], n[2], args.steps, args.dt
    );
    println!("water in the air: {before:.6e} kg/m² summed over columns at the start, {after:.6e} at the end");
    println!("rain at the ground: {rained:.6e} kg/m² summed over columns");
    println!("budget: (end + rain - start) / start = {:.1e}", (after + rained - before) / before);
    println!("{:.1} s, {:.0} M point-steps/s", seconds, points / seconds / 1e6);
    if processes.world().rank() != 0 {
        return Ok(());
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let path = args.out.join("rain.png");
    let values: Vec<f32> = ground_rain.iter().rev().flatten().map(|&r| r as f32).collect();
    let most = values.iter().fold(0.0f32, |m, &v| m.max(v));
    write_png_image(&path, &values, n[0], 0.0, most)?;
    println!("wrote {} (rain at the ground, 0 to {most:.3e} kg/m², y up)", path.display());
    Ok(())
}

/// The run on whatever executor the options chose: the rain at the ground per column (`[j][i]`,
/// kg/m²), the final state on the host and the seconds the steps took.
struct Rain<'a> {
    initial: &'a State<Field3<f64>>,
    args: &'a Args,
}

impl OnExecutor for Rain<'_> {
    type Output = (Vec<Vec<f64>>, State<Field3<f64>>, f64);

    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>> {
        let args = self.args;
        let mut column = Column::new(exec, self.initial, args.diffusivity, args.dz)?;
        let extent = exec.shape_of(&column.rain_out).extent();
        // The bottom level (storage k = 1, above the halo level): the flux into the ground, one
        // value per column (i fastest).
        let ground = Loop3D::from_bounds(extent, [0, 0, 1], [extent[0], extent[1], 2])?;
        let mut rain = vec![vec![0.0f64; extent[0]]; extent[1]];
        let start = Instant::now();
        for _ in 0..args.steps {
            column.step(exec, args.dt)?;
            for (c, flux) in exec.read_range(&column.rain_out, &ground)?.into_iter().enumerate() {
                rain[c / extent[0]][c % extent[0]] += args.dt * flux;
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        Ok((rain, column.state.try_map(|f| exec.download(f))?, seconds))
    }
}
