//! The acoustic model on a GPU equals the host bit for bit: the same generic
//! [`run`](stencil_examples::acoustic::run) (inner region and the six PML slabs, the source, the
//! receivers) on `Gpu` and on `Host`, after enough steps for the wavefront to cross the PML, for
//! the default strategy of each stencil and for every strategy forced on all regions. Needs a
//! GPU: `--features cuda` (see `scripts/gpu-check`); without one it prints why and passes.
#![cfg(feature = "cuda")]

use stencil_examples::acoustic::{run, Model, RegionStrategies};
use stencil_examples::checkpoint::Plan;
use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Host, Strategy};

/// A small layered model (odd sizes, PML widths that are not multiples of any block) whose
/// wavefront reaches every slab within the run.
fn model() -> Model {
    let mut m = Model::layered(37, 160);
    m.n = [37, 29, 33];
    m.pml = 7;
    m.f0 = 18.0;
    m.source = [18, 14, 10];
    m.receiver_depth = 2;
    m
}

#[test]
fn gpu_equals_host_for_the_full_model_under_every_strategy() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("skipping: no GPU ({e})");
            return;
        }
    };
    let m = model();
    let cpu = run::<Host, f32>(&Host, &RegionStrategies::default(), &m, None, &Plan::none(), |_| {}).unwrap();
    let (n_pml, max) = (m.pml as isize, cpu.last.u.as_slice().iter().fold(0f32, |a, v| a.max(v.abs())));
    let corner = cpu.last.u.get([n_pml / 2, n_pml / 2, n_pml / 2]).unwrap();
    eprintln!("host: max |u| {max:.3e}, u at a PML corner {corner:.3e}");
    assert!(max > 0.0 && corner != 0.0, "the wavefront has not reached the PML corner: the test would miss slabs");
    let strategies = [
        None,
        Some(Strategy::PointPerThread { block: [8, 8, 8] }),
        Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 }),
        Some(Strategy::Stream25D { tile_x: 16, tile_y: 8 }),
        Some(Strategy::SharedTile3D { tile: [16, 4, 4] }),
    ];
    for strategy in strategies {
        let out = run::<Gpu, f32>(&gpu, &RegionStrategies::uniform(strategy), &m, None, &Plan::none(), |_| {}).unwrap();
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same(out.last.u.as_slice(), cpu.last.u.as_slice()), "{strategy:?}: wavefield differs from the host's");
        for (s, (g, c)) in out.traces.iter().zip(&cpu.traces).enumerate() {
            assert!(same(g, c), "{strategy:?}: receivers differ from the host's after step {}", s + 1);
        }
        eprintln!("{strategy:?}: bit-equal to the host ({} steps)", m.steps);
    }
}
