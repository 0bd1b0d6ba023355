//! The Euler model's fused stage (HLLC, Koren) with every value written out: the primitive state
//! at the cell and its twelve neighbours, and the six faces of the cell, each solved here (the
//! model's stencil says the same with point functions). Same arguments and the same bits as the
//! model's `EulerFusedHllc`; `point_fn_bench` times both on the CPU, `fvm_bench` on the GPU.

use stencil_examples::euler::{
    conserved, face_hllc, hllc, limited_slope, normal_flux, primitive, reconstruct, swap_y, swap_z,
};
use stencil_runtime::prelude::*;

// Helpers `face_hllc` reaches must be in scope where a stencil calls it.
#[allow(unused_imports)]
use {conserved as _, hllc as _, limited_slope as _, normal_flux as _, reconstruct as _};

/// The fused stage with six face solves per cell (same arguments as the model's).
#[stencil]
#[rustfmt::skip]
pub fn euler_stage_written_out(
    idx: Idx3, gamma: f64, kappa: f64, beta: f64, a: f64, b: f64, dt: Held<f64>, hx: f64, hy: f64, hz: f64,
    g: f64, q: [&Field3<f64>; 5], qn: [&Field3<f64>; 5], out: [&mut Field3<f64>; 5],
) {
    let (cx, cy, cz, gdt) = (dt / hx, dt / hy, dt / hz, g * dt);
    let s = q[idx];
    let w = primitive(s, gamma);
    let xm2 = primitive(q[idx.ix::<-2, 0, 0>()], gamma);
    let xm1 = primitive(q[idx.ix::<-1, 0, 0>()], gamma);
    let xp1 = primitive(q[idx.ix::<1, 0, 0>()], gamma);
    let xp2 = primitive(q[idx.ix::<2, 0, 0>()], gamma);
    let ym2 = primitive(q[idx.ix::<0, -2, 0>()], gamma);
    let ym1 = primitive(q[idx.ix::<0, -1, 0>()], gamma);
    let yp1 = primitive(q[idx.ix::<0, 1, 0>()], gamma);
    let yp2 = primitive(q[idx.ix::<0, 2, 0>()], gamma);
    let zm2 = primitive(q[idx.ix::<0, 0, -2>()], gamma);
    let zm1 = primitive(q[idx.ix::<0, 0, -1>()], gamma);
    let zp1 = primitive(q[idx.ix::<0, 0, 1>()], gamma);
    let zp2 = primitive(q[idx.ix::<0, 0, 2>()], gamma);
    let fxm = face_hllc(xm2, xm1, w, xp1, kappa, beta, gamma);
    let fxp = face_hllc(xm1, w, xp1, xp2, kappa, beta, gamma);
    let fym = swap_y(face_hllc(swap_y(ym2), swap_y(ym1), swap_y(w), swap_y(yp1), kappa, beta, gamma));
    let fyp = swap_y(face_hllc(swap_y(ym1), swap_y(w), swap_y(yp1), swap_y(yp2), kappa, beta, gamma));
    let fzm = swap_z(face_hllc(swap_z(zm2), swap_z(zm1), swap_z(w), swap_z(zp1), kappa, beta, gamma));
    let fzp = swap_z(face_hllc(swap_z(zm1), swap_z(w), swap_z(zp1), swap_z(zp2), kappa, beta, gamma));
    let mut r = [0.0f64; 5];
    for v in 0..5 {
        r[v] = s[v] - (cx * (fxp[v] - fxm[v]) + cy * (fyp[v] - fym[v]) + cz * (fzp[v] - fzm[v]));
    }
    r[3] -= gdt * s[0];
    r[4] -= gdt * s[3];
    for v in 0..5 {
        out[v][idx] = if dt > 0.0 { a * qn[v][idx] + b * r[v] } else { qn[v][idx] };
    }
}
