//! Column physics with column sweeps (`examples/src/column.rs`): a warm, supersaturated bubble
//! in a moist atmosphere at rest condenses, rains out and diffuses vertically. Each step runs
//! three sweeps over every column: the implicit vertical diffusion (Thomas algorithm, up then
//! down) and warm rain (saturation adjustment, autoconversion, accretion, sedimentation from
//! the top down). Prints the rain that reached the ground and the water budget, which closes to
//! round-off, and writes a PNG of the rain accumulated at the ground (`--out`). This program runs on the host (the model itself runs on a GPU too, see
//! `examples/tests/column_gpu.rs`); `--domains N` splits the columns over N host
//! subdomains (`--grid PX,PY,1`), which exchange nothing.
//! `cargo run --release -p stencil-examples --bin column3d -- --help` lists the options.

use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;
use stencil_examples::column::{column_water, decomposed, moist_bubble};
use stencil_examples::output::write_png_image;
use stencil_examples::placement::parse_grid;
use stencil_runtime::{Decomposition, Domains, Executor, Host, Loop3D};

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
    /// Split the columns over this many host subdomains.
    #[arg(long, default_value_t = 1)]
    domains: usize,
    /// The process grid of --domains, `PX,PY,1` (default: the grid of least halo surface that
    /// keeps columns whole).
    #[arg(long, value_name = "PX,PY,1", value_parser = parse_grid)]
    grid: Option<[usize; 3]>,
    /// Directory for the PNG of the rain at the ground (created if missing).
    #[arg(long, default_value = "column3d-out")]
    out: PathBuf,
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
    // Whole columns by default: the split of x and y with the least boundary.
    let grid = args.grid.or_else(|| {
        let d = Decomposition::auto([n[0], n[1]], args.domains, [false; 2], [1; 2]).ok()?;
        let [x, y] = d.grid();
        Some([x, y, 1])
    });
    let d = Decomposition::with_grid(n, args.domains, grid, [false; 3], [0, 0, 1])?;
    let domains = Domains::new(d, vec![Host; args.domains])?;
    let mut parts = decomposed(&domains, &initial, args.diffusivity, args.dz)?;
    // The rain at the ground per column, `[j][i]` (kg/m²).
    let mut ground_rain = vec![vec![0.0f64; n[0]]; n[1]];
    let start = Instant::now();
    for _ in 0..args.steps {
        for ((part, exec), sub) in parts.iter_mut().zip(domains.execs()).zip(domains.subdomains()) {
            part.step(exec, args.dt)?;
            // The bottom level (storage k = 1, above the halo level): the flux into the ground,
            // one value per column in storage order (i fastest).
            let extent = exec.shape_of(&part.rain_out).extent();
            let ground = Loop3D::from_bounds(extent, [0, 0, 1], [extent[0], extent[1], 2])?;
            for (c, flux) in exec.read_range(&part.rain_out, &ground)?.into_iter().enumerate() {
                let [i, j, _] = sub.to_global([(c % extent[0]) as isize, (c / extent[0]) as isize, 0]);
                ground_rain[j as usize][i as usize] += args.dt * flux;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let rained: f64 = ground_rain.iter().flatten().sum();
    let total = |w: Vec<Vec<f64>>| w.into_iter().flatten().sum::<f64>();
    let before = total(column_water(&initial, args.dz));
    let after: f64 = parts.iter().map(|p| total(column_water(&p.state, args.dz))).sum();
    let points = (n[0] * n[1] * n[2] * args.steps) as f64;
    println!(
        "{} x {} columns of {} levels, {} steps of {} s, over {} subdomain(s) {:?}",
        n[0],
        n[1],
        n[2],
        args.steps,
        args.dt,
        args.domains,
        domains.decomposition().grid()
    );
    println!("water in the air: {before:.6e} kg/m² summed over columns at the start, {after:.6e} at the end");
    println!("rain at the ground: {rained:.6e} kg/m² summed over columns");
    println!("budget: (end + rain - start) / start = {:.1e}", (after + rained - before) / before);
    println!("{:.1} s, {:.0} M point-steps/s", seconds, points / seconds / 1e6);
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let path = args.out.join("rain.png");
    let values: Vec<f32> = ground_rain.iter().rev().flatten().map(|&r| r as f32).collect();
    let most = values.iter().fold(0.0f32, |m, &v| m.max(v));
    write_png_image(&path, &values, n[0], 0.0, most)?;
    println!("wrote {} (rain at the ground, 0 to {most:.3e} kg/m², y up)", path.display());
    Ok(())
}
