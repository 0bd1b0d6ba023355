//! Stencils and helpers shared by the GPU suite and the kernel snapshot/compile tests.
#![allow(dead_code)]

use stencil_runtime::prelude::*;
use stencil_runtime::{Element, Field, Strategy};

#[stencil]
pub fn diffusion(
    idx: Idx3,
    ce: f32,
    cw: f32,
    cn: f32,
    cs: f32,
    ct: f32,
    cb: f32,
    cc: f32,
    f: &Field3<f32>,
    f_new: &mut Field3<f32>,
) {
    f_new[idx] = cc * f[idx]
        + ce * f[idx.ix::<1, 0, 0>()]
        + cw * f[idx.ix::<-1, 0, 0>()]
        + cn * f[idx.ix::<0, 1, 0>()]
        + cs * f[idx.ix::<0, -1, 0>()]
        + ct * f[idx.ix::<0, 0, 1>()]
        + cb * f[idx.ix::<0, 0, -1>()];
}

#[stencil]
pub fn star25(idx: Idx3, c: f32, u: &Field3<f32>, u_prev: &Field3<f32>, v2: &Field3<f32>, u_next: &mut Field3<f32>) {
    let c0 = -205.0 / 72.0;
    let c1 = 8.0 / 5.0;
    let c2 = -1.0 / 5.0;
    let c3 = 8.0 / 315.0;
    let c4 = -1.0 / 560.0;
    let lap = 3.0 * c0 * u[idx]
        + c1 * (u[idx.ix::<1, 0, 0>()]
            + u[idx.ix::<-1, 0, 0>()]
            + u[idx.ix::<0, 1, 0>()]
            + u[idx.ix::<0, -1, 0>()]
            + u[idx.ix::<0, 0, 1>()]
            + u[idx.ix::<0, 0, -1>()])
        + c2 * (u[idx.ix::<2, 0, 0>()]
            + u[idx.ix::<-2, 0, 0>()]
            + u[idx.ix::<0, 2, 0>()]
            + u[idx.ix::<0, -2, 0>()]
            + u[idx.ix::<0, 0, 2>()]
            + u[idx.ix::<0, 0, -2>()])
        + c3 * (u[idx.ix::<3, 0, 0>()]
            + u[idx.ix::<-3, 0, 0>()]
            + u[idx.ix::<0, 3, 0>()]
            + u[idx.ix::<0, -3, 0>()]
            + u[idx.ix::<0, 0, 3>()]
            + u[idx.ix::<0, 0, -3>()])
        + c4 * (u[idx.ix::<4, 0, 0>()]
            + u[idx.ix::<-4, 0, 0>()]
            + u[idx.ix::<0, 4, 0>()]
            + u[idx.ix::<0, -4, 0>()]
            + u[idx.ix::<0, 0, 4>()]
            + u[idx.ix::<0, 0, -4>()]);
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
}

/// Two outputs, if/else as statement and expression, sqrt, max, a mutable local, a box corner.
#[stencil]
pub fn branchy(
    idx: Idx3,
    limit: f32,
    flip: bool,
    a: &Field3<f32>,
    b: &Field3<f32>,
    lo: &mut Field3<f32>,
    hi: &mut Field3<f32>,
) {
    let g = a[idx.ix::<1, 1, 0>()] - a[idx.ix::<-1, 0, -1>()];
    let mut s = (g * g + b[idx] * b[idx]).sqrt();
    if s > limit {
        s = limit;
    } else if flip {
        s = -s;
    }
    let w = if b[idx.ix::<0, 0, 1>()] > 0.0 { b[idx.ix::<0, 0, 1>()] } else { a[idx].max(0.5) };
    lo[idx] = s - w;
    if a[idx] > 0.0 {
        hi[idx] = s + w;
    } else {
        hi[idx] = w / (1.0 + s);
    }
}

#[stencil]
pub fn diffusion_f64(idx: Idx3, k: f64, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx]
        + k * (f[idx.ix::<1, 0, 0>()]
            + f[idx.ix::<-1, 0, 0>()]
            + f[idx.ix::<0, 1, 0>()]
            + f[idx.ix::<0, -1, 0>()]
            + f[idx.ix::<0, 0, 2>()]
            + f[idx.ix::<0, 0, -2>()]
            - 6.0 * f[idx]);
}

#[stencil]
pub fn jacobi2d(idx: Idx2, w: f32, u: &Field2<f32>, rhs: &Field2<f32>, out: &mut Field2<f32>) {
    out[idx] = (1.0 - w) * u[idx]
        + w * 0.25
            * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()] - rhs[idx]);
}

/// The strategies every GPU test runs: each kind, with tiles that divide the sizes and tiles
/// that do not.
pub fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::PointPerThread { block: [32, 4, 2] },
        Strategy::PointPerThread { block: [128, 1, 1] },
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 16, block_y: 3, points_per_thread: 5 },
        Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        Strategy::Stream25D { tile_x: 16, tile_y: 5 },
        Strategy::SharedTile3D { tile: [32, 4, 4] },
        Strategy::SharedTile3D { tile: [8, 8, 3] },
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
