//! Reducing stencils that the host and GPU reduction tests share (`tests/tests/reductions.rs`,
//! `tests/tests/gpu_reductions.rs`).

use stencil_runtime::prelude::*;

macro_rules! stats3d {
    ($name:ident, $t:ident) => {
        /// Sum of `u`, min of `u`, max of the backward difference along i.
        #[stencil]
        pub fn $name(idx: Idx3, u: &Field3<$t>, total: &mut Sum<$t>, lo: &mut Min<$t>, jump: &mut Max<$t>) {
            total.fold(u[idx]);
            lo.fold(u[idx]);
            jump.fold((u[idx] - u[idx.ix::<-1, 0, 0>()]).abs());
        }
    };
}
stats3d!(stats3d_f32, f32);
stats3d!(stats3d_f64, f64);

/// Writes a field and reduces: a conditional fold, an f32 field summed in f64.
#[stencil]
pub fn scale_and_norm(
    idx: Idx2,
    c: f32,
    u: &Field2<f32>,
    out: &mut Field2<f32>,
    sq: &mut Sum<f64>,
    pos: &mut Max<f32>,
) {
    let v = c * u[idx];
    out[idx] = v;
    sq.fold((v as f64) * (v as f64));
    if v > 0.0 {
        pos.fold(v);
    }
}
