//! The 3D compressible Euler equations by a cell-centred finite-volume method (Xu et al. 2019,
//! sections 3.2 and 4; Shimokawabe et al. 2014, section II): `∂q/∂t + ∇·F(q) = S(q)` for
//! `q = (ρ, ρu, ρv, ρw, E)`, an ideal gas, optional gravity along −z. Primitive-variable κ-scheme
//! reconstruction ([`limited_slope`], [`Limiter`]), HLLC or Rusanov face fluxes ([`Riemann`]),
//! SSP-RK3 stages ([`RK3`]) launched fused or split ([`Scheme`]; the same bits), the CFL step a
//! reduction ([`EulerRate`]) and per-axis boundaries ([`Boundary`]) as the halo fill before each
//! stage; the derivations are in the "Numerics" section of the `euler3d` examples page.
//! [`Euler::run`] runs it on the host, a GPU or [`Distributed`](stencil_runtime::Distributed)
//! subdomains (GPUs, MPI ranks), with the same bits everywhere.

use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Executor, HaloFill, LaunchError, Loop, Reduced, Strategy};

use crate::checkpoint::{Error, Plan};
use crate::driver::{self, all, End, Identity, Named, Record, Restart, Spec};
use crate::held_clock::{paired_step, HeldClock, Pairing};

/// Ratio of specific heats of the ideal gas.
pub const GAMMA: f64 = 1.4;

/// Halo width of every field: the reconstruction reaches two cells to each side.
pub const HALO: usize = 2;

/// Steps a run's clock leaves out: the first compiles the kernels.
pub const WARM_UP: usize = 1;

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
pub fn limited_slope<T>(a: T, f: T, kappa: T, beta: T) -> T {
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
#[rustfmt::skip]
pub fn reconstruct(
    wm: [f64; 5], w0: [f64; 5], w1: [f64; 5], w2: [f64; 5], kappa: f64, beta: f64,
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

/// Declares the face helper `$name`: reconstruction and the `$solver` flux (normal velocity first).
macro_rules! face_helper {
    ($name:ident, $solver:ident) => {
        #[doc = concat!("Reconstruction and the `", stringify!($solver), "` flux at the face between `w0` and `w1`.")]
        #[stencil_fn]
        #[rustfmt::skip]
        pub fn $name(wm: [f64; 5], w0: [f64; 5], w1: [f64; 5], w2: [f64; 5], kappa: f64, beta: f64, gamma: f64) -> [f64; 5] {
            let (left, right) = reconstruct(wm, w0, w1, w2, kappa, beta);
            $solver(left, right, gamma)
        }
    };
}

face_helper!(face_hllc, hllc);
face_helper!(face_rusanov, rusanov);

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

/// The state `s` of a cell advanced by `Δt L`: the flux differences of its upper and lower x,
/// y and z faces (`c* = Δt/h_*`) and gravity (`gdt = g Δt`). The fused and split stages both
/// call it, so they do the same operations.
#[stencil_fn]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn advance(
    s: [f64; 5], xp: [f64; 5], xm: [f64; 5], yp: [f64; 5], ym: [f64; 5], zp: [f64; 5], zm: [f64; 5],
    cx: f64, cy: f64, cz: f64, gdt: f64,
) -> [f64; 5] {
    let mut r = [0.0f64; 5];
    for v in 0..5 {
        r[v] = s[v] - (cx * (xp[v] - xm[v]) + cy * (yp[v] - ym[v]) + cz * (zp[v] - zm[v]));
    }
    r[3] -= gdt * s[0];
    r[4] -= gdt * s[3];
    r
}

/// One face-flux stencil of the split variant along an axis: the cells at offsets `$m1`, 0,
/// `$p1`, `$p2` along it, rotated by `$swap` (none for x) so that the axis's velocity is the x
/// one, solved by `$face`, and rotated back.
macro_rules! face_flux_stencil {
    ($name:ident, $face:ident, [$($swap:ident)?], $axis:literal, $i:literal, [$($m1:tt)*], [$($p1:tt)*], [$($p2:tt)*]) => {
        #[doc = concat!("The split scheme's ", $axis, " faces: the flux through the face `", $i, "+1/2` of cell `", $i,
            "`.")]
        #[stencil]
        pub fn $name(idx: Idx3, gamma: f64, kappa: f64, beta: f64, q: [&Field3<f64>; 5], f: [&mut Field3<f64>; 5]) {
            let w = primitive(q[idx], gamma);
            let m1 = primitive(q[idx.ix::<$($m1)*>()], gamma);
            let p1 = primitive(q[idx.ix::<$($p1)*>()], gamma);
            let p2 = primitive(q[idx.ix::<$($p2)*>()], gamma);
            let flux = $($swap)?($face($($swap)?(m1), $($swap)?(w), $($swap)?(p1), $($swap)?(p2), kappa, beta, gamma));
            f[idx] = flux;
        }
    };
}

/// Declares the fused stage and the split variant's three face-flux stencils of face helper `$face`.
macro_rules! euler_stencils {
    ($face:ident, $fused:ident, $flux_x:ident, $flux_y:ident, $flux_z:ident) => {
/// The fused SSP-RK3 stage: `out = a q_n + b (q + Δt L(q))` with the six faces of the
        /// cell reconstructed and solved here, as point functions (`Δt` held on the executor, `h_*`
        /// the cell sizes, `g` gravity).
        #[stencil]
        #[rustfmt::skip]
        pub fn $fused(
            idx: Idx3, gamma: f64, kappa: f64, beta: f64, a: f64, b: f64, dt: Held<f64>, hx: f64, hy: f64, hz: f64,
            g: f64, q: [&Field3<f64>; 5], qn: [&Field3<f64>; 5], out: [&mut Field3<f64>; 5],
        ) {
            let (cx, cy, cz, gdt) = (dt / hx, dt / hy, dt / hz, g * dt);
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
            let r = advance(q[idx], fx(idx), fx(idx.ix::<-1, 0, 0>()), fy(idx), fy(idx.ix::<0, -1, 0>()), fz(idx),
                fz(idx.ix::<0, 0, -1>()), cx, cy, cz, gdt);
            for v in 0..5 {
                // A step of size 0 (past the end time) leaves the state as it is.
                out[v][idx] = if dt > 0.0 { a * qn[v][idx] + b * r[v] } else { qn[v][idx] };
            }
        }

        face_flux_stencil!($flux_x, $face, [], "x", "i", [-1, 0, 0], [1, 0, 0], [2, 0, 0]);
        face_flux_stencil!($flux_y, $face, [swap_y], "y", "j", [0, -1, 0], [0, 1, 0], [0, 2, 0]);
        face_flux_stencil!($flux_z, $face, [swap_z], "z", "k", [0, 0, -1], [0, 0, 1], [0, 0, 2]);
    };
}

euler_stencils!(face_hllc, euler_fused_hllc, euler_flux_x_hllc, euler_flux_y_hllc, euler_flux_z_hllc);
euler_stencils!(face_rusanov, euler_fused_rusanov, euler_flux_x_rusanov, euler_flux_y_rusanov, euler_flux_z_rusanov);

/// The split variant's update: `out = a q_n + b (q + Δt L(q))` from the face fluxes (`fx` at
/// `i` is the face `i+1/2`), the same operations in the same order as the fused stage.
#[stencil]
#[rustfmt::skip]
pub fn euler_update(
    idx: Idx3, a: f64, b: f64, dt: Held<f64>, hx: f64, hy: f64, hz: f64, g: f64, q: [&Field3<f64>; 5],
    qn: [&Field3<f64>; 5], fx: [&Field3<f64>; 5], fy: [&Field3<f64>; 5], fz: [&Field3<f64>; 5],
    out: [&mut Field3<f64>; 5],
) {
    let (cx, cy, cz, gdt) = (dt / hx, dt / hy, dt / hz, g * dt);
    let r = advance(q[idx], fx[idx], fx[idx.ix::<-1, 0, 0>()], fy[idx], fy[idx.ix::<0, -1, 0>()], fz[idx],
        fz[idx.ix::<0, 0, -1>()], cx, cy, cz, gdt);
    for v in 0..5 {
        out[v][idx] = if dt > 0.0 { a * qn[v][idx] + b * r[v] } else { qn[v][idx] };
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

/// A step's clock on the executor, over one cell (`q` only places it): `dt = min(cfl / rate,
/// t_end − t)` and the time after the step (`t_end` once reached), the host's operations.
#[stencil]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn euler_clock(
    idx: Idx3, cfl: f64, t_end: f64, rate: Held<f64>, t: Held<f64>, q: &Field3<f64>, dt: &mut Min<f64>,
    next: &mut Max<f64>,
) {
    let d = (cfl / rate).min(t_end - t);
    dt.fold(d);
    next.fold(if t_end - t <= d { t_end } else { t + d });
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

/// The five conserved fields `(ρ, ρu, ρv, ρw, E)`: host fields or an executor's.
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
    /// The CUDA strategy of every launch (`None`: each stencil's default; the host ignores it).
    pub strategy: Option<Strategy>,
    /// Each step's CFL step from the state one step before (the first step's from its own),
    /// its reduction issued before the step's stages and collected after them, so the host never
    /// waits for a GPU with nothing queued; a run stops with an error if a step so sized has a
    /// CFL number above 1 for the state it advanced. Off: from the step's own state (`dt_every`
    /// steps apart), which makes the host wait for the GPU each time. (The `euler3d` program
    /// runs lagged unless given `--dt-every`.)
    pub dt_lagged: bool,
    /// Each step sized from its own state on the executor ([`EulerClock`] into held scalars:
    /// the bits of `dt_every` 1, without the host waiting for a reduction before the stages),
    /// and, after two steps, replayed as two recorded steps in turn (one CUDA graph per step on a
    /// GPU; on GPU subdomains with `STENCIL_RECORD=1`). The host reads the clock after each step.
    pub dt_on_device: bool,
}

/// The fields a time step works on, on executor `E`: the state, two stage buffers and (split
/// scheme) the face fluxes per axis.
pub struct State<E: Executor> {
    /// The conserved state at the current time.
    pub q: Conserved<E::Field<f64, 3>>,
    /// First stage result (and, after the third stage, the new state before the swap).
    pub q1: Conserved<E::Field<f64, 3>>,
    /// Second stage result.
    pub q2: Conserved<E::Field<f64, 3>>,
    /// Face fluxes per axis (the face `i+1/2` at cell `i`): allocated by the first split stage.
    pub flux: Vec<Conserved<E::Field<f64, 3>>>,
    /// The step's size and the time, held on the executor (`clock.dt` is what the stages read).
    pub clock: HeldClock<E>,
    /// The CFL rate of the state, held on the executor (`dt_on_device`).
    pub rate: E::HeldScalar<f64>,
}

impl<E: Executor> State<E> {
    /// The host state `q` (five fields) on `exec`, with zeroed stage buffers of its shape, each
    /// field declaring the boundary `euler` gives it.
    pub fn new(exec: &E, euler: &Euler, q: &[Field3<f64>]) -> Result<Self, Error> {
        let zeros = || all([(); 5].map(|_| exec.alloc(*q[0].shape())));
        let (clock, rate) = (HeldClock::new(exec)?, exec.held(0.0)?);
        let q = all(std::array::from_fn(|v| exec.upload(&q[v])))?;
        let mut s = State { q, q1: zeros()?, q2: zeros()?, flux: vec![], clock, rate };
        for (v, f) in [&mut s.q, &mut s.q1, &mut s.q2].into_iter().flatten().enumerate() {
            exec.declare_boundary(f, euler.fills(v % 5))?;
        }
        Ok(s)
    }

    /// A host copy of the current state (waits for the work issued so far).
    pub fn download(&self, exec: &E) -> Result<Conserved<Field3<f64>>, Error> {
        Ok(all(self.q.each_ref().map(|f| exec.download(f)))?)
    }
}

impl Euler {
    /// The boundary of conserved variable `v` at the ends of each axis; a wall flips the normal
    /// momentum.
    fn fills(&self, v: usize) -> [Option<HaloFill>; 3] {
        [0, 1, 2].map(|axis| match self.boundaries[axis] {
            Boundary::Periodic => Some(HaloFill::Periodic),
            Boundary::Outflow => Some(HaloFill::ZeroGradient),
            Boundary::Reflective if v == axis + 1 => Some(HaloFill::MirrorNegated),
            Boundary::Reflective => Some(HaloFill::Mirror),
        })
    }

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
            dt_lagged: false,
            dt_on_device: false,
        }
    }

    /// The fields' shape: `n` cells plus a halo of [`HALO`].
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n).halo(HALO)
    }

    /// Host conserved fields from primitive variables `(ρ, u, v, w, p)` at cell centres (the
    /// domain starts at 0), halo included.
    pub fn from_primitive(&self, w: impl Fn([f64; 3]) -> [f64; 5]) -> Conserved<Field3<f64>> {
        let centre = |g: [isize; 3]| [0, 1, 2].map(|a| (g[a] as f64 + 0.5) * self.h[a]);
        std::array::from_fn(|v| Field3::from_fn(self.shape(), |g| conserved(w(centre(g)), self.gamma)[v]))
    }

    /// Calls `f` with the index and the conserved state of every cell of a host state (z fastest).
    pub fn for_each_cell(&self, q: &Conserved<Field3<f64>>, mut f: impl FnMut([usize; 3], [f64; 5])) {
        let views = q.each_ref().map(|f| f.interior_view());
        for ((i, j, k), _) in views[0].indexed_iter() {
            f([i, j, k], views.each_ref().map(|v| v[[i, j, k]]));
        }
    }

    /// The totals of the conserved variables of a host state (sum over the cells × cell volume).
    pub fn totals(&self, q: &Conserved<Field3<f64>>) -> [f64; 5] {
        q.each_ref().map(|f| f.interior_view().sum() * self.h.iter().product::<f64>())
    }

    /// The CFL time step of `s.q`: the Courant number over the largest rate of its cells, by
    /// [`EulerRate`] on the executor (NaN if a rate is NaN; on a GPU one number is read back).
    pub fn dt<E: Executor>(&self, exec: &E, s: &State<E>) -> Result<f64, Error> {
        let cells = Loop3D::interior(exec.shape_of(&s.q[0]));
        let [hx, hy, hz] = self.h;
        let mut rate = Max::new();
        exec.run_with(&cells, EulerRate, self.strategy, (self.gamma, hx, hy, hz, s.q.each_ref(), &mut rate))?;
        Ok(self.cfl / rate.get())
    }

    /// [`Euler::dt`]'s reduction issued without waiting: `cfl` over the rate folded from it is
    /// the same step size, bit for bit.
    pub fn rate_later<E: Executor>(&self, exec: &E, s: &State<E>) -> Result<Reduced, Error> {
        let cells = Loop3D::interior(exec.shape_of(&s.q[0]));
        let [hx, hy, hz] = self.h;
        let mut unused = Max::new();
        Ok(exec.reduce_later(
            &cells,
            EulerRate,
            self.strategy,
            (self.gamma, hx, hy, hz, s.q.each_ref(), &mut unused),
        )?)
    }

    /// Stage `k` (0, 1 or 2) of an SSP-RK3 step of the size `s.clock.dt` holds on `s`
    /// (boundaries as the fields declare): `out = a q_n + b (q + dt L(q))` with `(a, b) = RK3[k]`,
    /// `q_n = s.q` and `q → out` being `s.q → s.q1`, `s.q1 → s.q2`, `s.q2 → s.q1`, over the cells.
    pub fn stage<E: Executor>(&self, exec: &E, s: &mut State<E>, k: usize) -> Result<(), Error> {
        if k >= RK3.len() {
            return Err(format!("SSP-RK3 has stages 0, 1 and 2, not {k}").into());
        }
        Ok(self.stage_launches(exec, s, k, false)?)
    }

    /// The launches of stage `k` (below 3) of [`Euler::stage`].
    fn stage_launches<E: Executor>(
        &self,
        exec: &E,
        s: &mut State<E>,
        k: usize,
        first: bool,
    ) -> Result<(), LaunchError> {
        let (a, b) = RK3[k];
        let shape = *exec.shape_of(&s.q[0]);
        if self.scheme == Scheme::Split && s.flux.is_empty() {
            s.flux = (0..3).map(|_| all([(); 5].map(|_| exec.alloc(shape)))).collect::<Result<_, _>>()?;
        }
        let State { q: qn, q1, q2, flux, clock, .. } = s;
        let (q, out) = match k {
            0 => (&*qn, q1),
            1 => (&*q1, q2),
            _ => (&*q2, q1),
        };
        // `(κ, β)` of the limited slope `ψ` (module docs).
        let (kappa, beta) = match self.limiter {
            Limiter::Koren => (1.0 / 3.0, 2.0),
            Limiter::Minmod => (0.0, 1.0),
        };
        let (g, st, interior) = (self.gamma, self.strategy, Loop3D::interior(&shape));
        let ([hx, hy, hz], gravity) = (self.h, self.gravity);
        let dt = clock.step_size(first);
        if self.scheme == Scheme::Fused {
            let args = (g, kappa, beta, a, b, dt, hx, hy, hz, gravity, q.each_ref(), qn.each_ref(), out.each_mut());
            match self.riemann {
                Riemann::Hllc => exec.run_with(&interior, EulerFusedHllc, st, args)?,
                Riemann::Rusanov => exec.run_with(&interior, EulerFusedRusanov, st, args)?,
            }
            return Ok(());
        }
        for (axis, f) in flux.iter_mut().enumerate() {
            // The cells whose face `i+1/2` is computed: the interior and one more layer at the
            // low end of `axis` (the face `−1/2`), up to the interior's high end.
            let mut begin = shape.halo_widths();
            begin[axis] -= 1;
            let range = Loop::from_parts(shape.extent(), begin, shape.halo_widths());
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
        let [fx, fy, fz] = [0, 1, 2].map(|axis| flux[axis].each_ref());
        let args = (a, b, dt, hx, hy, hz, gravity, q.each_ref(), qn.each_ref(), fx, fy, fz, out.each_mut());
        exec.run_with(&interior, EulerUpdate, st, args)
    }

    /// One SSP-RK3 step of `dt` on `s` (on a GPU: issued, not waited for).
    pub fn step<E: Executor>(&self, exec: &E, s: &mut State<E>, dt: f64) -> Result<(), Error> {
        exec.set_held(&s.clock.dt, dt)?;
        Ok(self.stages(exec, s, false)?)
    }

    /// The three stages of a step of the size `s.clock.dt` holds, and the swap of `q` and `q1`.
    fn stages<E: Executor>(&self, exec: &E, s: &mut State<E>, first: bool) -> Result<(), LaunchError> {
        (0..RK3.len()).try_for_each(|k| self.stage_launches(exec, s, k, first))?;
        std::mem::swap(&mut s.q, &mut s.q1);
        Ok(())
    }

    /// One step sized on the executor from the time and into the held scalars
    /// [`HeldClock::roles`] names (`first`: the first step of a pair) and the state's own CFL
    /// rate, up to `t_end`: the rate and [`EulerClock`] reduced into held scalars, then the
    /// stages (a step of size 0, past `t_end`, changes nothing); the host reads nothing, so steps
    /// can be recorded.
    pub fn step_on_device<E: Executor>(
        &self,
        exec: &E,
        s: &mut State<E>,
        t_end: f64,
        first: bool,
    ) -> Result<(), LaunchError> {
        let shape = *exec.shape_of(&s.q[0]);
        let [hx, hy, hz] = self.h;
        let args = (self.gamma, hx, hy, hz, s.q.each_ref(), &mut Max::new());
        exec.reduce_into(&Loop3D::interior(&shape), EulerRate, self.strategy, args, &[&s.rate])?;
        let h = shape.halo_widths();
        let cell = Loop3D::from_bounds(shape.extent(), h, h.map(|w| w + 1))?;
        let (t, into) = s.clock.roles(first);
        let args = (self.cfl, t_end, &s.rate, t, &s.q[0], &mut Min::new(), &mut Max::new());
        exec.reduce_into(&cell, EulerClock, None, args, &into)?;
        self.stages(exec, s, first)
    }

    /// The decomposition of the grid over `domains` subdomains (over process grid `grid` when
    /// given, else the grid of least halo surface); the periodic axes wrap around.
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, Error> {
        let periodic = self.boundaries.map(|b| b == Boundary::Periodic);
        Ok(Decomposition::with_grid(self.n, domains, grid, periodic, self.shape().halo_widths())?)
    }

    /// Runs from the host state `q` (or from the checkpoint `plan.restart`) to time `t_end` on
    /// `exec`, with checkpoints as `plan` says and `after_step(step, t)` after each step: the
    /// final host state, the step count and the first step run (0 without a restart). The name in
    /// checkpoints includes the numerics, so a restart with others is refused.
    pub fn run<E: Executor>(
        &self,
        exec: &E,
        q: &Conserved<Field3<f64>>,
        t_end: f64,
        dt_every: usize,
        plan: &Plan,
        after_step: impl FnMut(usize, f64),
    ) -> Result<(Conserved<Field3<f64>>, usize, usize), Error> {
        let e = self;
        let id = Identity {
            name: format!("euler3d {:?} {:?} {:?} {:?}", e.scheme, e.riemann, e.limiter, e.boundaries),
            grid: e.n.to_vec(),
            fields: vec!["rho", "rho_u", "rho_v", "rho_w", "energy"],
            settings: vec![
                ("cfl", e.cfl),
                ("gamma", e.gamma),
                ("gravity", e.gravity),
                ("dt_every", dt_every as f64),
                ("dt_lagged", f64::from(u8::from(e.dt_lagged))),
                ("dt_on_device", f64::from(u8::from(e.dt_on_device))),
            ],
        };
        let spec = Spec { id, shape: e.shape(), end: End::Time(t_end), records: None, warm_up: WARM_UP };
        let build = |restart: Option<Restart<f64, 3>>| -> Result<(State<E>, f64), Error> {
            Ok(match restart {
                Some(r) => (State::new(exec, self, &r.fields)?, r.checkpoint.get_scalar("dt_cfl")?),
                None => (State::new(exec, self, q)?, 0.0),
            })
        };
        // A CFL step at a time (computed every `dt_every` steps, or lagged by one step), the last
        // one landing on `t_end`. Lagged, `dt_cfl` holds the next step's (so a checkpoint does).
        if e.dt_on_device && (e.dt_lagged || dt_every != 1) {
            let why = "sizes each step from its own state on the executor";
            return Err(format!("dt_on_device {why}: leave dt_lagged off and dt_every at 1").into());
        }
        // Recorded pairs of steps where the driver reads the state only after even step counts.
        let even = |n: Option<usize>| n.is_none_or(|n| n % 2 == 0);
        let pairs = even(plan.every) && even(plan.check_every) && even(plan.output.as_ref().map(|o| o.0));
        let ahead = plan.every.is_none() && plan.check_every.is_none() && plan.output.is_none();
        let pairing = Pairing { pairs, ahead };
        let step = |(s, dt_cfl): &mut (State<E>, f64), step: usize, t: f64| -> Result<(f64, Record<f64>), Error> {
            if e.dt_on_device {
                let one = |x: &E, s: &mut State<E>, first| e.step_on_device(x, s, t_end, first);
                let (dt, next) = paired_step(exec, s, |s| &mut s.clock, (step, t), t_end, pairing, one)?;
                if !(dt.is_finite() && dt > 0.0) {
                    let why = "the state has a non-positive density or pressure";
                    return Err(format!("time step {dt} at t = {t}: {why}").into());
                }
                *dt_cfl = dt;
                return Ok((next, Record::none()));
            }
            if (e.dt_lagged && step == 0) || (!e.dt_lagged && step.is_multiple_of(dt_every.max(1))) {
                *dt_cfl = e.dt(exec, s)?;
            }
            let dt = dt_cfl.min(t_end - t);
            if !(dt.is_finite() && dt > 0.0) {
                let why = "the state has a non-positive density or pressure";
                return Err(format!("time step {dt} at t = {t}: {why}").into());
            }
            let rate = if e.dt_lagged { Some(e.rate_later(exec, s)?) } else { None };
            e.step(exec, s, dt)?;
            if let Some(rate) = rate {
                // The stages stay queued while the host waits for the reduction before them.
                let mut r = Max::<f64>::new();
                rate.fold_into(&mut [&mut r])?;
                // The step's size came from the state before: it must stay stable for its own.
                if dt * r.get() > 1.0 {
                    let why = "was taken from the state one step before, and the state it advanced \
                               moves faster: its CFL number";
                    let fix = "lower the CFL number, or size each step from its own state (dt_lagged off, \
                               euler3d --dt-every 1)";
                    return Err(format!("time step {dt} at t = {t} {why} is {:.4} > 1: {fix}", dt * r.get()).into());
                }
                *dt_cfl = e.cfl / r.get();
            }
            Ok((if t_end - t <= dt { t_end } else { t + dt }, Record::none()))
        };
        let plan = Plan { model: "euler3d".into(), ..plan.clone() };
        let end = driver::run_fields(exec, &spec, &plan, build, step, after_step)?;
        Ok((end.state.0.download(exec)?, end.steps, end.start))
    }
}

/// A run's state as its checkpoints hold it: the conserved fields and the CFL step in use.
impl<E: Executor> Named<E::Field<f64, 3>> for (State<E>, f64) {
    fn fields(&self) -> Vec<&E::Field<f64, 3>> {
        self.0.q.iter().collect()
    }

    fn scalars(&self) -> Vec<(&'static str, f64)> {
        vec![("dt_cfl", self.1)]
    }
}
