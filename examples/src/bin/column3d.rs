//! Column physics with column sweeps (`examples/src/column.rs`): a warm, supersaturated bubble
//! in a moist atmosphere at rest condenses, rains out and diffuses vertically. Each step runs
//! three sweeps over every column: the implicit vertical diffusion (Thomas algorithm, up then
//! down) and warm rain (saturation adjustment, autoconversion, accretion, sedimentation from
//! the top down). Prints the rain that reached the ground and the water budget, which closes to
//! round-off. Column sweeps run on the host.
//! `cargo run --release -p stencil-examples --bin column3d -- --help` lists the options.

use clap::Parser;
use std::time::Instant;
use stencil_examples::column::{column_water, moist_bubble, Column};
use stencil_runtime::{Executor, Host, Loop3D};

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
}

fn main() {
    let args = Args::parse();
    stencil_examples::logging::init();
    if let Err(e) = run(&args) {
        eprintln!("column3d: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.size == 0 || args.levels == 0 || !(args.dt > 0.0 && args.dz > 0.0 && args.diffusivity >= 0.0) {
        return Err("--size and --levels must be positive, --dt and --dz positive, --diffusivity not negative".into());
    }
    let n = [args.size, args.size, args.levels];
    let initial = moist_bubble(n, args.dz);
    let mut model = Column::new(&Host, &initial, args.diffusivity, args.dz)?;
    // The bottom level (storage k = 1, above the halo level): the rain flux into the ground.
    let ground = Loop3D::from_bounds(Host.shape_of(&model.rain_out).extent(), [0, 0, 1], [n[0], n[1], 2])?;
    let mut rained = 0.0;
    let start = Instant::now();
    for _ in 0..args.steps {
        model.step(&Host, args.dt)?;
        let surface = Host.read_range(&model.rain_out, &ground)?;
        rained += args.dt * surface.iter().sum::<f64>();
    }
    let seconds = start.elapsed().as_secs_f64();
    let total = |w: Vec<Vec<f64>>| w.into_iter().flatten().sum::<f64>();
    let (before, after) = (total(column_water(&initial, args.dz)), total(column_water(&model.state, args.dz)));
    let points = (n[0] * n[1] * n[2] * args.steps) as f64;
    println!("{} x {} columns of {} levels, {} steps of {} s", n[0], n[1], n[2], args.steps, args.dt);
    println!("water in the air: {before:.6e} kg/m² summed over columns at the start, {after:.6e} at the end");
    println!("rain at the ground: {rained:.6e} kg/m² summed over columns");
    println!("budget: (end + rain - start) / start = {:.1e}", (after + rained - before) / before);
    println!("{:.1} s, {:.0} M point-steps/s", seconds, points / seconds / 1e6);
    Ok(())
}
