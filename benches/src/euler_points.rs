//! The fused Euler stage (HLLC, Koren) written with point functions: the primitive state of a
//! cell and the face fluxes are `let w = |p: Idx3| ...;` closures evaluated at the neighbours.
//! Same arguments and the same bits as the model's `EulerFusedHllc`; `point_fn_bench` times it on
//! the CPU, `fvm_bench` on the GPU.

use stencil_examples::euler::{
    conserved, face_hllc, hllc, limited_slope, normal_flux, primitive, reconstruct, swap_y, swap_z,
};
use stencil_runtime::prelude::*;

// Helpers `face_hllc` reaches must be in scope where a stencil calls it.
#[allow(unused_imports)]
use {conserved as _, hllc as _, limited_slope as _, normal_flux as _, reconstruct as _};

/// The fused stage with the face fluxes as point functions (same arguments as the model's).
#[stencil]
#[rustfmt::skip]
pub fn euler_stage_points(
    idx: Idx3, gamma: f64, kappa: f64, beta: f64, a: f64, b: f64, cx: f64, cy: f64, cz: f64, gdt: f64,
    q: [&Field3<f64>; 5], qn: [&Field3<f64>; 5], out: [&mut Field3<f64>; 5],
) {
    // The primitive state of a cell, then the face fluxes from four of them (a value of `w` is
    // computed once for every face that needs it where the functions are inlined).
    let w = |p: Idx3| primitive(q[p], gamma);
    let fx = |p: Idx3| face_hllc(
        w(p.ix::<-1, 0, 0>()), w(p), w(p.ix::<1, 0, 0>()), w(p.ix::<2, 0, 0>()), kappa, beta, gamma);
    let fy = |p: Idx3| swap_y(face_hllc(
        swap_y(w(p.ix::<0, -1, 0>())), swap_y(w(p)), swap_y(w(p.ix::<0, 1, 0>())), swap_y(w(p.ix::<0, 2, 0>())),
        kappa, beta, gamma));
    let fz = |p: Idx3| swap_z(face_hllc(
        swap_z(w(p.ix::<0, 0, -1>())), swap_z(w(p)), swap_z(w(p.ix::<0, 0, 1>())), swap_z(w(p.ix::<0, 0, 2>())),
        kappa, beta, gamma));
    let s = q[idx];
    let (fxp, fxm) = (fx(idx), fx(idx.ix::<-1, 0, 0>()));
    let (fyp, fym) = (fy(idx), fy(idx.ix::<0, -1, 0>()));
    let (fzp, fzm) = (fz(idx), fz(idx.ix::<0, 0, -1>()));
    let mut r = [0.0f64; 5];
    for v in 0..5 {
        r[v] = s[v] - (cx * (fxp[v] - fxm[v]) + cy * (fyp[v] - fym[v]) + cz * (fzp[v] - fzm[v]));
    }
    r[3] -= gdt * s[0];
    r[4] -= gdt * s[3];
    for v in 0..5 {
        out[v][idx] = a * qn[v][idx] + b * r[v];
    }
}
