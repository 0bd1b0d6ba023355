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

/// A leapfrog step updated in place: `u_prev` is read at its own point and overwritten (the
/// acoustic model's pattern), so the kernels must load it as an output field.
#[stencil]
pub fn leapfrog7(idx: Idx3, c: f32, u: &Field3<f32>, u_prev: &mut Field3<f32>) {
    let lap = u[idx.ix::<1, 0, 0>()]
        + u[idx.ix::<-1, 0, 0>()]
        + u[idx.ix::<0, 1, 0>()]
        + u[idx.ix::<0, -1, 0>()]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()]
        - 6.0 * u[idx];
    u_prev[idx] = 2.0 * u[idx] - u_prev[idx] + c * lap;
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

/// Minmod slope limiter.
#[stencil_fn]
pub fn minmod(a: f64, b: f64) -> f64 {
    if a * b <= 0.0 {
        0.0
    } else if a.abs() < b.abs() {
        a
    } else {
        b
    }
}

/// Pressure of a conserved Euler state `(rho, rho u, rho v, rho w, E)`.
#[stencil_fn]
pub fn pressure(q: [f64; 5], gamma: f64) -> f64 {
    let ke = 0.5 * (q[1] * q[1] + q[2] * q[2] + q[3] * q[3]) / q[0];
    (gamma - 1.0) * (q[4] - ke)
}

/// The x-flux of a state and its fastest signal speed `|u| + c`.
#[stencil_fn]
pub fn flux_x(q: [f64; 5], gamma: f64) -> ([f64; 5], f64) {
    let p = pressure(q, gamma);
    let u = q[1] / q[0];
    let c = (gamma * p / q[0]).sqrt();
    ([q[1], q[1] * u + p, q[2] * u, q[3] * u, (q[4] + p) * u], u.abs() + c)
}

/// MUSCL reconstruction with minmod of the two states at the face between `q0` and `q1`.
#[stencil_fn]
pub fn muscl(qm: [f64; 5], q0: [f64; 5], q1: [f64; 5], q2: [f64; 5]) -> ([f64; 5], [f64; 5]) {
    let mut ql = q0;
    let mut qr = q1;
    for v in 0..5 {
        ql[v] += 0.5 * minmod(q0[v] - qm[v], q1[v] - q0[v]);
        qr[v] -= 0.5 * minmod(q1[v] - q0[v], q2[v] - q1[v]);
    }
    (ql, qr)
}

/// The Rusanov (local Lax-Friedrichs) flux between two states.
#[stencil_fn]
pub fn rusanov(ql: [f64; 5], qr: [f64; 5], gamma: f64) -> [f64; 5] {
    let (fl, sl) = flux_x(ql, gamma);
    let (fr, sr) = flux_x(qr, gamma);
    let s = sl.max(sr);
    let mut f = [0.0; 5];
    for v in 0..5 {
        f[v] = 0.5 * (fl[v] + fr[v]) - 0.5 * s * (qr[v] - ql[v]);
    }
    f
}

/// Finite-volume Euler: the Rusanov flux through the face between cells i and i+1 of MUSCL
/// reconstructed states; 5 inputs, 5 outputs, arrays and nested `#[stencil_fn]` helpers.
#[stencil]
pub fn euler_flux_x(
    idx: Idx3,
    gamma: f64,
    rho: &Field3<f64>,
    mx: &Field3<f64>,
    my: &Field3<f64>,
    mz: &Field3<f64>,
    e: &Field3<f64>,
    f_rho: &mut Field3<f64>,
    f_mx: &mut Field3<f64>,
    f_my: &mut Field3<f64>,
    f_mz: &mut Field3<f64>,
    f_e: &mut Field3<f64>,
) {
    let qm = [
        rho[idx.ix::<-1, 0, 0>()],
        mx[idx.ix::<-1, 0, 0>()],
        my[idx.ix::<-1, 0, 0>()],
        mz[idx.ix::<-1, 0, 0>()],
        e[idx.ix::<-1, 0, 0>()],
    ];
    let q0 = [rho[idx], mx[idx], my[idx], mz[idx], e[idx]];
    let q1 = [
        rho[idx.ix::<1, 0, 0>()],
        mx[idx.ix::<1, 0, 0>()],
        my[idx.ix::<1, 0, 0>()],
        mz[idx.ix::<1, 0, 0>()],
        e[idx.ix::<1, 0, 0>()],
    ];
    let q2 = [
        rho[idx.ix::<2, 0, 0>()],
        mx[idx.ix::<2, 0, 0>()],
        my[idx.ix::<2, 0, 0>()],
        mz[idx.ix::<2, 0, 0>()],
        e[idx.ix::<2, 0, 0>()],
    ];
    let (ql, qr) = muscl(qm, q0, q1, q2);
    let f = rusanov(ql, qr, gamma);
    f_rho[idx] = f[0];
    f_mx[idx] = f[1];
    f_my[idx] = f[2];
    f_mz[idx] = f[3];
    f_e[idx] = f[4];
}

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
