//! Column sweeps that the host tests (`tests/tests/sweeps.rs`) and the GPU tests
//! (`tests/tests/gpu_sweeps.rs`) share: the Thomas algorithm (reading the level below back, and
//! carrying it), running sums up and down, and a 2D sweep with the level count.

use stencil_runtime::prelude::*;

/// Forward elimination of the Thomas algorithm for `a x[k-1] + b x[k] + c x[k+1] = d` in every
/// column: `cp`, `dp` at a level from those of the level below.
#[stencil(sweep = forward)]
pub fn thomas_forward(
    idx: Idx3,
    a: &Field3<f64>,
    b: &Field3<f64>,
    c: &Field3<f64>,
    d: &Field3<f64>,
    cp: &mut Field3<f64>,
    dp: &mut Field3<f64>,
) {
    if idx.level() == 0 {
        cp[idx] = c[idx] / b[idx];
        dp[idx] = d[idx] / b[idx];
    } else {
        let m = b[idx] - a[idx] * cp[idx.ix(0, 0, -1)];
        cp[idx] = c[idx] / m;
        dp[idx] = (d[idx] - a[idx] * dp[idx.ix(0, 0, -1)]) / m;
    }
}

/// The same elimination with the level below's `cp`, `dp` carried in locals instead of read
/// back from the fields.
#[stencil(sweep = forward)]
pub fn thomas_forward_carried(
    idx: Idx3,
    a: &Field3<f64>,
    b: &Field3<f64>,
    c: &Field3<f64>,
    d: &Field3<f64>,
    cp: &mut Field3<f64>,
    dp: &mut Field3<f64>,
) {
    #[carry]
    let mut cp_below = 0.0;
    #[carry]
    let mut dp_below = 0.0;
    let m = b[idx] - a[idx] * cp_below;
    cp_below = c[idx] / m;
    dp_below = (d[idx] - a[idx] * dp_below) / m;
    cp[idx] = cp_below;
    dp[idx] = dp_below;
}

/// Back substitution: `x[k] = dp[k] - cp[k] x[k+1]`, from the top level down.
#[stencil(sweep = backward)]
pub fn thomas_backward(idx: Idx3, cp: &Field3<f64>, dp: &Field3<f64>, x: &mut Field3<f64>) {
    if idx.level() == 0 {
        x[idx] = dp[idx];
    } else {
        x[idx] = dp[idx] - cp[idx] * x[idx.ix(0, 0, 1)];
    }
}

/// Back substitution with the level above's solution carried (the README's form).
#[stencil(sweep = backward)]
pub fn substitute(idx: Idx3, cp: &Field3<f64>, dp: &Field3<f64>, x: &mut Field3<f64>) {
    #[carry]
    let mut above = 0.0;
    above = dp[idx] - cp[idx] * above;
    x[idx] = above;
}

/// Running sums up each column (carried), and down each column (read back at the level above).
#[stencil(sweep = forward)]
pub fn running_up(idx: Idx3, q: &Field3<f32>, total: &mut Field3<f32>) {
    #[carry]
    let mut acc = 0.0;
    acc += q[idx];
    total[idx] = acc;
}

#[stencil(sweep = backward)]
pub fn running_down(idx: Idx3, q: &Field3<f32>, total: &mut Field3<f32>) {
    if idx.level() == 0 {
        total[idx] = q[idx];
    } else {
        total[idx] = total[idx.ix(0, 0, 1)] + q[idx];
    }
}

/// A 2D sweep along j, with the level count and a carried integer.
#[stencil(sweep = forward)]
pub fn levels_left(idx: Idx2, q: &Field2<f64>, out: &mut Field2<f64>, seen: &mut Field2<i32>) {
    #[carry]
    let mut count: i32 = 0;
    count += 1;
    seen[idx] = count;
    out[idx] = (idx.levels() - 1 - idx.level()) as f64 + q[idx];
}
