//! The 3D compressible Euler equations by a cell-centred finite-volume method (seed paper 000,
//! sections 3.2 and 4; seed paper 004, section II):
//!
//! ```text
//! ∂q/∂t + ∂F(q)/∂x + ∂G(q)/∂y + ∂H(q)/∂z = S(q),   q = (ρ, ρu, ρv, ρw, E)
//! F = (ρu, ρu² + p, ρuv, ρuw, u(E + p))   (G, H likewise along y, z)
//! p = (γ − 1)(E − ρ|u|²/2),  γ = 1.4,     S = (0, 0, 0, −ρg, −ρwg)   (optional gravity along −z)
//! ```
//!
//! **Semi-discrete form.** `dq_i/dt = L(q)_i = −Σ_axes (F_{i+1/2} − F_{i−1/2}) / h + S(q_i)`, the
//! face fluxes from an approximate Riemann solver between the two states reconstructed at the face.
//!
//! **Reconstruction** (seed 000, Eq. 5: the κ-scheme; seed 004: the Koren limiter). Piecewise
//! linear in the primitive variables `w = (ρ, u, v, w, p)`, at the face `i+1/2`:
//!
//! ```text
//! w⁻ = w_i     + ½ ψ(w_i − w_{i−1},   w_{i+1} − w_i)       (left state, from cell i)
//! w⁺ = w_{i+1} − ½ ψ(w_{i+2} − w_{i+1}, w_{i+1} − w_i)     (right state, from cell i+1)
//! ψ(a, f) = 0 if a f ≤ 0, else sign(f) · min(β|a|, ((1−κ)|a| + (1+κ)|f|)/2, β|f|)
//! ```
//!
//! `a` is the difference away from the face and `f` the one across it. Unlimited (`β = ∞`) this
//! is Eq. 5 of seed 000 (whose `Q̂⁺` prints `+(1−κ)/4 Q_{i+2}`; the coefficients must sum to one,
//! so it is `−(1−κ)/4`). `κ = 1/3, β = 2` is Koren's limiter (third order where smooth);
//! `β = 1` is minmod for any `κ` in [−1, 1]. Both are plain scalars of the stencils, so the
//! limiter is chosen at run time without a branch.
//!
//! **Riemann solvers**, in a frame where the face normal is the first velocity component (the y
//! and z faces swap components 1↔2, 1↔3 before and after): HLLC (Toro, Davis wave speeds
//! `S_L = min(u_L − c_L, u_R − c_R)`, `S_R = max(u_L + c_L, u_R + c_R)`) and Rusanov (local
//! Lax-Friedrichs). Each is a `#[stencil_fn]` helper, and each gets its own stencils (chosen by
//! [`Riemann`]) so a kernel carries only one of them.
//!
//! **Time.** SSP-RK3 (Shu-Osher) as three stages of one form,
//! `q_out = a q_n + b (q + Δt L(q))` with `(a, b) = (0, 1), (3/4, 1/4), (1/3, 2/3)`; `Δt` from the
//! CFL condition `Δt = C / max_cells Σ_axes (|u_axis| + c) / h_axis`: the rate of every cell
//! folded into a maximum by the reducing stencil [`EulerRate`] where the state lives (on a GPU
//! one pass over the state and one number read back; nothing else leaves the device).
//!
//! **Where it runs.** Everything below [`Euler::run`] is written once against
//! [`stencil_runtime::Executor`]: the fields of a [`State`] are the executor's, and the same
//! calls run on the host ([`Host`]) or a GPU, where [`Euler::strategy`] picks the kernels.
//!
//! **Two ways to run a stage** ([`Scheme`]):
//! - *fused*: one stencil per cell reconstructs the six faces, solves the Riemann problems and
//!   applies the RK combination. It reads `q` (radius 2 along each axis) and `q_n` and writes
//!   `q_out`: 15 fields of traffic. Its primitive state and face fluxes are point functions
//!   (`let fx = |p: Idx3| ...;`, see the guide's chapter on writing stencils), so the CPU nest and the GPU's default (depot)
//!   kernel solve each face about once; a GPU strategy that inlines them solves every face twice
//!   (once by each neighbour).
//! - *split*: a face-flux stencil per axis writes the flux at `i+1/2` into 5 fields (one extra
//!   layer at the low end of its axis), then an update stencil reads the 15 flux fields (at `i` and
//!   `i−1`), `q` and `q_n`. Every face is solved once, at the price of 30 more fields of traffic
//!   per cell. Seed 000's face-value reuse (section 4.1, keep `qR` of cell `i` as `qL` of `i+1`
//!   in registers) gets the split variant's arithmetic with the fused variant's traffic: that is
//!   what the fused stencil's point functions give (HLLC on an H100, 256³: 5.4 Gcell/s for the
//!   fused stage under the depot kernel, 4.5 for the split stage, 2.9 for the fused stage inlined).
//!   Fused and split compute every face with the same operations, so they agree bit for bit.
//!
//! **Boundaries**, per axis ([`Boundary`]): before every stage the halos (2 cells) of the stage's
//! input, all five fields along every axis, are filled by one executor call: periodic,
//! reflective (mirror; the normal momentum mirrored with its sign flipped) or outflow (zero
//! gradient).
//!
//! **Subdomains**: [`Euler::run`] on the distributed executor
//! ([`Distributed`](stencil_runtime::Distributed), over [`Euler::decompose`]): the halos the
//! stencils read move when they read them (periodic axes wrap when the stage's halo fill asks),
//! the CFL step is a reduction over every subdomain. Every cell is updated by the same operations
//! on the same values as on one domain, so the result is the same bit for bit.

use stencil_runtime::domain::ReachError;
use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Executor, HaloFill, HaloWidths, LaunchError, Loop, Stencil, Strategy};

use crate::checkpoint::{self, Plan};
use crate::driver::{self, Identity, Stepping};

/// Ratio of specific heats of the ideal gas.
pub const GAMMA: f64 = 1.4;

/// Halo width of every field: the reconstruction reaches two cells to each side.
pub const HALO: usize = 2;

/// The error type of the drivers: launch, halo and CUDA errors.
pub type Error = Box<dyn std::error::Error>;

/// Primitive variables `(ρ, u, v, w, p)` of a conserved state `(ρ, ρu, ρv, ρw, E)`.
#[stencil_fn]
pub fn primitive(q: [f64; 5], gamma: f64) -> [f64; 5] {
    let u = q[1] / q[0];
    let v = q[2] / q[0];
    let w = q[3] / q[0];
    let p = (gamma - 1.0) * (q[4] - 0.5 * q[0] * (u * u + v * v + w * w));
    [q[0], u, v, w, p]
}

/// Conserved variables of a primitive state.
#[stencil_fn]
pub fn conserved(w: [f64; 5], gamma: f64) -> [f64; 5] {
    let e = w[4] / (gamma - 1.0) + 0.5 * w[0] * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]);
    [w[0], w[0] * w[1], w[0] * w[2], w[0] * w[3], e]
}

/// The flux through a face whose normal is the first velocity component, of a primitive state.
#[stencil_fn]
pub fn normal_flux(w: [f64; 5], gamma: f64) -> [f64; 5] {
    let e = w[4] / (gamma - 1.0) + 0.5 * w[0] * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]);
    let m = w[0] * w[1];
    [m, m * w[1] + w[4], m * w[2], m * w[3], w[1] * (e + w[4])]
}

/// The limited slope `ψ(a, f)` of the module docs: `a` the difference away from the face, `f`
/// the one across it; `κ = 1/3, β = 2` is Koren, `β = 1` minmod.
#[stencil_fn]
pub fn limited_slope(a: f64, f: f64, kappa: f64, beta: f64) -> f64 {
    let aa = a.abs();
    let af = f.abs();
    let m = (beta * aa).min(0.5 * ((1.0 - kappa) * aa + (1.0 + kappa) * af)).min(beta * af);
    if a * f <= 0.0 {
        0.0
    } else if f > 0.0 {
        m
    } else {
        -m
    }
}

/// The left and right primitive states at the face between `w0` and `w1` (`wm` before `w0`,
/// `w2` after `w1`).
#[stencil_fn]
pub fn reconstruct(
    wm: [f64; 5],
    w0: [f64; 5],
    w1: [f64; 5],
    w2: [f64; 5],
    kappa: f64,
    beta: f64,
) -> ([f64; 5], [f64; 5]) {
    let mut left = w0;
    let mut right = w1;
    for v in 0..5 {
        let across = w1[v] - w0[v];
        left[v] += 0.5 * limited_slope(w0[v] - wm[v], across, kappa, beta);
        right[v] -= 0.5 * limited_slope(w2[v] - w1[v], across, kappa, beta);
    }
    (left, right)
}

/// The HLLC flux between primitive states (normal velocity first), Davis wave speeds.
#[stencil_fn]
pub fn hllc(wl: [f64; 5], wr: [f64; 5], gamma: f64) -> [f64; 5] {
    let cl = (gamma * wl[4] / wl[0]).sqrt();
    let cr = (gamma * wr[4] / wr[0]).sqrt();
    let sl = (wl[1] - cl).min(wr[1] - cr);
    let sr = (wl[1] + cl).max(wr[1] + cr);
    let ml = wl[0] * (sl - wl[1]);
    let mr = wr[0] * (sr - wr[1]);
    let sm = (wr[4] - wl[4] + ml * wl[1] - mr * wr[1]) / (ml - mr);
    let ql = conserved(wl, gamma);
    let qr = conserved(wr, gamma);
    let fl = normal_flux(wl, gamma);
    let fr = normal_flux(wr, gamma);
    let dl = ml / (sl - sm);
    let dr = mr / (sr - sm);
    let el = dl * (ql[4] / wl[0] + (sm - wl[1]) * (sm + wl[4] / ml));
    let er = dr * (qr[4] / wr[0] + (sm - wr[1]) * (sm + wr[4] / mr));
    let sql = [dl, dl * sm, dl * wl[2], dl * wl[3], el];
    let sqr = [dr, dr * sm, dr * wr[2], dr * wr[3], er];
    let mut f = [0.0f64; 5];
    for v in 0..5 {
        f[v] = if sl >= 0.0 {
            fl[v]
        } else if sm >= 0.0 {
            fl[v] + sl * (sql[v] - ql[v])
        } else if sr > 0.0 {
            fr[v] + sr * (sqr[v] - qr[v])
        } else {
            fr[v]
        };
    }
    f
}

/// The Rusanov (local Lax-Friedrichs) flux between primitive states (normal velocity first).
#[stencil_fn]
pub fn rusanov(wl: [f64; 5], wr: [f64; 5], gamma: f64) -> [f64; 5] {
    let cl = (gamma * wl[4] / wl[0]).sqrt();
    let cr = (gamma * wr[4] / wr[0]).sqrt();
    let s = (wl[1].abs() + cl).max(wr[1].abs() + cr);
    let ql = conserved(wl, gamma);
    let qr = conserved(wr, gamma);
    let fl = normal_flux(wl, gamma);
    let fr = normal_flux(wr, gamma);
    let mut f = [0.0f64; 5];
    for v in 0..5 {
        f[v] = 0.5 * (fl[v] + fr[v]) - 0.5 * s * (qr[v] - ql[v]);
    }
    f
}

/// Reconstruction and the HLLC flux at the face between `w0` and `w1` (normal velocity first).
#[stencil_fn]
pub fn face_hllc(
    wm: [f64; 5],
    w0: [f64; 5],
    w1: [f64; 5],
    w2: [f64; 5],
    kappa: f64,
    beta: f64,
    gamma: f64,
) -> [f64; 5] {
    let (left, right) = reconstruct(wm, w0, w1, w2, kappa, beta);
    hllc(left, right, gamma)
}

/// Reconstruction and the Rusanov flux at the face between `w0` and `w1` (normal velocity first).
#[stencil_fn]
pub fn face_rusanov(
    wm: [f64; 5],
    w0: [f64; 5],
    w1: [f64; 5],
    w2: [f64; 5],
    kappa: f64,
    beta: f64,
    gamma: f64,
) -> [f64; 5] {
    let (left, right) = reconstruct(wm, w0, w1, w2, kappa, beta);
    rusanov(left, right, gamma)
}

/// The identity: an x face is already in its own frame (the x twin of [`swap_y`], [`swap_z`]).
#[stencil_fn]
pub fn swap_x(w: [f64; 5]) -> [f64; 5] {
    w
}

/// Swaps components 1 and 2 (x and y velocity or momentum): into and out of a y-face's frame.
#[stencil_fn]
pub fn swap_y(w: [f64; 5]) -> [f64; 5] {
    [w[0], w[2], w[1], w[3], w[4]]
}

/// Swaps components 1 and 3 (x and z velocity or momentum): into and out of a z-face's frame.
#[stencil_fn]
pub fn swap_z(w: [f64; 5]) -> [f64; 5] {
    [w[0], w[3], w[2], w[1], w[4]]
}

/// One face-flux stencil of the split variant along an axis: the cells at offsets `$m1`, 0,
/// `$p1`, `$p2` along it, rotated by `$swap` so that the axis's velocity is the x one, solved by
/// `$face`, and rotated back.
macro_rules! face_flux_stencil {
    ($name:ident, $face:ident, $swap:ident, $doc:literal, [$($m1:tt)*], [$($p1:tt)*], [$($p2:tt)*]) => {
        #[doc = concat!("The split variant's ", $doc, ".")]
        #[stencil]
        pub fn $name(idx: Idx3, gamma: f64, kappa: f64, beta: f64, q: [&Field3<f64>; 5], f: [&mut Field3<f64>; 5]) {
            let w = primitive(q[idx], gamma);
            let m1 = primitive(q[idx.ix::<$($m1)*>()], gamma);
            let p1 = primitive(q[idx.ix::<$($p1)*>()], gamma);
            let p2 = primitive(q[idx.ix::<$($p2)*>()], gamma);
            let flux = $swap($face($swap(m1), $swap(w), $swap(p1), $swap(p2), kappa, beta, gamma));
            f[idx] = flux;
        }
    };
}

/// Declares, for one Riemann solver (`$face`: its face helper), the fused stage stencil and the
/// three face-flux stencils of the split variant.
macro_rules! euler_stencils {
    ($face:ident, $fused:ident, $flux_x:ident, $flux_y:ident, $flux_z:ident) => {
/// The fused SSP-RK3 stage: `out = a q_n + b (q + Δt L(q))` with the six faces of the
        /// cell reconstructed and solved here, as point functions (`cx = Δt/h_x` etc., `gdt = g Δt`).
        #[stencil]
        #[rustfmt::skip]
        pub fn $fused(
            idx: Idx3, gamma: f64, kappa: f64, beta: f64, a: f64, b: f64, cx: f64, cy: f64, cz: f64, gdt: f64,
            q: [&Field3<f64>; 5], qn: [&Field3<f64>; 5], out: [&mut Field3<f64>; 5],
        ) {
            // The primitive state of a cell and the flux through its upper face along each
            // axis, as point functions: each face is solved once per face where a printer keeps
            // the values (the CPU nest, the GPU's depot kernel), twice where it inlines them.
            let w = |p: Idx3| primitive(q[p], gamma);
            let fx = |p: Idx3| $face(
                w(p.ix::<-1, 0, 0>()), w(p), w(p.ix::<1, 0, 0>()), w(p.ix::<2, 0, 0>()), kappa, beta, gamma);
            let fy = |p: Idx3| swap_y($face(
                swap_y(w(p.ix::<0, -1, 0>())), swap_y(w(p)), swap_y(w(p.ix::<0, 1, 0>())), swap_y(w(p.ix::<0, 2, 0>())),
                kappa, beta, gamma));
            let fz = |p: Idx3| swap_z($face(
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

        face_flux_stencil!(
            $flux_x,
            $face,
            swap_x,
            "x faces: the flux through the face `i+1/2` of cell `i`",
            [-1, 0, 0],
            [1, 0, 0],
            [2, 0, 0]
        );
        face_flux_stencil!(
            $flux_y,
            $face,
            swap_y,
            "y faces: the flux through the face `j+1/2` of cell `j`",
            [0, -1, 0],
            [0, 1, 0],
            [0, 2, 0]
        );
        face_flux_stencil!(
            $flux_z,
            $face,
            swap_z,
            "z faces: the flux through the face `k+1/2` of cell `k`",
            [0, 0, -1],
            [0, 0, 1],
            [0, 0, 2]
        );
    };
}

euler_stencils!(face_hllc, euler_fused_hllc, euler_flux_x_hllc, euler_flux_y_hllc, euler_flux_z_hllc);
euler_stencils!(face_rusanov, euler_fused_rusanov, euler_flux_x_rusanov, euler_flux_y_rusanov, euler_flux_z_rusanov);

/// The split variant's update: `out = a q_n + b (q + Δt L(q))` from the face fluxes (`fx` at
/// `i` is the face `i+1/2`), the same operations in the same order as the fused stage.
#[stencil]
#[rustfmt::skip]
pub fn euler_update(
    idx: Idx3, a: f64, b: f64, cx: f64, cy: f64, cz: f64, gdt: f64, q: [&Field3<f64>; 5], qn: [&Field3<f64>; 5],
    fx: [&Field3<f64>; 5], fy: [&Field3<f64>; 5], fz: [&Field3<f64>; 5], out: [&mut Field3<f64>; 5],
) {
    let s = q[idx];
    let fxp = fx[idx];
    let fxm = fx[idx.ix::<-1, 0, 0>()];
    let fyp = fy[idx];
    let fym = fy[idx.ix::<0, -1, 0>()];
    let fzp = fz[idx];
    let fzm = fz[idx.ix::<0, 0, -1>()];
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

/// The largest CFL rate of the cells, `max Σ_axes (|u_axis| + c) / h_axis` (NaN once a rate is
/// NaN): the time step is the Courant number over it.
#[stencil]
pub fn euler_rate(idx: Idx3, gamma: f64, hx: f64, hy: f64, hz: f64, q: [&Field3<f64>; 5], rate: &mut Max<f64>) {
    let w = primitive(q[idx], gamma);
    let c = (gamma * w[4] / w[0]).sqrt();
    rate.fold((w[1].abs() + c) / hx + (w[2].abs() + c) / hy + (w[3].abs() + c) / hz);
}

/// The approximate Riemann solver of the face fluxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Riemann {
    /// HLLC (restores the contact wave; the default).
    Hllc,
    /// Rusanov / local Lax-Friedrichs (more diffusive, simplest).
    Rusanov,
}

/// How a Runge-Kutta stage is launched (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheme {
    /// One stencil per stage: six faces per cell, each face solved twice.
    Fused,
    /// A face-flux stencil per axis (each face solved once) into 15 flux fields, then an update.
    Split,
}

/// The slope limiter of the reconstruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Limiter {
    /// Koren: the κ = 1/3 scheme limited by β = 2 (third order where smooth).
    Koren,
    /// Minmod (β = 1).
    Minmod,
}

impl Limiter {
    /// `(κ, β)` of the limited slope `ψ` (module docs).
    pub fn kappa_beta(self) -> (f64, f64) {
        match self {
            Limiter::Koren => (1.0 / 3.0, 2.0),
            Limiter::Minmod => (0.0, 1.0),
        }
    }
}

/// The boundary condition at both ends of an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Periodic.
    Periodic,
    /// A reflecting wall: mirrored state, normal momentum with its sign flipped.
    Reflective,
    /// Outflow: zero gradient.
    Outflow,
}

impl Boundary {
    /// The halo fill of conserved variable `v` (0..5) at the ends of `axis`.
    pub fn fill(self, axis: usize, v: usize) -> HaloFill {
        match self {
            Boundary::Periodic => HaloFill::Periodic,
            Boundary::Outflow => HaloFill::ZeroGradient,
            Boundary::Reflective if v == axis + 1 => HaloFill::MirrorNegated,
            Boundary::Reflective => HaloFill::Mirror,
        }
    }
}

/// The five conserved fields `(ρ, ρu, ρv, ρw, E)`: host fields (`Field3<f64>`) or an executor's
/// (`E::Field<f64, 3>`).
pub type Conserved<F> = [F; 5];

/// The SSP-RK3 weights `(a, b)` of the three stages: `q_out = a q_n + b (q + Δt L(q))`.
pub const RK3: [(f64, f64); 3] = [(0.0, 1.0), (0.75, 0.25), (1.0 / 3.0, 2.0 / 3.0)];

/// A run's settings: grid, physics and numerics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Euler {
    /// Cells per axis.
    pub n: [usize; 3],
    /// Cell size per axis.
    pub h: [f64; 3],
    /// Ratio of specific heats.
    pub gamma: f64,
    /// Gravitational acceleration along −z (0: none).
    pub gravity: f64,
    /// Courant number of the time step (module docs).
    pub cfl: f64,
    /// Slope limiter.
    pub limiter: Limiter,
    /// Riemann solver.
    pub riemann: Riemann,
    /// Fused or split stages.
    pub scheme: Scheme,
    /// Boundary condition per axis.
    pub boundaries: [Boundary; 3],
    /// The CUDA kernel strategy of every stencil launch (`None`: each stencil's default; the
    /// host ignores it).
    pub strategy: Option<Strategy>,
}

/// The fields a time step works on, on executor `E`: the state, two stage buffers and (split
/// variant) the face fluxes per axis.
pub struct State<E: Executor> {
    /// The conserved state at the current time.
    pub q: Conserved<E::Field<f64, 3>>,
    /// First stage result (and, after the third stage, the new state before the swap).
    pub q1: Conserved<E::Field<f64, 3>>,
    /// Second stage result.
    pub q2: Conserved<E::Field<f64, 3>>,
    /// Face fluxes per axis (split variant; the face `i+1/2` at cell `i`).
    pub flux: [Conserved<E::Field<f64, 3>>; 3],
}

/// Five results as one: the first error, or the five values.
fn all5<T>([a, b, c, d, e]: [Result<T, LaunchError>; 5]) -> Result<[T; 5], LaunchError> {
    Ok([a?, b?, c?, d?, e?])
}

impl<E: Executor> State<E> {
    /// The host state `q` copied to `exec`, with zeroed buffers of the same shape.
    pub fn new(exec: &E, q: &Conserved<Field3<f64>>) -> Result<Self, Error> {
        let shape = *q[0].shape();
        let zeros = || all5([(); 5].map(|_| exec.alloc(shape)));
        Ok(State {
            q: all5(q.each_ref().map(|f| exec.upload(f)))?,
            q1: zeros()?,
            q2: zeros()?,
            flux: [zeros()?, zeros()?, zeros()?],
        })
    }

    /// A host copy of the current state (waits for the work issued so far).
    pub fn download(&self, exec: &E) -> Result<Conserved<Field3<f64>>, Error> {
        Ok(all5(self.q.each_ref().map(|f| exec.download(f)))?)
    }
}

impl Euler {
    /// A cubic box of `n³` cells of side `length`, γ = 1.4, no gravity, CFL 0.5, Koren + HLLC,
    /// fused stages, every axis periodic, each stencil's default strategy.
    pub fn cube(n: usize, length: f64) -> Self {
        Euler {
            n: [n; 3],
            h: [length / n as f64; 3],
            gamma: GAMMA,
            gravity: 0.0,
            cfl: 0.5,
            limiter: Limiter::Koren,
            riemann: Riemann::Hllc,
            scheme: Scheme::Fused,
            boundaries: [Boundary::Periodic; 3],
            strategy: None,
        }
    }

    /// The fields' shape: `n` cells plus a halo of [`HALO`].
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n).halo(HALO)
    }

    /// The cells.
    pub fn interior(&self) -> Loop3D {
        Loop3D::interior(&self.shape())
    }

    /// The cells whose face `i+1/2` along `axis` the split variant computes: the interior and
    /// one more layer at the low end of `axis` (the face `−1/2`).
    pub fn face_range(&self, axis: usize) -> Loop3D {
        face_range_of(&self.shape(), axis)
    }

    /// The centre of cell `g` (global coordinates; the domain starts at 0).
    pub fn centre(&self, g: [isize; 3]) -> [f64; 3] {
        [0, 1, 2].map(|a| (g[a] as f64 + 0.5) * self.h[a])
    }

    /// Host conserved fields from primitive variables `(ρ, u, v, w, p)` at cell centres, halo
    /// included (the halo is refilled before every stage anyway).
    pub fn from_primitive(&self, w: impl Fn([f64; 3]) -> [f64; 5]) -> Conserved<Field3<f64>> {
        let shape = self.shape();
        std::array::from_fn(|v| Field3::from_fn(shape, |g| conserved(w(self.centre(g)), self.gamma)[v]))
    }

    /// Calls `f` with the conserved state of every cell of a host state, in storage order.
    pub fn for_each_cell(&self, q: &Conserved<Field3<f64>>, mut f: impl FnMut([usize; 3], [f64; 5])) {
        let shape = self.shape();
        let slices = q.each_ref().map(|f| f.as_slice());
        for k in HALO..HALO + self.n[2] {
            for j in HALO..HALO + self.n[1] {
                for i in HALO..HALO + self.n[0] {
                    let o = shape.offset([i, j, k]);
                    f([i - HALO, j - HALO, k - HALO], slices.map(|s| s[o]));
                }
            }
        }
    }

    /// The totals of the conserved variables of a host state (sum over the cells times the cell
    /// volume).
    pub fn totals(&self, q: &Conserved<Field3<f64>>) -> [f64; 5] {
        let volume: f64 = self.h.iter().product();
        let mut sum = [0.0; 5];
        self.for_each_cell(q, |_, q| (0..5).for_each(|v| sum[v] += q[v]));
        sum.map(|s| s * volume)
    }

    /// The CFL time step of `s.q`: the Courant number over the largest rate of its cells, by
    /// [`EulerRate`] on the executor (NaN if a rate is NaN).
    pub fn dt<E: Executor>(&self, exec: &E, s: &State<E>) -> Result<f64, Error> {
        Ok(self.cfl / self.max_rate(exec, s)?)
    }

    /// The largest rate of the cells of `s.q`: [`EulerRate`] folded on the executor (on a GPU
    /// the launch returns once the number is on the host).
    fn max_rate<E: Executor>(&self, exec: &E, s: &State<E>) -> Result<f64, Error> {
        let cells = Loop3D::interior(exec.shape_of(&s.q[0]));
        let [hx, hy, hz] = self.h;
        let mut rate = Max::new();
        exec.run_with(&cells, EulerRate, self.strategy, (self.gamma, hx, hy, hz, s.q.each_ref(), &mut rate))?;
        Ok(rate.get())
    }

    /// Fills the halos of `q` for the boundaries: all five fields along every axis, in one
    /// executor call (edges and corners too, as if axis after axis).
    pub fn fill_halos<E: Executor>(&self, exec: &E, q: &mut Conserved<E::Field<f64, 3>>) -> Result<(), Error> {
        let fills = |v: usize| [0, 1, 2].map(|axis| Some(self.boundaries[axis].fill(axis, v)));
        let [r, mx, my, mz, e] = q;
        Ok(exec.fill_halos(&mut [(r, fills(0)), (mx, fills(1)), (my, fills(2)), (mz, fills(3)), (e, fills(4))])?)
    }

    /// Stage `k` (0, 1 or 2) of an SSP-RK3 step of `dt` on `s`, its input's halos already
    /// filled: `out = a q_n + b (q + dt L(q))` with `(a, b) = RK3[k]`, `q_n = s.q` and `q → out`
    /// being `s.q → s.q1`, `s.q1 → s.q2`, `s.q2 → s.q1`. It runs over the cells of `s` (the
    /// interior of its fields: the whole grid, or a subdomain's part of it).
    pub fn stage<E: Executor>(&self, exec: &E, s: &mut State<E>, k: usize, dt: f64) -> Result<(), Error> {
        if k >= RK3.len() {
            return Err(format!("SSP-RK3 has stages 0, 1 and 2, not {k}").into());
        }
        let range = Loop3D::interior(exec.shape_of(&s.q[0]));
        Ok(self.stage_over(exec, s, k, dt, &range)?)
    }

    /// [`Euler::stage`] (`k` < 3) of the cells of `range` only (the fused scheme; the split
    /// scheme runs every cell whatever `range` is: its face fluxes span the subdomain).
    fn stage_over<E: Executor>(
        &self,
        exec: &E,
        s: &mut State<E>,
        k: usize,
        dt: f64,
        range: &Loop3D,
    ) -> Result<(), LaunchError> {
        let (a, b) = RK3[k];
        let State { q: qn, q1, q2, flux, .. } = s;
        let (q, out) = match k {
            0 => (&*qn, q1),
            1 => (&*q1, q2),
            _ => (&*q2, q1),
        };
        let (kappa, beta) = self.limiter.kappa_beta();
        let (g, st) = (self.gamma, self.strategy);
        let [cx, cy, cz] = self.h.map(|h| dt / h);
        let gdt = self.gravity * dt;
        let shape = *exec.shape_of(&q[0]);
        let interior = Loop3D::interior(&shape);
        match self.scheme {
            Scheme::Fused => {
                let args = (g, kappa, beta, a, b, cx, cy, cz, gdt, q.each_ref(), qn.each_ref(), out.each_mut());
                match self.riemann {
                    Riemann::Hllc => exec.run_with(range, EulerFusedHllc, st, args)?,
                    Riemann::Rusanov => exec.run_with(range, EulerFusedRusanov, st, args)?,
                }
            }
            Scheme::Split => {
                for (axis, f) in flux.iter_mut().enumerate() {
                    let range = face_range_of(&shape, axis);
                    let args = (g, kappa, beta, q.each_ref(), f.each_mut());
                    match (self.riemann, axis) {
                        (Riemann::Hllc, 0) => exec.run_with(&range, EulerFluxXHllc, st, args)?,
                        (Riemann::Hllc, 1) => exec.run_with(&range, EulerFluxYHllc, st, args)?,
                        (Riemann::Hllc, _) => exec.run_with(&range, EulerFluxZHllc, st, args)?,
                        (Riemann::Rusanov, 0) => exec.run_with(&range, EulerFluxXRusanov, st, args)?,
                        (Riemann::Rusanov, 1) => exec.run_with(&range, EulerFluxYRusanov, st, args)?,
                        (Riemann::Rusanov, _) => exec.run_with(&range, EulerFluxZRusanov, st, args)?,
                    }
                }
                let [fx, fy, fz] = flux.each_ref().map(|f| f.each_ref());
                let args = (a, b, cx, cy, cz, gdt, q.each_ref(), qn.each_ref(), fx, fy, fz, out.each_mut());
                exec.run_with(&interior, EulerUpdate, st, args)?
            }
        }
        Ok(())
    }

    /// One SSP-RK3 step of `dt` on `s` (on a GPU: issued, not waited for).
    pub fn step<E: Executor>(&self, exec: &E, s: &mut State<E>, dt: f64) -> Result<(), Error> {
        self.fill_halos(exec, &mut s.q)?;
        self.stage(exec, s, 0, dt)?;
        self.fill_halos(exec, &mut s.q1)?;
        self.stage(exec, s, 1, dt)?;
        self.fill_halos(exec, &mut s.q2)?;
        self.stage(exec, s, 2, dt)?;
        std::mem::swap(&mut s.q, &mut s.q1);
        Ok(())
    }

    /// Runs from the host state `q` to time `t_end` on `exec`, a CFL step at a time (the last one
    /// shortened to land on `t_end`), calling `after_step(step, t)` after each; returns the final
    /// host state and the number of steps. The CFL time step is computed every `dt_every` steps
    /// (1: every step; more: the step of the last computation reused meanwhile, fewer downloads).
    pub fn run<E: Executor>(
        &self,
        exec: &E,
        q: &Conserved<Field3<f64>>,
        t_end: f64,
        dt_every: usize,
        mut after_step: impl FnMut(usize, f64),
    ) -> Result<(Conserved<Field3<f64>>, usize), Error> {
        let mut s = State::new(exec, q)?;
        let (mut t, mut steps, mut dt_cfl) = (0.0, 0, 0.0);
        while t < t_end {
            if steps % dt_every.max(1) == 0 {
                dt_cfl = self.dt(exec, &s)?;
            }
            let dt = dt_cfl.min(t_end - t);
            check_dt(dt, t)?;
            self.step(exec, &mut s, dt)?;
            t = if t_end - t <= dt { t_end } else { t + dt };
            steps += 1;
            after_step(steps, t);
        }
        Ok((s.download(exec)?, steps))
    }

    /// The halo every conserved field needs per axis, from the reach of the stencils of this
    /// run's scheme and Riemann solver as the macro recorded it ([`HaloWidths`]):
    /// - fused: the fused stage's reads of `q`;
    /// - split: the face-flux stencils' reads of `q`, and, at the low end of each axis, the layer
    ///   of faces below the interior ([`Euler::face_range`]: as deep as the update's reach into
    ///   the fluxes) whose flux reads `q` further down by the flux stencil's low reach.
    ///
    /// The rate and (split) update stencils read `q` only at the cell. The fields' halo
    /// ([`HALO`]) must be at least this ([`Euler::decompose`] checks).
    pub fn halo_needed(&self) -> Result<HaloWidths<3>, Error> {
        match (self.scheme, self.riemann) {
            (Scheme::Fused, Riemann::Hllc) => Ok(reads_of_q::<EulerFusedHllc>(HaloWidths::none())?),
            (Scheme::Fused, Riemann::Rusanov) => Ok(reads_of_q::<EulerFusedRusanov>(HaloWidths::none())?),
            (Scheme::Split, Riemann::Hllc) => split_halo::<EulerFluxXHllc, EulerFluxYHllc, EulerFluxZHllc>(),
            (Scheme::Split, Riemann::Rusanov) => {
                split_halo::<EulerFluxXRusanov, EulerFluxYRusanov, EulerFluxZRusanov>()
            }
        }
    }

    /// The decomposition of this run's grid over `domains` subdomains: over process grid `grid`
    /// when given (its product must be `domains`), else the grid of least halo surface
    /// ([`Decomposition::auto`]). The axes with [`Boundary::Periodic`] wrap around; the halo is
    /// the fields' ([`HALO`], checked to cover [`Euler::halo_needed`]): the exchange copies
    /// that many layers, so every subdomain must be at least that thick where it has a neighbour.
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, Error> {
        let periodic = self.boundaries.map(|b| b == Boundary::Periodic);
        Ok(Decomposition::with_grid(self.n, domains, grid, periodic, self.checked_halo()?)?)
    }

    /// The fields' halo widths, refused where they do not cover [`Euler::halo_needed`].
    fn checked_halo(&self) -> Result<[usize; 3], Error> {
        let needed = self.halo_needed()?.0;
        let halo = self.shape().halo_widths();
        if (0..3).any(|a| halo[a] < needed[a]) {
            return Err(format!(
                "the fields' halo is {halo:?}, but the {:?} {:?} stencils read {needed:?} cells around a cell: \
                 widen HALO to the stencils' reach",
                self.scheme, self.riemann
            )
            .into());
        }
        Ok(halo)
    }
}

/// The names of the conserved fields in the stencils that read the state.
const Q_NAMES: [&str; 5] = ["q_0", "q_1", "q_2", "q_3", "q_4"];

/// `w` widened by stencil `S`'s reads of the five conserved fields.
fn reads_of_q<S: Stencil<3>>(w: HaloWidths<3>) -> Result<HaloWidths<3>, ReachError> {
    Q_NAMES.iter().try_fold(w, |w, name| w.read_by::<S>(name))
}

/// The smallest offset at which stencil `S` reads the conserved fields along `axis` (≤ 0).
fn low_reach<S: Stencil<3>>(axis: usize) -> usize {
    let lo = S::INFO.fields.iter().filter(|f| Q_NAMES.contains(&f.name)).map(|f| f.lo[axis]).min();
    lo.unwrap_or(0).unsigned_abs() as usize
}

/// [`Euler::halo_needed`] of the split scheme with face-flux stencils `X`, `Y`, `Z`.
fn split_halo<X: Stencil<3>, Y: Stencil<3>, Z: Stencil<3>>() -> Result<HaloWidths<3>, Error> {
    let q = reads_of_q::<Z>(reads_of_q::<Y>(reads_of_q::<X>(HaloWidths::none())?)?)?;
    // The update's reach into the flux of each axis: the face layers below the interior.
    let flux: [&str; 15] = [
        "fx_0", "fx_1", "fx_2", "fx_3", "fx_4", "fy_0", "fy_1", "fy_2", "fy_3", "fy_4", "fz_0", "fz_1", "fz_2", "fz_3",
        "fz_4",
    ];
    let faces = flux.iter().try_fold(HaloWidths::none(), |w, name| w.read_by::<EulerUpdate>(name))?.0;
    let below = [low_reach::<X>(0), low_reach::<Y>(1), low_reach::<Z>(2)];
    Ok(HaloWidths(std::array::from_fn(|a| q.0[a].max(faces[a] + below[a]))))
}

/// The cells of fields of `shape` whose face `i+1/2` along `axis` the split variant computes:
/// the interior and one more layer at the low end of `axis` (see [`Euler::face_range`]).
fn face_range_of(shape: &Shape3, axis: usize) -> Loop3D {
    let halo = shape.halo_widths();
    let mut begin = halo;
    begin[axis] -= 1;
    // Up to the interior's high end: `halo` points above it.
    Loop::from_parts(shape.extent(), begin, halo)
}

/// Refuses a time step that is not a positive number (a state that lost positivity).
fn check_dt(dt: f64, t: f64) -> Result<(), Error> {
    if dt.is_finite() && dt > 0.0 {
        Ok(())
    } else {
        Err(format!("time step {dt} at t = {t}: the state has a non-positive density or pressure").into())
    }
}

/// The exact solution of the 1D Riemann problem of the Euler equations (Toro, chapter 4): the
/// primitive state `(ρ, u, p)` at `ξ = x / t` of the initial states `left` and `right`
/// (each `(ρ, u, p)`), for the validation tests. Newton iteration on the star pressure.
pub fn exact_riemann(left: [f64; 3], right: [f64; 3], gamma: f64, xi: f64) -> [f64; 3] {
    let g = gamma;
    let [rl, ul, pl] = left;
    let [rr, ur, pr] = right;
    let (cl, cr) = ((g * pl / rl).sqrt(), (g * pr / rr).sqrt());
    // The pressure function of one side and its derivative.
    let side = |p: f64, rk: f64, pk: f64, ck: f64| -> (f64, f64) {
        if p > pk {
            let (a, b) = (2.0 / ((g + 1.0) * rk), (g - 1.0) / (g + 1.0) * pk);
            let s = (a / (p + b)).sqrt();
            ((p - pk) * s, s * (1.0 - 0.5 * (p - pk) / (b + p)))
        } else {
            let r = p / pk;
            (2.0 * ck / (g - 1.0) * (r.powf((g - 1.0) / (2.0 * g)) - 1.0), r.powf(-(g + 1.0) / (2.0 * g)) / (rk * ck))
        }
    };
    let mut p = (0.5 * (pl + pr) - 0.125 * (ur - ul) * (rl + rr) * (cl + cr)).max(1e-8);
    for _ in 0..100 {
        let ((fl, dl), (fr, dr)) = (side(p, rl, pl, cl), side(p, rr, pr, cr));
        let next = (p - (fl + fr + ur - ul) / (dl + dr)).max(1e-12);
        let change = 2.0 * (next - p).abs() / (next + p);
        p = next;
        if change < 1e-15 {
            break;
        }
    }
    let u = 0.5 * (ul + ur) + 0.5 * (side(p, rr, pr, cr).0 - side(p, rl, pl, cl).0);
    let g6 = (g - 1.0) / (g + 1.0);
    if xi <= u {
        if p > pl {
            let s = ul - cl * ((g + 1.0) / (2.0 * g) * p / pl + (g - 1.0) / (2.0 * g)).sqrt();
            if xi <= s {
                left
            } else {
                [rl * (p / pl + g6) / (g6 * p / pl + 1.0), u, p]
            }
        } else if xi <= ul - cl {
            left
        } else if xi > u - cl * (p / pl).powf((g - 1.0) / (2.0 * g)) {
            [rl * (p / pl).powf(1.0 / g), u, p]
        } else {
            let c = 2.0 / (g + 1.0) * (cl + 0.5 * (g - 1.0) * (ul - xi));
            [
                rl * (c / cl).powf(2.0 / (g - 1.0)),
                2.0 / (g + 1.0) * (cl + 0.5 * (g - 1.0) * ul + xi),
                pl * (c / cl).powf(2.0 * g / (g - 1.0)),
            ]
        }
    } else if p > pr {
        let s = ur + cr * ((g + 1.0) / (2.0 * g) * p / pr + (g - 1.0) / (2.0 * g)).sqrt();
        if xi >= s {
            right
        } else {
            [rr * (p / pr + g6) / (g6 * p / pr + 1.0), u, p]
        }
    } else if xi >= ur + cr {
        right
    } else if xi <= u + cr * (p / pr).powf((g - 1.0) / (2.0 * g)) {
        [rr * (p / pr).powf(1.0 / g), u, p]
    } else {
        let c = 2.0 / (g + 1.0) * (cr - 0.5 * (g - 1.0) * (ur - xi));
        [
            rr * (c / cr).powf(2.0 / (g - 1.0)),
            2.0 / (g + 1.0) * (-cr + 0.5 * (g - 1.0) * ur + xi),
            pr * (c / cr).powf(2.0 * g / (g - 1.0)),
        ]
    }
}

/// The names of the conserved fields in checkpoints.
const EULER_FIELDS: [&str; 5] = ["rho", "rho_u", "rho_v", "rho_w", "energy"];

/// The Euler model's name in checkpoints: with its scheme, Riemann solver, limiter and
/// boundaries.
fn euler_name(e: &Euler) -> String {
    format!("euler3d {:?} {:?} {:?} {:?}", e.scheme, e.riemann, e.limiter, e.boundaries)
}

/// The Euler run's settings a checkpoint must match.
fn euler_settings(e: &Euler, dt_every: usize) -> [(&'static str, f64); 4] {
    [("cfl", e.cfl), ("gamma", e.gamma), ("gravity", e.gravity), ("dt_every", dt_every as f64)]
}

/// An Euler run on `E` as the time loop drives it: the state, its time and steps, and the CFL
/// step in use.
struct Running<'a, E: Executor> {
    e: &'a Euler,
    exec: &'a E,
    s: State<E>,
    t: f64,
    steps: usize,
    dt_cfl: f64,
    t_end: f64,
    dt_every: usize,
}

impl<E: Executor> Stepping for Running<'_, E> {
    fn clock(&self) -> (usize, f64) {
        (self.steps, self.t)
    }

    fn finished(&self) -> bool {
        self.t >= self.t_end
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let (e, exec, t_end) = (self.e, self.exec, self.t_end);
        for _ in 0..steps {
            if self.t >= t_end {
                break;
            }
            if self.steps.is_multiple_of(self.dt_every.max(1)) {
                self.dt_cfl = e.dt(exec, &self.s)?;
            }
            let dt = self.dt_cfl.min(t_end - self.t);
            if !(dt.is_finite() && dt > 0.0) {
                let t = self.t;
                return Err(
                    format!("time step {dt} at t = {t}: the state has a non-positive density or pressure").into()
                );
            }
            e.step(exec, &mut self.s, dt)?;
            self.t = if t_end - self.t <= dt { t_end } else { self.t + dt };
            self.steps += 1;
            after_step(self.steps, self.t);
        }
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let q = self.s.download(self.exec)?;
        let fields: Vec<(&str, &Field3<f64>)> = EULER_FIELDS.iter().copied().zip(q.iter()).collect();
        let mut c = checkpoint::snapshot_of(&id.name, self.steps, self.t, &id.grid, &id.settings, &fields)?;
        c.scalar("dt_cfl", self.dt_cfl);
        write(&c)
    }
}

/// A run of `e` on `exec` on the time-loop driver, with checkpoints as `plan` says (the
/// independent [`Euler::run`] is its reference): from `q` or from `plan.restart` (its state, time, step
/// count and the CFL step in use) to time `t_end`; returns the final state, the step count and
/// the first step run. The model's name in checkpoints includes its scheme, Riemann solver,
/// limiter and boundaries, so a restart with other numerics is refused.
pub fn run_with<E: Executor>(
    e: &Euler,
    exec: &E,
    q: &Conserved<Field3<f64>>,
    t_end: f64,
    dt_every: usize,
    plan: &Plan,
    after_step: impl FnMut(usize, f64),
) -> Result<(Conserved<Field3<f64>>, usize, usize), Error> {
    let (name, settings) = (euler_name(e), euler_settings(e, dt_every).to_vec());
    let id = Identity { name, grid: e.n.to_vec(), fields: EULER_FIELDS.to_vec(), settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<Running<'_, E>, Error> {
        let run = |s, t, steps, dt_cfl| Running { e, exec, s, t, steps, dt_cfl, t_end, dt_every };
        Ok(match c {
            Some(c) => {
                let [a, b, cc, d, f] = EULER_FIELDS.map(|name| c.field::<f64, 3>(name, &e.shape()));
                let s = State::new(exec, &[a?, b?, cc?, d?, f?])?;
                run(s, c.time, c.step as usize, c.get_scalar("dt_cfl")?)
            }
            None => run(State::new(exec, q)?, 0.0, 0, 0.0),
        })
    };
    let plan = Plan { model: "euler3d".into(), ..plan.clone() };
    let (run, start) = driver::run(&id, &plan, build, after_step)?;
    Ok((run.s.download(exec)?, run.steps, start))
}
