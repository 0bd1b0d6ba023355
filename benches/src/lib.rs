//! The stencils the benchmarks time (the 7-point diffusion and 25-point acoustic update)
//! and small timing helpers.

use stencil_runtime::prelude::*;

/// 7-point diffusion (ASUCA's `Diffusion3d`): 8 bytes per point in f32.
#[stencil]
#[allow(clippy::too_many_arguments)]
pub fn diffusion7(
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

/// The 8th-order (radius 4, 25-point star) acoustic update
/// `u_next = 2u - u_prev + c * v2 * lap(u)`: reads u, u_prev, v2, writes u_next (16 B/point).
#[stencil]
pub fn acoustic25(
    idx: Idx3,
    c: f32,
    u: &Field3<f32>,
    u_prev: &Field3<f32>,
    v2: &Field3<f32>,
    u_next: &mut Field3<f32>,
) {
    let lap = -8.541_667 * u[idx]
        + 1.6
            * (u[idx.ix::<1, 0, 0>()]
                + u[idx.ix::<-1, 0, 0>()]
                + u[idx.ix::<0, 1, 0>()]
                + u[idx.ix::<0, -1, 0>()]
                + u[idx.ix::<0, 0, 1>()]
                + u[idx.ix::<0, 0, -1>()])
        - 0.2
            * (u[idx.ix::<2, 0, 0>()]
                + u[idx.ix::<-2, 0, 0>()]
                + u[idx.ix::<0, 2, 0>()]
                + u[idx.ix::<0, -2, 0>()]
                + u[idx.ix::<0, 0, 2>()]
                + u[idx.ix::<0, 0, -2>()])
        + 0.025_396_825
            * (u[idx.ix::<3, 0, 0>()]
                + u[idx.ix::<-3, 0, 0>()]
                + u[idx.ix::<0, 3, 0>()]
                + u[idx.ix::<0, -3, 0>()]
                + u[idx.ix::<0, 0, 3>()]
                + u[idx.ix::<0, 0, -3>()])
        - 0.001_785_714_3
            * (u[idx.ix::<4, 0, 0>()]
                + u[idx.ix::<-4, 0, 0>()]
                + u[idx.ix::<0, 4, 0>()]
                + u[idx.ix::<0, -4, 0>()]
                + u[idx.ix::<0, 0, 4>()]
                + u[idx.ix::<0, 0, -4>()]);
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
}

/// The median of a sample.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}
