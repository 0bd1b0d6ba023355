//! What the GPU suite and the kernel snapshot/compile tests share: the canonical stencils
//! (re-exported from `stencil_tests::canonical`), random inputs and the strategies to run.
#![allow(dead_code, unused_imports)]

use stencil_runtime::prelude::*;
use stencil_runtime::{Element, Field, Strategy};
pub use stencil_tests::canonical::*;

/// Random conserved Euler fields (density 1-2, momenta within ±0.5, energy 2.5-3.5: positive
/// pressure) from `next`, a uniform generator in `[0, 1)`.
pub fn euler_state<const D: usize>(shape: Shape<D>, mut next: impl FnMut() -> f64) -> [Field<f64, D>; 5] {
    let ranges = [(1.0, 2.0), (-0.5, 0.5), (-0.5, 0.5), (-0.5, 0.5), (2.5, 3.5)];
    ranges.map(|(lo, hi)| Field::from_fn(shape, |_| lo + (hi - lo) * next()))
}

/// The strategies every GPU test runs: each kind, with tiles that divide the sizes and tiles
/// that do not.
pub fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::PointPerThread { block: [32, 4, 2] },
        Strategy::PointPerThread { block: [128, 1, 1] },
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 16, block_y: 3, points_per_thread: 5 },
        // One point per thread, with lookahead (256 threads): no guarded lookahead load runs.
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 1 },
        Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        Strategy::Stream25D { tile_x: 16, tile_y: 5 },
        Strategy::SharedTile3D { tile: [32, 4, 4] },
        Strategy::SharedTile3D { tile: [8, 8, 3] },
        Strategy::Depot { block_x: 32, block_y: 4, planes: 8 },
        Strategy::Depot { block_x: 16, block_y: 3, planes: 5 },
    ]
}

/// SplitMix64: deterministic random numbers without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

pub fn random<T: Element, const D: usize>(shape: Shape<D>, rng: &mut Rng, cast: impl Fn(f64) -> T) -> Field<T, D> {
    Field::from_fn(shape, |_| cast(rng.next()))
}

/// A writer into a shared buffer: what a `tracing` subscriber wrote, for a test to read.
#[derive(Clone, Default)]
pub struct Captured(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
