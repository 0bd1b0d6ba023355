//! The shallow water solver on a GPU equals the CPU: an off-centre dam break with a current on
//! a grid of odd sizes (walls in x, outflow in y; then periodic in x, walls in y), after enough
//! steps for the waves to hit the boundaries, under several kernel strategies (2D stencils
//! accept every strategy: the o axis of a 2D launch has extent 1). Kernels are compiled with
//! `--fmad=false`, so the fields are expected bit-equal; the test asserts a relative L2
//! difference below 1e-10 and prints whether the bits are equal. The GPU and the host run the
//! same generic `Solver`. Needs `--features cuda`; skipped with a message where there is no
//! GPU.
#![cfg(feature = "cuda")]

use stencil_examples::swe::{Edge, Model, Solver, State};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Field2, Host, Strategy};

const STEPS: usize = 80;

fn model(edges: [Edge; 2]) -> Model {
    Model { n: [75, 61], dx: [0.2, 0.25], edges, cfl: 0.4 }
}

fn initial(model: &Model) -> State<Field2<f64>> {
    model.initial(|[x, y]| {
        let (dx, dy) = (x - 1.5, y + 1.0);
        let h = if dx * dx + dy * dy < 9.0 { 2.5 } else { 1.0 };
        [h, 0.3 * h, -0.2 * h]
    })
}

/// Relative L2 difference of the interiors and whether every value is bit-equal.
fn compare(a: &Field2<f64>, b: &Field2<f64>) -> (f64, bool) {
    let [nx, ny] = a.shape().interior();
    let (mut diff, mut norm, mut bits) = (0.0, 0.0, true);
    for j in 0..ny as isize {
        for i in 0..nx as isize {
            let (x, y) = (a.get([i, j]).unwrap(), b.get([i, j]).unwrap());
            diff += (x - y) * (x - y);
            norm += x * x;
            bits &= x.to_bits() == y.to_bits();
        }
    }
    ((diff / norm).sqrt(), bits)
}

#[test]
fn gpu_equals_cpu_under_several_strategies() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("skipped: no GPU ({e})");
            return;
        }
    };
    let strategies = [
        None,
        Some(Strategy::PointPerThread { block: [128, 2, 1] }),
        Some(Strategy::PointPerThread { block: [32, 4, 1] }),
        Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 1 }),
        Some(Strategy::Stream25D { tile_x: 32, tile_y: 8 }),
        Some(Strategy::SharedTile3D { tile: [32, 4, 1] }),
    ];
    for edges in [[Edge::Wall, Edge::Outflow], [Edge::Periodic, Edge::Wall]] {
        let m = model(edges);
        let q0 = initial(&m);
        let mut cpu = Solver::new(Host, m, &q0).unwrap();
        let mut dts = Vec::new();
        for _ in 0..STEPS {
            dts.push(cpu.cfl_step(None).unwrap());
        }
        let c = cpu.state().unwrap();
        for strategy in strategies {
            let mut dev = Solver::new(gpu.clone(), m, &q0).unwrap();
            dev.strategy = strategy;
            let mut same_dt = true;
            for dt in &dts {
                // The device's own CFL step (its state downloaded for the reduction).
                same_dt &= dev.cfl_step(None).unwrap().to_bits() == dt.to_bits();
            }
            let g = dev.state().unwrap();
            let results = [("h", compare(&c.h, &g.h)), ("hu", compare(&c.hu, &g.hu)), ("hv", compare(&c.hv, &g.hv))];
            let bits = results.iter().all(|(_, (_, b))| *b);
            let worst = results.iter().map(|(_, (r, _))| *r).fold(0.0, f64::max);
            eprintln!(
                "{edges:?} {strategy:?}: {STEPS} steps, max rel L2 difference {worst:.3e}, bit-equal: {bits}, \
                 same time steps: {same_dt}"
            );
            for (name, (rel, _)) in results {
                assert!(rel < 1e-10, "{edges:?} {strategy:?}: {name} differs from the CPU's (rel L2 {rel:.3e})");
            }
        }
    }
}
