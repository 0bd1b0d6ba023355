//! GPU benchmark of the Euler finite-volume model (Xu et al. 2019): one SSP-RK3 stage on n³
//! cells (f64) for the fused stage stencil and the split variant (three face-flux stencils and
//! an update), under a few strategies, both Riemann solvers: ms per stage (CUDA events, median
//! after warm-up), cell-updates/s, and % of the device-to-device copy bandwidth measured in the
//! same run, against the minimal traffic of 80 B/cell (read 5 doubles, write 5) and against the
//! stage's own minimal bytes (fused also reads q_n: 120 B/cell; split writes and re-reads 15 flux
//! fields: 480 B/cell). The halo fill of a stage's input (5 fields x 3 axes, one kernel) is timed as
//! its own row. The fused stage's primitive state and face fluxes are point functions: under the
//! usual strategies its kernel is the inlined form (each face solved by both of its cells), under
//! `depot_*` (the default) each value lives in shared memory, computed once per block. Then the
//! same HLLC stage written out (`WrittenOut`: six face solves per cell in the stencil itself),
//! each row with the number of output values whose bits differ from the fused stage's. Each row
//! reports its own error instead of stopping the run.
//!
//! `fvm_bench [n] [--fused-only]` (default 256).

use stencil_bench::euler_written_out::EulerStageWrittenOut;
use stencil_bench::{copy_bandwidth, median};
use stencil_examples::euler::{Boundary, Euler, Limiter, Riemann, Scheme, State};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{Executor, Strategy};

const WARMUP: usize = 2;
const REPS: usize = 10;

type Error = Box<dyn std::error::Error>;

fn strategies() -> Vec<Option<Strategy>> {
    vec![
        None,
        Some(Strategy::PointPerThread { block: [32, 4, 2] }),
        Some(Strategy::PointPerThread { block: [64, 2, 1] }),
        Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 }),
        Some(Strategy::ZMarch { block_x: 64, block_y: 2, points_per_thread: 8 }),
    ]
}

/// The strategies of the fused stage (point functions): those above, then depot kernels (each
/// point function's values kept in shared memory, computed once per block).
fn fused_strategies() -> Vec<Option<Strategy>> {
    let depot = |block_x, block_y, planes| Some(Strategy::Depot { block_x, block_y, planes });
    let mut all = strategies();
    all.extend([
        depot(32, 8, 16),
        depot(32, 8, 32),
        depot(32, 8, 8),
        depot(32, 4, 16),
        depot(64, 4, 16),
        depot(16, 16, 16),
    ]);
    all
}

/// Median device time of `work` in ms over `REPS` runs after `WARMUP`.
fn time(gpu: &Gpu, mut work: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    for _ in 0..WARMUP {
        work()?;
    }
    gpu.synchronize()?;
    let mut samples = Vec::new();
    for _ in 0..REPS {
        let (r, ms) = gpu.time_ms(|| Ok(work()))?;
        r?;
        samples.push(ms);
    }
    Ok(median(samples))
}

/// Command line.
#[derive(clap::Parser)]
#[command(about = "The Euler stages (fused and split HLLC) on the GPU, Gcell/s and % of copy bandwidth")]
struct Args {
    /// Cells per axis.
    #[arg(default_value_t = 256)]
    n: usize,
    /// Only the fused HLLC stage and its written-out form.
    #[arg(long)]
    fused_only: bool,
}

fn main() -> Result<(), Error> {
    let Args { n, fused_only } = clap::Parser::parse();
    let gpu = Gpu::new(0)?;
    let cells = n * n * n;
    let copy = copy_bandwidth(&gpu, cells * 8)?;
    let mut base = Euler::cube(n, 1.0);
    base.boundaries = [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow];
    let q0 = base.from_primitive(|[x, y, z]| {
        let r2 = (x - 0.5).powi(2) + (y - 0.5).powi(2) + (z - 0.5).powi(2);
        [1.0 + 0.1 * (7.0 * x).sin(), 0.2, -0.1, 0.1 * (5.0 * y).cos(), if r2 < 0.01 { 10.0 } else { 1.0 }]
    });
    let mut state = State::new(&gpu, &base, &q0)?;
    let dt = base.dt(&gpu, &state)?;
    gpu.set_held(&state.clock.dt, dt)?;
    // The timed stage reads `q1` (and fills its halos first): start it as the state (not zeros:
    // 0/0 densities).
    for (q1, q) in state.q1.iter_mut().zip(&state.q) {
        gpu.copy(q1, q)?;
    }
    println!("{n}^3 cells, f64, one SSP-RK3 stage (the second: a = 3/4, b = 1/4), dt = {dt:.3e}");
    println!("\n| scheme | riemann | strategy | ms/stage | Gcell/s | GB/s at 80 B/cell | % copy (80 B) | own bytes/cell | % copy (own) |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    let mut best: Vec<(String, f64)> = Vec::new();
    let riemanns = if fused_only { vec![Riemann::Hllc] } else { vec![Riemann::Hllc, Riemann::Rusanov] };
    let schemes = if fused_only { vec![Scheme::Fused] } else { vec![Scheme::Fused, Scheme::Split] };
    for riemann in riemanns {
        for &scheme in &schemes {
            let e = Euler { riemann, scheme, ..base };
            let own = match scheme {
                Scheme::Fused => 120.0,
                Scheme::Split => 480.0,
            };
            let list = if scheme == Scheme::Fused { fused_strategies() } else { strategies() };
            for strategy in list {
                let label = strategy.map_or("default".to_string(), |s| s.to_string());
                let e = Euler { strategy, ..e };
                let row = time(&gpu, || e.stage(&gpu, &mut state, 1));
                match row {
                    Ok(ms) => {
                        let rate = cells as f64 / (ms * 1e-3);
                        let (gbs, gbs_own) = (rate * 80.0 / 1e9, rate * own / 1e9);
                        println!(
                            "| {scheme:?} | {riemann:?} | {label} | {ms:.3} | {:.3} | {gbs:.0} | {:.1}% | {own} | {:.1}% |",
                            rate / 1e9,
                            100.0 * gbs / copy,
                            100.0 * gbs_own / copy
                        );
                        best.push((format!("{scheme:?} {riemann:?} {label}"), ms));
                    }
                    Err(err) => println!("| {scheme:?} | {riemann:?} | {label} | error: {err} | | | | | |"),
                }
            }
        }
    }
    // The same stage with every value written out (six face solves per cell), against the fused
    // stage's bits.
    let e = Euler { riemann: Riemann::Hllc, scheme: Scheme::Fused, ..base };
    e.stage(&gpu, &mut state, 1)?;
    let want: Vec<_> = state.q2.iter().map(|f| gpu.download(f)).collect::<Result<_, _>>()?;
    // The limiter's `(κ, β)`, as the model's stage takes them.
    let (kappa, beta) = match e.limiter {
        Limiter::Koren => (1.0 / 3.0, 2.0),
        Limiter::Minmod => (0.0, 1.0),
    };
    let interior = Loop3D::interior(gpu.shape_of(&state.q[0]));
    for strategy in strategies() {
        let label = strategy.map_or("default".to_string(), |s| s.to_string());
        let mut run = || -> Result<(), Error> {
            let State { q, q1, q2, clock, .. } = &mut state;
            let [hx, hy, hz] = e.h;
            let args = (
                e.gamma,
                kappa,
                beta,
                0.75,
                0.25,
                &clock.dt,
                hx,
                hy,
                hz,
                e.gravity,
                q1.each_ref(),
                q.each_ref(),
                q2.each_mut(),
            );
            Ok(gpu.run_with(&interior, EulerStageWrittenOut, strategy, args)?)
        };
        match time(&gpu, &mut run) {
            Ok(ms) => {
                let differ: usize = state
                    .q2
                    .iter()
                    .zip(&want)
                    .map(|(f, w)| -> Result<usize, Error> {
                        let got = gpu.download(f)?;
                        Ok(got.as_slice().iter().zip(w.as_slice()).filter(|(a, b)| a.to_bits() != b.to_bits()).count())
                    })
                    .sum::<Result<usize, Error>>()?;
                let rate = cells as f64 / (ms * 1e-3);
                println!(
                    "| WrittenOut | Hllc | {label} | {ms:.3} | {:.3} | {:.0} | {:.1}% | 120 | {:.1}% | values differing from fused: {differ}",
                    rate / 1e9,
                    rate * 80.0 / 1e9,
                    100.0 * rate * 80.0 / 1e9 / copy,
                    100.0 * rate * 120.0 / 1e9 / copy
                );
                best.push((format!("WrittenOut Hllc {label}"), ms));
            }
            Err(err) => println!("| WrittenOut | Hllc | {label} | error: {err} | | | | | |"),
        }
    }
    for key in ["Fused Hllc", "Split Hllc", "WrittenOut Hllc", "Fused Rusanov", "Split Rusanov"] {
        if let Some((name, ms)) =
            best.iter().filter(|(name, _)| name.starts_with(key)).min_by(|a, b| a.1.total_cmp(&b.1))
        {
            println!("best {key}: {name} at {ms:.3} ms/stage");
        }
    }
    Ok(())
}
