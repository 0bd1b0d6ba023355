//! A nonhydrostatic atmospheric dynamical core in the manner of ASUCA (Shimokawabe et al. 2014,
//! section II): the fully compressible equations in flux form over terrain, finite volumes on an
//! Arakawa C grid with Koren-limited fluxes, and HE-VI time splitting (a long Wicker–Skamarock
//! RK3 step for advection; short forward–backward steps for sound and gravity waves, vertically
//! implicit by a Thomas column sweep). Dry, or moist with warm rain. The equations, the
//! coordinates, the discretisation and the test cases are on the `dycore` examples page.
//!
//! The prognostic variables are G-weighted (`G = ∂z/∂ζ`): `R = Gρ`, `U = Gρu`, `V = Gρv`,
//! `W = Gρw`, `Θ = Gρθ` (moist: `R` of moist air, `Θ = Gρθ_ρ`, and the water `Gρq_v`, `Gρq_c`,
//! `Gρq_r`, [`DycoreWater`], [`DycoreRain`]); `Ω = (W − U z_x − V z_y)/G` is the mass flux
//! through ζ surfaces. Every field has the cells' shape ([`HALO`] layers); index `(i, j, k)` of
//! `U` is the face `i + ½`, of `V` the face `j + ½`, of `W` and `Ω` the face `k + ½` (the ground
//! is `k = −1`, in the halo, the lid `k = n_z − 1`), of `z_x` the edge `(i + ½, k + ½)` and of
//! `z_y` the edge `(j + ½, k + ½)`. `wmask` is 1 on the inner `w` faces and 0 at the ground and
//! the lid: the boundary conditions `Ω = 0` are products by it.

use rayon::prelude::*;
use stencil_runtime::io::netcdf::{Axis, Writer};
use stencil_runtime::io::IoElement;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Executor, HaloFill};

use crate::checkpoint::{Error, Plan};
use crate::driver::{self, all, End, Identity, Named, Record, Restart, Spec};
use crate::euler::limited_slope;
use crate::warm_rain::{fall_speed, saturation, warm_rain_point, LV, RV};

/// Halo width of every field (the limited fluxes read two points upstream).
pub const HALO: usize = 2;

/// Steps a run's clock leaves out: the first compiles the kernels.
pub const WARM_UP: usize = 1;
/// Reference pressure of the Exner function, Pa.
pub const P0: f64 = 1.0e5;
/// Gas constant of dry air, J/(kg K).
pub const RD: f64 = 287.0;
/// Specific heat of dry air at constant pressure, J/(kg K).
pub const CP: f64 = 1004.0;
/// Specific heat of dry air at constant volume.
pub const CV: f64 = CP - RD;
/// `c_p / c_v`.
pub const GAMMA: f64 = CP / CV;
/// Gravitational acceleration, m/s².
pub const GRAV: f64 = 9.81;
/// `R_d/R_v`.
pub const EPS: f64 = RD / RV;
/// Total water mixing ratio of the moist bubble, kg/kg.
pub const QT: f64 = 0.02;

/// The Koren-limited value at the face between `c0` and `p1` (`m1` before, `p2` after) upwind
/// for the flux `vel`: `κ = 1/3, β = 2` of [`limited_slope`].
#[stencil_fn]
pub fn koren<T>(m1: T, c0: T, p1: T, p2: T, vel: T) -> T {
    if vel >= 0.0 {
        c0 + 0.5 * limited_slope(c0 - m1, p1 - c0, 1.0 / 3.0, 2.0)
    } else {
        p1 - 0.5 * limited_slope(p2 - p1, p1 - c0, 1.0 / 3.0, 2.0)
    }
}

/// The unlimited third-order upwind value (`κ = 1/3`) at the face between `c0` and `p1` (`m1`
/// before, `p2` after) for the flux `vel`: [`koren`] without its limiter.
#[stencil_fn]
pub fn upwind3<T>(m1: T, c0: T, p1: T, p2: T, vel: T) -> T {
    if vel >= 0.0 {
        c0 + (1.0 / 6.0) * (c0 - m1) + (1.0 / 3.0) * (p1 - c0)
    } else {
        p1 - (1.0 / 6.0) * (p2 - p1) - (1.0 / 3.0) * (p1 - c0)
    }
}

/// The horizontal pressure-gradient force at a `u` (or `v`) face in terrain-following flux form,
/// `−δx(G p) + δζ(z_x p̄)`: `c` holds `p` of the cells `a` (west) and `b` (east) at levels
/// `k − 1, k, k + 1` (`[a₋, b₋, a, b, a₊, b₊]`), `g0`, `g1` their `G`, `zlo`, `zhi` the
/// metric `z_x` at the edges below and above, `inner` is 0 where the edge below is the ground
/// (there `p` is extrapolated linearly from levels `k`, `k + 1`).
#[stencil_fn]
#[allow(clippy::too_many_arguments)]
pub fn pgf<T>(c: [T; 6], g0: T, g1: T, zlo: T, zhi: T, inner: T, rdx: T, rdz: T) -> T {
    let hi = 0.25 * (c[2] + c[3] + c[4] + c[5]);
    let lo_inner = 0.25 * (c[0] + c[1] + c[2] + c[3]);
    let lo_ground = 0.75 * (c[2] + c[3]) - 0.25 * (c[4] + c[5]);
    let lo = inner * lo_inner + (1.0 - inner) * lo_ground;
    -(g1 * c[3] - g0 * c[2]) * rdx + (zhi * hi - zlo * lo) * rdz
}

/// The 7-point Laplacian of `c` from its neighbours (`r*2` = 1/h² per axis).
#[stencil_fn]
#[allow(clippy::too_many_arguments)]
pub fn lap<T>(c: T, xm: T, xp: T, ym: T, yp: T, zm: T, zp: T, r2: [T; 3]) -> T {
    (xm - 2.0 * c + xp) * r2[0] + (ym - 2.0 * c + yp) * r2[1] + (zm - 2.0 * c + zp) * r2[2]
}

/// The pressure of `Θ = Gρθ` at Jacobian `g`: `p = p₀ (R_d Θ / (G p₀))^γ`.
#[stencil_fn]
pub fn pressure<T>(theta: T, g: T) -> T {
    // Module constants are not visible in stencil code: the values of P0, RD and GAMMA.
    const P: T = 1.0e5;
    const R: T = 287.0;
    const EXPONENT: T = 1004.0 / (1004.0 - 287.0);
    P * (R * theta / (g * P)).powf(EXPONENT)
}

/// Diagnostics of a state `s = (R, U, V, W, Θ)` over the cells: `d = (u, v, w, θ, Ω, p)` (each at
/// its field's staggered place). Metrics `m = (G, z_x, z_y, wmask, sponge, p̄, G_w, θ̄)` (`G` of
/// the cells, `G_w` of the `w` faces).
#[stencil(portable_math)]
pub fn dycore_diag<T>(idx: Idx3, s: [&Field3<T>; 5], m: [&Field3<T>; 8], d: [&mut Field3<T>; 6]) {
    let r = s[0][idx];
    let hx = 0.5
        * (m[1][idx] * 0.5 * (s[1][idx] + s[1][idx.ix::<0, 0, 1>()])
            + m[1][idx.ix::<-1, 0, 0>()] * 0.5 * (s[1][idx.ix::<-1, 0, 0>()] + s[1][idx.ix::<-1, 0, 1>()]));
    let hy = 0.5
        * (m[2][idx] * 0.5 * (s[2][idx] + s[2][idx.ix::<0, 0, 1>()])
            + m[2][idx.ix::<0, -1, 0>()] * 0.5 * (s[2][idx.ix::<0, -1, 0>()] + s[2][idx.ix::<0, -1, 1>()]));
    d[0][idx] = s[1][idx] / (0.5 * (r + s[0][idx.ix::<1, 0, 0>()]));
    d[1][idx] = s[2][idx] / (0.5 * (r + s[0][idx.ix::<0, 1, 0>()]));
    d[2][idx] = s[3][idx] / (0.5 * (r + s[0][idx.ix::<0, 0, 1>()]));
    d[3][idx] = s[4][idx] / r;
    d[4][idx] = m[3][idx] * (s[3][idx] - hx - hy) / m[6][idx];
    d[5][idx] = pressure(s[4][idx], m[0][idx]);
}

/// The slow tendencies of the long step, written once for each way of advecting momentum
/// ([`MomentumAdvection`]): `$face` gives a velocity's value at a face.
macro_rules! tendency {
    ($name:ident, $face:ident, $doc:expr) => {
        #[doc = $doc]
        #[stencil]
        #[rustfmt::skip]
        #[allow(clippy::too_many_arguments)]
        pub fn $name<T>(
            idx: Idx3, r: [T; 3], nu: T, grav: T, u_ref: T,
            s: [&Field3<T>; 5], d: [&Field3<T>; 6], m: [&Field3<T>; 8], f: [&mut Field3<T>; 5],
        ) {
            let r2 = [r[0] * r[0], r[1] * r[1], r[2] * r[2]];
            // Scalar fluxes through the upper x, y, z faces of cell p: mass flux × θ at the face, the
            // reference θ̄ centred and the deviation θ − θ̄ limited (a limiter on θ itself clips the
            // stratification along sloping surfaces, and the clipping drives winds in a resting atmosphere).
            let dev = |p: Idx3| d[3][p] - m[7][p];
            let ftx = |p: Idx3| s[1][p] * (0.5 * (m[7][p] + m[7][p.ix::<1, 0, 0>()]) + koren(dev(p.ix::<-1, 0, 0>()), dev(p), dev(p.ix::<1, 0, 0>()), dev(p.ix::<2, 0, 0>()), s[1][p]));
            let fty = |p: Idx3| s[2][p] * (0.5 * (m[7][p] + m[7][p.ix::<0, 1, 0>()]) + koren(dev(p.ix::<0, -1, 0>()), dev(p), dev(p.ix::<0, 1, 0>()), dev(p.ix::<0, 2, 0>()), s[2][p]));
            let ftz = |p: Idx3| d[4][p] * (0.5 * (m[7][p] + m[7][p.ix::<0, 0, 1>()]) + koren(dev(p.ix::<0, 0, -1>()), dev(p), dev(p.ix::<0, 0, 1>()), dev(p.ix::<0, 0, 2>()), d[4][p]));
            // u momentum: x flux at the centre of cell p + x̂, y flux at edge (i+½, j+½), z flux at (i+½, k+½).
            let fux = |p: Idx3| { let mf = 0.5 * (s[1][p] + s[1][p.ix::<1, 0, 0>()]);
                mf * $face(d[0][p.ix::<-1, 0, 0>()], d[0][p], d[0][p.ix::<1, 0, 0>()], d[0][p.ix::<2, 0, 0>()], mf) };
            let fuy = |p: Idx3| { let mf = 0.5 * (s[2][p] + s[2][p.ix::<1, 0, 0>()]);
                mf * $face(d[0][p.ix::<0, -1, 0>()], d[0][p], d[0][p.ix::<0, 1, 0>()], d[0][p.ix::<0, 2, 0>()], mf) };
            let fuz = |p: Idx3| { let mf = 0.5 * (d[4][p] + d[4][p.ix::<1, 0, 0>()]);
                mf * $face(d[0][p.ix::<0, 0, -1>()], d[0][p], d[0][p.ix::<0, 0, 1>()], d[0][p.ix::<0, 0, 2>()], mf) };
            // v momentum.
            let fvx = |p: Idx3| { let mf = 0.5 * (s[1][p] + s[1][p.ix::<0, 1, 0>()]);
                mf * $face(d[1][p.ix::<-1, 0, 0>()], d[1][p], d[1][p.ix::<1, 0, 0>()], d[1][p.ix::<2, 0, 0>()], mf) };
            let fvy = |p: Idx3| { let mf = 0.5 * (s[2][p] + s[2][p.ix::<0, 1, 0>()]);
                mf * $face(d[1][p.ix::<0, -1, 0>()], d[1][p], d[1][p.ix::<0, 1, 0>()], d[1][p.ix::<0, 2, 0>()], mf) };
            let fvz = |p: Idx3| { let mf = 0.5 * (d[4][p] + d[4][p.ix::<0, 1, 0>()]);
                mf * $face(d[1][p.ix::<0, 0, -1>()], d[1][p], d[1][p.ix::<0, 0, 1>()], d[1][p.ix::<0, 0, 2>()], mf) };
            // w momentum: x flux at (i+½, k+½), y flux at (j+½, k+½), z flux at the centre of cell p + ẑ.
            let fwx = |p: Idx3| { let mf = 0.5 * (s[1][p] + s[1][p.ix::<0, 0, 1>()]);
                mf * $face(d[2][p.ix::<-1, 0, 0>()], d[2][p], d[2][p.ix::<1, 0, 0>()], d[2][p.ix::<2, 0, 0>()], mf) };
            let fwy = |p: Idx3| { let mf = 0.5 * (s[2][p] + s[2][p.ix::<0, 0, 1>()]);
                mf * $face(d[2][p.ix::<0, -1, 0>()], d[2][p], d[2][p.ix::<0, 1, 0>()], d[2][p.ix::<0, 2, 0>()], mf) };
            let fwz = |p: Idx3| { let mf = 0.5 * (d[4][p] + d[4][p.ix::<0, 0, 1>()]);
                mf * $face(d[2][p.ix::<0, 0, -1>()], d[2][p], d[2][p.ix::<0, 0, 1>()], d[2][p.ix::<0, 0, 2>()], mf) };
            // p − p̄ of cell p.
            let pp = |p: Idx3| d[5][p] - m[5][p];
            let rho = s[0][idx];
            f[0][idx] = -((s[1][idx] - s[1][idx.ix::<-1, 0, 0>()]) * r[0] + (s[2][idx] - s[2][idx.ix::<0, -1, 0>()]) * r[1]
                + (d[4][idx] - d[4][idx.ix::<0, 0, -1>()]) * r[2]);
            // Diffusion of θ − θ̄ only (along sloping ζ surfaces the stratified θ̄ has a Laplacian of its
            // own, which would heat and cool a resting atmosphere), with no flux through the ground and
            // the lid (`wmask` 0 there).
            let dc = dev(idx);
            let below = dc + m[3][idx.ix::<0, 0, -1>()] * (dev(idx.ix::<0, 0, -1>()) - dc);
            let above = dc + m[3][idx] * (dev(idx.ix::<0, 0, 1>()) - dc);
            let lap_t = lap(dc, dev(idx.ix::<-1, 0, 0>()), dev(idx.ix::<1, 0, 0>()), dev(idx.ix::<0, -1, 0>()),
                dev(idx.ix::<0, 1, 0>()), below, above, r2);
            f[4][idx] = -((ftx(idx) - ftx(idx.ix::<-1, 0, 0>())) * r[0] + (fty(idx) - fty(idx.ix::<0, -1, 0>())) * r[1]
                + (ftz(idx) - ftz(idx.ix::<0, 0, -1>())) * r[2]) + rho * nu * lap_t;
            // U at face i+½.
            let ru = 0.5 * (rho + s[0][idx.ix::<1, 0, 0>()]);
            let cu = [pp(idx.ix::<0, 0, -1>()), pp(idx.ix::<1, 0, -1>()), pp(idx), pp(idx.ix::<1, 0, 0>()),
                pp(idx.ix::<0, 0, 1>()), pp(idx.ix::<1, 0, 1>())];
            let pgf_u = pgf(cu, m[0][idx], m[0][idx.ix::<1, 0, 0>()], m[1][idx.ix::<0, 0, -1>()], m[1][idx],
                m[3][idx.ix::<0, 0, -1>()], r[0], r[2]);
            let lap_u = lap(d[0][idx], d[0][idx.ix::<-1, 0, 0>()], d[0][idx.ix::<1, 0, 0>()], d[0][idx.ix::<0, -1, 0>()],
                d[0][idx.ix::<0, 1, 0>()], d[0][idx.ix::<0, 0, -1>()], d[0][idx.ix::<0, 0, 1>()], r2);
            let sp_u = 0.5 * (m[4][idx] + m[4][idx.ix::<1, 0, 0>()]);
            f[1][idx] = -((fux(idx) - fux(idx.ix::<-1, 0, 0>())) * r[0] + (fuy(idx) - fuy(idx.ix::<0, -1, 0>())) * r[1]
                + (fuz(idx) - fuz(idx.ix::<0, 0, -1>())) * r[2]) + pgf_u + ru * nu * lap_u - sp_u * (s[1][idx] - ru * u_ref);
            // V at face j+½.
            let rv = 0.5 * (rho + s[0][idx.ix::<0, 1, 0>()]);
            let cv = [pp(idx.ix::<0, 0, -1>()), pp(idx.ix::<0, 1, -1>()), pp(idx), pp(idx.ix::<0, 1, 0>()),
                pp(idx.ix::<0, 0, 1>()), pp(idx.ix::<0, 1, 1>())];
            let pgf_v = pgf(cv, m[0][idx], m[0][idx.ix::<0, 1, 0>()], m[2][idx.ix::<0, 0, -1>()], m[2][idx],
                m[3][idx.ix::<0, 0, -1>()], r[1], r[2]);
            let lap_v = lap(d[1][idx], d[1][idx.ix::<-1, 0, 0>()], d[1][idx.ix::<1, 0, 0>()], d[1][idx.ix::<0, -1, 0>()],
                d[1][idx.ix::<0, 1, 0>()], d[1][idx.ix::<0, 0, -1>()], d[1][idx.ix::<0, 0, 1>()], r2);
            let sp_v = 0.5 * (m[4][idx] + m[4][idx.ix::<0, 1, 0>()]);
            f[2][idx] = -((fvx(idx) - fvx(idx.ix::<-1, 0, 0>())) * r[0] + (fvy(idx) - fvy(idx.ix::<0, -1, 0>())) * r[1]
                + (fvz(idx) - fvz(idx.ix::<0, 0, -1>())) * r[2]) + pgf_v + rv * nu * lap_v - sp_v * s[2][idx];
            // W at face k+½ (0 at the ground and the lid).
            let rw = 0.5 * (rho + s[0][idx.ix::<0, 0, 1>()]);
            let lap_w = lap(d[2][idx], d[2][idx.ix::<-1, 0, 0>()], d[2][idx.ix::<1, 0, 0>()], d[2][idx.ix::<0, -1, 0>()],
                d[2][idx.ix::<0, 1, 0>()], d[2][idx.ix::<0, 0, -1>()], d[2][idx.ix::<0, 0, 1>()], r2);
            let sp_w = 0.5 * (m[4][idx] + m[4][idx.ix::<0, 0, 1>()]);
            let adv_w = -((fwx(idx) - fwx(idx.ix::<-1, 0, 0>())) * r[0] + (fwy(idx) - fwy(idx.ix::<0, -1, 0>())) * r[1]
                + (fwz(idx) - fwz(idx.ix::<0, 0, -1>())) * r[2]);
            let pgf_w = -(d[5][idx.ix::<0, 0, 1>()] - d[5][idx]) * r[2] - grav * rw;
            f[3][idx] = m[3][idx] * (adv_w + pgf_w + rw * nu * lap_w - sp_w * s[3][idx]);
        }
    };
}

tendency!(
    dycore_tendency,
    koren,
    "The slow tendencies `f` of `(R, U, V, W, Θ)` at a state (`s`, its diagnostics `d`, metrics \
     `m`): Koren-limited flux-form advection, the pressure-gradient force (of `p − p̄` \
     horizontally) and buoyancy, diffusion `ν ∇²` of `u, v, w, θ` and the Rayleigh sponge (`U`, \
     `V` toward `R u_ref`, `W` toward 0). `r` = `1/Δx, 1/Δy, 1/Δζ`."
);
tendency!(
    dycore_tendency_unlimited,
    upwind3,
    "[`DycoreTendency`] with unlimited third-order upwind momentum fluxes ([`upwind3`]; θ′ still \
     Koren-limited): [`MomentumAdvection::Upwind3`]."
);

/// The start of a stage's short steps: the perturbations `q − s` of the step's start `q` from
/// the stage's state `s`, and no divergence yet.
#[stencil]
pub fn dycore_init<T>(
    idx: Idx3,
    q: [&Field3<T>; 5],
    s: [&Field3<T>; 5],
    pert: [&mut Field3<T>; 5],
    div: &mut Field3<T>,
) {
    for v in 0..5 {
        pert[v][idx] = q[v][idx] - s[v][idx];
    }
    div[idx] = 0.0;
}

/// Forward step of the horizontal momentum perturbations `U''`, `V''`: slow tendency, the
/// pressure gradient of `p'' = c² Θ''` (`c² = γ p/Θ` of the stage state) and divergence
/// damping `k_d δ(D)` (`kd` per axis, `D` the last short step's mass divergence).
#[stencil]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_horizontal<T>(
    idx: Idx3, gamma: T, dtau: T, r: [T; 3], kd: [T; 2], theta_s: &Field3<T>, p_s: &Field3<T>,
    theta2: &Field3<T>, div: &Field3<T>, fu: &Field3<T>, fv: &Field3<T>, m: [&Field3<T>; 8],
    u2: &mut Field3<T>, v2: &mut Field3<T>,
) {
    let pp = |p: Idx3| gamma * p_s[p] / theta_s[p] * theta2[p];
    let cu = [pp(idx.ix::<0, 0, -1>()), pp(idx.ix::<1, 0, -1>()), pp(idx), pp(idx.ix::<1, 0, 0>()),
        pp(idx.ix::<0, 0, 1>()), pp(idx.ix::<1, 0, 1>())];
    let cv = [pp(idx.ix::<0, 0, -1>()), pp(idx.ix::<0, 1, -1>()), pp(idx), pp(idx.ix::<0, 1, 0>()),
        pp(idx.ix::<0, 0, 1>()), pp(idx.ix::<0, 1, 1>())];
    let inner = m[3][idx.ix::<0, 0, -1>()];
    let pu = pgf(cu, m[0][idx], m[0][idx.ix::<1, 0, 0>()], m[1][idx.ix::<0, 0, -1>()], m[1][idx], inner, r[0], r[2]);
    let pv = pgf(cv, m[0][idx], m[0][idx.ix::<0, 1, 0>()], m[2][idx.ix::<0, 0, -1>()], m[2][idx], inner, r[1], r[2]);
    u2[idx] = u2[idx] + dtau * (fu[idx] + pu + kd[0] * (div[idx.ix::<1, 0, 0>()] - div[idx]));
    v2[idx] = v2[idx] + dtau * (fv[idx] + pv + kd[1] * (div[idx.ix::<0, 1, 0>()] - div[idx]));
}

/// The explicit part of a short step's vertical solve: `e = (R̃, Θ̃, W̃)`, the new `R''` and
/// `Θ''` without the implicit vertical flux `α W''`, and the right-hand side of `W''`'s
/// equation. `α = (1 + β)/2` weighs the new level (`β` the off-centering).
#[stencil]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_explicit<T>(
    idx: Idx3, gamma: T, dtau: T, alpha: T, r: [T; 3], grav: T, theta_s: &Field3<T>, d: [&Field3<T>; 6],
    pert: [&Field3<T>; 5], f: [&Field3<T>; 5], m: [&Field3<T>; 8], e: [&mut Field3<T>; 3],
) {
    // U'' z_x + V'' z_y at the w face of cell p, from the edges.
    let h = |p: Idx3| 0.5 * (m[1][p] * 0.5 * (pert[1][p] + pert[1][p.ix::<0, 0, 1>()])
        + m[1][p.ix::<-1, 0, 0>()] * 0.5 * (pert[1][p.ix::<-1, 0, 0>()] + pert[1][p.ix::<-1, 0, 1>()]))
        + 0.5 * (m[2][p] * 0.5 * (pert[2][p] + pert[2][p.ix::<0, 0, 1>()])
        + m[2][p.ix::<0, -1, 0>()] * 0.5 * (pert[2][p.ix::<0, -1, 0>()] + pert[2][p.ix::<0, -1, 1>()]));
    // The explicit mass flux through the w face of cell p (0 at the ground and the lid).
    let em = |p: Idx3| m[3][p] * ((1.0 - alpha) * pert[3][p] - h(p)) / m[6][p];
    let tw = |p: Idx3| 0.5 * (d[3][p] + d[3][p.ix::<0, 0, 1>()]);
    let tu = |p: Idx3| 0.5 * (d[3][p] + d[3][p.ix::<1, 0, 0>()]) * pert[1][p];
    let tv = |p: Idx3| 0.5 * (d[3][p] + d[3][p.ix::<0, 1, 0>()]) * pert[2][p];
    let pp = |p: Idx3| gamma * d[5][p] / theta_s[p] * pert[4][p];
    e[0][idx] = pert[0][idx] + dtau * (f[0][idx] - (pert[1][idx] - pert[1][idx.ix::<-1, 0, 0>()]) * r[0]
        - (pert[2][idx] - pert[2][idx.ix::<0, -1, 0>()]) * r[1] - (em(idx) - em(idx.ix::<0, 0, -1>())) * r[2]);
    e[1][idx] = pert[4][idx] + dtau * (f[4][idx] - (tu(idx) - tu(idx.ix::<-1, 0, 0>())) * r[0]
        - (tv(idx) - tv(idx.ix::<0, -1, 0>())) * r[1] - (tw(idx) * em(idx) - tw(idx.ix::<0, 0, -1>()) * em(idx.ix::<0, 0, -1>())) * r[2]);
    let old = (pp(idx.ix::<0, 0, 1>()) - pp(idx)) * r[2] + grav * 0.5 * (pert[0][idx] + pert[0][idx.ix::<0, 0, 1>()]);
    e[2][idx] = m[3][idx] * (pert[3][idx] + dtau * (f[3][idx] - (1.0 - alpha) * old));
}

/// The upward elimination of the Thomas algorithm for `W''` of every inner w face (the
/// equation at the lid is `W'' = 0`): the tridiagonal system of the docs page, its rows
/// built here from the stage state and `e`, `c'` and `d'` carried.
#[stencil(sweep = forward)]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_eliminate<T>(
    idx: Idx3, gamma: T, dtau: T, alpha: T, rdz: T, grav: T, theta_s: &Field3<T>, d: [&Field3<T>; 6],
    e: [&Field3<T>; 3], m: [&Field3<T>; 8], cp: &mut Field3<T>, dp: &mut Field3<T>,
) {
    #[carry]
    let mut c_below = 0.0;
    #[carry]
    let mut d_below = 0.0;
    // `a` of this face, the face above and the face below: the implicit `Ω'' = α W''/G_w`.
    let b = dtau * alpha * rdz;
    let (a, a_above, a_below) = (b / m[6][idx], b / m[6][idx.ix(0, 0, 1)], b / m[6][idx.ix(0, 0, -1)]);
    let eg = 0.5 * dtau * alpha * grav;
    let c2 = gamma * d[5][idx] / theta_s[idx];
    let c2u = gamma * d[5][idx.ix(0, 0, 1)] / theta_s[idx.ix(0, 0, 1)];
    let tw = 0.5 * (d[3][idx] + d[3][idx.ix(0, 0, 1)]);
    let tw_below = 0.5 * (d[3][idx.ix(0, 0, -1)] + d[3][idx]);
    let tw_above = 0.5 * (d[3][idx.ix(0, 0, 1)] + d[3][idx.ix(0, 0, 2)]);
    let (mk, mb, ma) = (m[3][idx], m[3][idx.ix(0, 0, -1)], m[3][idx.ix(0, 0, 1)]);
    let upper = mk * ma * (-b * c2u * a_above * tw_above - eg * a_above);
    let diag = 1.0 + mk * b * a * tw * (c2u + c2);
    let lower = mk * mb * (-b * c2 * a_below * tw_below + eg * a_below);
    let rhs = mk * (e[2][idx] - b * (c2u * e[1][idx.ix(0, 0, 1)] - c2 * e[1][idx])
        - eg * (e[0][idx.ix(0, 0, 1)] + e[0][idx]));
    let pivot = diag - lower * c_below;
    c_below = upper / pivot;
    d_below = (rhs - lower * d_below) / pivot;
    cp[idx] = c_below;
    dp[idx] = d_below;
}

/// Back substitution from the lid down: `W''[k] = d'[k] − c'[k] W''[k + 1]`.
#[stencil(sweep = backward)]
pub fn dycore_substitute<T>(idx: Idx3, cp: &Field3<T>, dp: &Field3<T>, w2: &mut Field3<T>) {
    #[carry]
    let mut above = 0.0;
    above = dp[idx] - cp[idx] * above;
    w2[idx] = above;
}

/// The end of a short step: `R''` and `Θ''` from `e` and the implicit vertical fluxes of the
/// new `W''`, and the step's mass divergence `D = (R''_old − R''_new)/Δτ` for the damping.
#[stencil]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_finish<T>(
    idx: Idx3, dtau: T, alpha: T, rdz: T, theta: &Field3<T>, w2: &Field3<T>, e: [&Field3<T>; 3],
    m: [&Field3<T>; 8], r2: &mut Field3<T>, t2: &mut Field3<T>, div: &mut Field3<T>,
) {
    let a = dtau * alpha * rdz;
    let fm = |p: Idx3| m[3][p] * w2[p] / m[6][p];
    let ft = |p: Idx3| m[3][p] * 0.5 * (theta[p] + theta[p.ix::<0, 0, 1>()]) * w2[p] / m[6][p];
    let rho = e[0][idx] - a * (fm(idx) - fm(idx.ix::<0, 0, -1>()));
    div[idx] = (r2[idx] - rho) / dtau;
    r2[idx] = rho;
    t2[idx] = e[1][idx] - a * (ft(idx) - ft(idx.ix::<0, 0, -1>()));
}

/// The end of a stage: `out = s + pert`.
#[stencil]
pub fn dycore_commit<T>(idx: Idx3, s: [&Field3<T>; 5], pert: [&Field3<T>; 5], out: [&mut Field3<T>; 5]) {
    for v in 0..5 {
        out[v][idx] = s[v][idx] + pert[v][idx];
    }
}

/// The specific contents `c = Q/R` of the water species (`w` = `(Gρq_v, Gρq_c, Gρq_r)`) of a
/// stage state: what the mass fluxes carry.
#[stencil]
pub fn dycore_ratio<T>(idx: Idx3, r: &Field3<T>, w: [&Field3<T>; 3], c: [&mut Field3<T>; 3]) {
    for v in 0..3 {
        c[v][idx] = w[v][idx] / r[idx];
    }
}

/// After each short step, the sum over the stage's short steps so far (`first` = 0 restarts it)
/// of the perturbation mass fluxes `U''`, `V''` and `(W'' − U'' z_x − V'' z_y)/G` (0 at the
/// ground and the lid).
#[stencil]
#[rustfmt::skip]
pub fn dycore_flux<T>(idx: Idx3, first: T, pert: [&Field3<T>; 5], m: [&Field3<T>; 8], acc: [&mut Field3<T>; 3]) {
    let h = 0.5 * (m[1][idx] * 0.5 * (pert[1][idx] + pert[1][idx.ix::<0, 0, 1>()])
        + m[1][idx.ix::<-1, 0, 0>()] * 0.5 * (pert[1][idx.ix::<-1, 0, 0>()] + pert[1][idx.ix::<-1, 0, 1>()]))
        + 0.5 * (m[2][idx] * 0.5 * (pert[2][idx] + pert[2][idx.ix::<0, 0, 1>()])
        + m[2][idx.ix::<0, -1, 0>()] * 0.5 * (pert[2][idx.ix::<0, -1, 0>()] + pert[2][idx.ix::<0, -1, 1>()]));
    acc[0][idx] = first * acc[0][idx] + pert[1][idx];
    acc[1][idx] = first * acc[1][idx] + pert[2][idx];
    acc[2][idx] = first * acc[2][idx] + m[3][idx] * (pert[3][idx] - h) / m[6][idx];
}

/// The end of a stage for the water: `out = wq − dt ∇·(F c)` (`wq` at the step's start, `c` of
/// the stage state, Koren-limited upwind for `F`), `F` the mass flux the density saw: the stage
/// state's (`u`, `v`, `omega`) plus the short steps' mean (`rn` = 1/n times `acc`, corrected for
/// the off-centering by `(1 − α)` times the first `W''` (`w_start − w_stage`) less the last).
/// A uniform `c` stays uniform to round-off.
#[stencil]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_water<T>(
    idx: Idx3, dt: T, rn: T, alpha: T, r: [T; 3], u: &Field3<T>, v: &Field3<T>, omega: &Field3<T>,
    w_end: &Field3<T>, w_start: &Field3<T>, w_stage: &Field3<T>, m: [&Field3<T>; 8], acc: [&Field3<T>; 3],
    c: [&Field3<T>; 3], wq: [&Field3<T>; 3], out: [&mut Field3<T>; 3],
) {
    let fx = |p: Idx3| { let f = u[p] + rn * acc[0][p];
        [f * koren(c[0][p.ix::<-1, 0, 0>()], c[0][p], c[0][p.ix::<1, 0, 0>()], c[0][p.ix::<2, 0, 0>()], f),
         f * koren(c[1][p.ix::<-1, 0, 0>()], c[1][p], c[1][p.ix::<1, 0, 0>()], c[1][p.ix::<2, 0, 0>()], f),
         f * koren(c[2][p.ix::<-1, 0, 0>()], c[2][p], c[2][p.ix::<1, 0, 0>()], c[2][p.ix::<2, 0, 0>()], f)] };
    let fy = |p: Idx3| { let f = v[p] + rn * acc[1][p];
        [f * koren(c[0][p.ix::<0, -1, 0>()], c[0][p], c[0][p.ix::<0, 1, 0>()], c[0][p.ix::<0, 2, 0>()], f),
         f * koren(c[1][p.ix::<0, -1, 0>()], c[1][p], c[1][p.ix::<0, 1, 0>()], c[1][p.ix::<0, 2, 0>()], f),
         f * koren(c[2][p.ix::<0, -1, 0>()], c[2][p], c[2][p.ix::<0, 1, 0>()], c[2][p.ix::<0, 2, 0>()], f)] };
    let fz = |p: Idx3| {
        let f = omega[p] + rn * (acc[2][p] - (1.0 - alpha) * m[3][p] * (w_end[p] - w_start[p] + w_stage[p]) / m[6][p]);
        [f * koren(c[0][p.ix::<0, 0, -1>()], c[0][p], c[0][p.ix::<0, 0, 1>()], c[0][p.ix::<0, 0, 2>()], f),
         f * koren(c[1][p.ix::<0, 0, -1>()], c[1][p], c[1][p.ix::<0, 0, 1>()], c[1][p.ix::<0, 0, 2>()], f),
         f * koren(c[2][p.ix::<0, 0, -1>()], c[2][p], c[2][p.ix::<0, 0, 1>()], c[2][p.ix::<0, 0, 2>()], f)] };
    let (east, west, north, south) = (fx(idx), fx(idx.ix::<-1, 0, 0>()), fy(idx), fy(idx.ix::<0, -1, 0>()));
    let (top, bottom) = (fz(idx), fz(idx.ix::<0, 0, -1>()));
    for s in 0..3 {
        out[s][idx] = wq[s][idx] - dt * ((east[s] - west[s]) * r[0] + (north[s] - south[s]) * r[1] + (top[s] - bottom[s]) * r[2]);
    }
}

/// Warm rain over a long step `dt`, in place, from the lid down ([`warm_rain_point`] at every
/// cell; `rain` 0: saturation adjustment only) on `R`, `Θ = Gρθ_ρ` and the water `w`: rain falls
/// as an upwind flux, its mass leaving `R`, and what leaves the lowest cell adds to `ground`
/// (kg/m²). Latent heat warms θ at the cell's pressure; the dry air `R − ΣQ` of each cell stays.
#[stencil(sweep = backward, portable_math)]
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
pub fn dycore_rain<T>(
    idx: Idx3, dt: T, rdz: T, rain: T, g: &Field3<T>, r: &mut Field3<T>, t: &mut Field3<T>,
    w: [&mut Field3<T>; 3], ground: &mut Field3<T>,
) {
    #[carry]
    let mut above = 0.0;
    // R_d/R_v and R_d/c_p (module constants are not visible in stencil code).
    let (eps, kappa) = (287.0 / 461.5, 287.0 / 1004.0);
    let dry = r[idx] - (w[0][idx] + w[1][idx] + w[2][idx]);
    let (qv, qc, qr) = (w[0][idx] / dry, w[1][idx] / dry, w[2][idx] / dry);
    let theta = t[idx] / r[idx] * (1.0 + qv + qc + qr) / (1.0 + qv / eps);
    let p = pressure(t[idx], g[idx]);
    let pi = (p / 1.0e5).powf(kappa);
    let (temp, vapour, cloud, rain_water) = warm_rain_point(dt, p, rain, theta * pi, qv, qc, qr);
    let density = dry / g[idx];
    let flux = density * rain_water * fall_speed(density, rain_water);
    let fallen = rain_water + dt * (above - flux) * rdz / dry;
    above = flux;
    let total = 1.0 + vapour + cloud + fallen;
    w[0][idx] = dry * vapour;
    w[1][idx] = dry * cloud;
    w[2][idx] = dry * fallen;
    r[idx] = dry * total;
    t[idx] = dry * temp / pi * (1.0 + vapour / eps);
    let bottom = if idx.level() + 1 == idx.levels() { 1.0 } else { 0.0 };
    ground[idx] = ground[idx] + bottom * dt * flux;
}

/// [`Field3::from_fn`] over the host's threads, a plane of storage per task, written in place
/// (`f` is pure: the same values). The shape's order is `Ijk`, the model's.
fn par_field(shape: Shape3, f: impl Fn([isize; 3]) -> f64 + Sync) -> Field3<f64> {
    let ([ex, ey, ez], [unit, pitch, plane]) = (shape.extent(), shape.strides());
    assert!(unit == 1 && pitch >= ex && plane >= pitch * ey, "an Ijk shape: {}", shape.describe());
    let mut field = Field3::zeros(shape);
    let storage = &mut field.as_mut_slice()[shape.lead()..];
    storage.par_chunks_mut(plane).take(ez).enumerate().for_each(|(k, values)| {
        for j in 0..ey {
            for i in 0..ex {
                values[j * pitch + i] = f(shape.to_global([i, j, k]));
            }
        }
    });
    field
}

/// The terrain under one column: its height and (SLEVE) its smoothed height, m.
#[derive(Clone, Copy, Debug)]
struct Column {
    zs: f64,
    large: f64,
}

/// The test cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// Straka et al. (1993) density current: a cold bubble in a neutral atmosphere, ν = 75 m²/s.
    Straka,
    /// A warm bubble rising in a neutral atmosphere (Bryan and Fritsch 2002, dry).
    Bubble,
    /// A stratified atmosphere at rest (N = 0.01/s) over steep terrain.
    Rest,
    /// Schär et al. (2002) mountain wave: U = 10 m/s over the 250 m Schär mountain, N = 0.01/s.
    MountainWave,
    /// The moist bubble of Bryan and Fritsch (2002): the warm bubble's buoyancy in a saturated,
    /// moist-neutral atmosphere (θ_e = 320 K, total water 0.02) with cloud water everywhere.
    MoistBubble,
}

/// The lateral boundary condition of an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lateral {
    /// Periodic.
    Periodic,
    /// Open: zero-gradient halos.
    Open,
}

/// The terrain-following vertical coordinate: the height `z(x, y, ζ)` of the coordinate surface
/// `ζ` (the ground at `ζ = 0`, the lid at `ζ = H`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Coordinate {
    /// Gal-Chen and Somerville (1975): `z = ζ + z_s (1 − ζ/H)`; the terrain's every scale
    /// reaches the lid.
    GalChen,
    /// SLEVE (Schär et al. 2002): `z = ζ + h₁ b₁(ζ) + h₂ b₂(ζ)`, `b_i = sinh((H − ζ)/s_i) /
    /// sinh(H/s_i)`; `h₁` the terrain smoothed (a Gaussian of [`SLEVE_SMOOTHING`] m), `h₂` the
    /// rest, decaying over [`SLEVE_SCALES`]: small-scale terrain leaves the coordinate surfaces
    /// within a few km of the ground.
    Sleve,
}

/// The reference pressure `p̄` of the horizontal pressure gradient, which acts on `p − p̄`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reference {
    /// The background sounding in the discrete hydrostatic balance of each column (the initial
    /// pressure): a resting atmosphere over any terrain is an exact discrete equilibrium.
    Discrete,
    /// The background sounding's analytic pressure at each cell's height: the balance's
    /// truncation error, which varies along sloping coordinate surfaces, drives winds.
    Analytic,
    /// No reference: the full pressure (the large hydrostatic part enters the difference of two
    /// big terms over sloping coordinate surfaces).
    None,
}

/// The element type the fields compute in (the set-up on the host, the diagnostics and the
/// output are `f64` either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    /// Double precision.
    F64,
    /// Single precision: half the bytes of `f64`.
    F32,
}

/// The decay heights `(s₁, s₂)` of the SLEVE coordinate's large- and small-scale terrain, m
/// (Schär et al. 2002).
pub const SLEVE_SCALES: (f64, f64) = (15_000.0, 2_500.0);
/// The standard deviation of the Gaussian that smooths the terrain into the SLEVE coordinate's
/// large-scale part, m.
pub const SLEVE_SMOOTHING: f64 = 2_000.0;

/// A run's settings: grid, case and numerics.
#[derive(Clone, Debug, PartialEq)]
pub struct Dycore {
    /// The test case.
    pub case: Case,
    /// Cells per axis (x, y, z).
    pub n: [usize; 3],
    /// Cell size per axis (Δx, Δy, Δζ), m.
    pub h: [f64; 3],
    /// The long time step, s.
    pub dt: f64,
    /// Short steps per long step (a multiple of 6 keeps the stage lengths exact).
    pub sound_steps: usize,
    /// Off-centering β of the vertically implicit solve (new level weighted `(1 + β)/2`).
    pub beta: f64,
    /// Divergence damping coefficient (dimensionless; `k_d = c Δx²/Δτ`).
    pub div_damp: f64,
    /// Diffusivity of `u, v, w, θ`, m²/s.
    pub nu: f64,
    /// The Rayleigh sponge: its depth below the lid (m) and its rate at the lid (1/s).
    pub sponge: (f64, f64),
    /// The wind the sponge relaxes `u` toward, m/s.
    pub u_ref: f64,
    /// Lateral boundary along x and y.
    pub lateral: [Lateral; 2],
    /// The pressure the horizontal pressure gradient subtracts first.
    pub reference: Reference,
    /// Terrain height amplitude, m (the Schär mountain of [`Case::Rest`] and [`Case::MountainWave`]).
    pub mountain: f64,
    /// The vertical coordinate over terrain.
    pub coordinate: Coordinate,
    /// Rain in a moist run: Kessler's autoconversion, accretion and fall (else a saturation
    /// adjustment only, Bryan and Fritsch's reversible set-up).
    pub rain: bool,
    /// The fields' element type.
    pub precision: Precision,
    /// How the long step advects momentum.
    pub momentum: MomentumAdvection,
}

/// How the long step advects momentum (θ and water stay Koren-limited).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MomentumAdvection {
    /// Koren-limited third-order upwind fluxes (ASUCA's choice; the default).
    Koren,
    /// Unlimited third-order upwind (`κ = 1/3`): no clipping at a wave's crests and troughs, so
    /// smooth flows keep their amplitude (the mountain wave's error against the finite-amplitude
    /// solution falls from 12.9 % to 11.5 % at 500 m); overshoots at sharp fronts are not limited.
    Upwind3,
}

/// The state's fields in checkpoints and snapshots.
pub const FIELDS: [&str; 5] = ["rho_g", "rho_u_g", "rho_v_g", "rho_w_g", "rho_theta_g"];
/// The water's fields of a moist run, after [`FIELDS`]: `Gρq_v`, `Gρq_c`, `Gρq_r` and the rain
/// that reached the ground (kg/m², at level 0).
pub const WATER: [&str; 4] = ["rho_qv_g", "rho_qc_g", "rho_qr_g", "rain_ground"];

impl Dycore {
    /// A case at horizontal spacing `dx` (m) with its published domain and settings; `ny` cells
    /// across (1: a vertical slice). Errors name what does not fit.
    pub fn new(case: Case, dx: f64, ny: usize) -> Result<Self, Error> {
        if !(dx.is_finite() && dx > 0.0) {
            return Err(format!("the grid spacing must be positive, not {dx}").into());
        }
        // Domain (x, z) in m, Δz / Δx, diffusivity, sponge.
        let (lx, lz, dz_per_dx, nu, sponge, mountain) = match case {
            Case::Straka => (51_200.0, 6_400.0, 1.0, 75.0, (0.0, 0.0), 0.0),
            Case::Bubble | Case::MoistBubble => (20_000.0, 10_000.0, 1.0, 0.0, (0.0, 0.0), 0.0),
            Case::Rest => (40_000.0, 20_000.0, 0.5, 0.0, (5_000.0, 0.05), 1_000.0),
            Case::MountainWave => (200_000.0, 21_600.0, 0.6, 0.0, (10_800.0, 0.01), 250.0),
        };
        let dz = dx * dz_per_dx;
        let (nx, nz) = ((lx / dx).round() as usize, (lz / dz).round() as usize);
        if (nx as f64 * dx - lx).abs() > 1e-6 * lx || (nz as f64 * dz - lz).abs() > 1e-6 * lz {
            return Err(format!(
                "--dx {dx} m does not divide the {case:?} domain of {lx} m × {lz} m into whole cells (Δz = {dz} m)"
            )
            .into());
        }
        if nx < 2 * HALO || nz < 2 * HALO || ny == 0 {
            let (cells, min) = (format!("{nx} × {ny} × {nz} cells"), 2 * HALO);
            return Err(format!("--dx {dx} m leaves {cells}: need at least {min} along x and z, 1 along y").into());
        }
        // Δt from the sound speed: forward–backward short steps at Courant number 0.5.
        let sound_steps = 6;
        Ok(Dycore {
            case,
            n: [nx, ny, nz],
            h: [dx, dx, dz],
            dt: sound_steps as f64 * 0.5 * dx / 350.0,
            sound_steps,
            beta: 0.2,
            div_damp: 0.1,
            nu,
            sponge,
            u_ref: if case == Case::MountainWave { 10.0 } else { 0.0 },
            lateral: [Lateral::Periodic, if ny >= HALO { Lateral::Periodic } else { Lateral::Open }],
            reference: Reference::Discrete,
            mountain,
            coordinate: if case == Case::MountainWave { Coordinate::Sleve } else { Coordinate::GalChen },
            rain: false,
            precision: Precision::F64,
            momentum: MomentumAdvection::Koren,
        })
    }

    /// The same case with vertical spacing `dz` (m) instead of the case's: an error unless it
    /// divides the domain's height into at least `2 HALO` cells.
    pub fn with_dz(mut self, dz: f64) -> Result<Self, Error> {
        let lz = self.top();
        let nz = (lz / dz).round() as usize;
        if !(dz.is_finite() && dz > 0.0) || (nz as f64 * dz - lz).abs() > 1e-6 * lz || nz < 2 * HALO {
            return Err(
                format!("--dz {dz} m does not divide the {:?} domain's {lz} m into whole cells", self.case).into()
            );
        }
        (self.n[2], self.h[2]) = (nz, dz);
        Ok(self)
    }

    /// Whether the run carries water.
    pub fn moist(&self) -> bool {
        self.case == Case::MoistBubble
    }

    /// The fields' shape: `n` cells and a halo of [`HALO`].
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n).halo(HALO)
    }

    /// The height of the lid, m.
    pub fn top(&self) -> f64 {
        self.n[2] as f64 * self.h[2]
    }

    /// The centre `x` of cell `i` (the domain is centred on 0 in x and y).
    pub(crate) fn x(&self, i: isize, axis: usize) -> f64 {
        (i as f64 + 0.5 - 0.5 * self.n[axis] as f64) * self.h[axis]
    }

    /// The terrain height at `(x, y)`: the Schär et al. (2002) mountain, `h₀ exp(−(x/a)²)
    /// cos²(πx/λ)`, a = 5 km, λ = 4 km (times `exp(−(y/a)²)` in 3D); 0 over flat cases.
    pub fn terrain(&self, x: f64, y: f64) -> f64 {
        if self.mountain == 0.0 {
            return 0.0; // the bits of the product below, without its exp and cos
        }
        let a = 5_000.0;
        let across = if self.n[1] > 1 { (-(y / a).powi(2)).exp() } else { 1.0 };
        self.mountain * (-(x / a).powi(2)).exp() * (std::f64::consts::PI * x / 4_000.0).cos().powi(2) * across
    }

    /// The height of coordinate surface `zeta` over `(x, y)`, m.
    pub fn height(&self, x: f64, y: f64, zeta: f64) -> f64 {
        self.height_over(self.column(x, y), zeta)
    }

    /// The terrain under `(x, y)`: its height, and its smoothed height for SLEVE.
    fn column(&self, x: f64, y: f64) -> Column {
        let zs = self.terrain(x, y);
        let large = if self.coordinate == Coordinate::Sleve { self.smoothed_terrain(x, y) } else { 0.0 };
        Column { zs, large }
    }

    /// The terrain under the column of cell `g`.
    fn column_of(&self, g: [isize; 3]) -> Column {
        self.column(self.x(g[0], 0), self.x(g[1], 1))
    }

    /// [`Dycore::height`] over the terrain `c`.
    fn height_over(&self, c: Column, zeta: f64) -> f64 {
        let (top, Column { zs, large }) = (self.top(), c);
        match self.coordinate {
            Coordinate::GalChen => zs + zeta * (1.0 - zs / top),
            Coordinate::Sleve => {
                let b = |s: f64| ((top - zeta) / s).sinh() / (top / s).sinh();
                zeta + large * b(SLEVE_SCALES.0) + (zs - large) * b(SLEVE_SCALES.1)
            }
        }
    }

    /// The terrain smoothed by a Gaussian of [`SLEVE_SMOOTHING`] (along x, and y in 3D).
    fn smoothed_terrain(&self, x: f64, y: f64) -> f64 {
        let (sigma, reach) = (SLEVE_SMOOTHING, if self.n[1] > 1 { 6 } else { 0 });
        let (mut sum, mut weights) = (0.0, 0.0);
        for a in -6..=6 {
            for b in -reach..=reach {
                let weight = (-((a * a + b * b) as f64) / 8.0).exp();
                sum += weight * self.terrain(x + a as f64 * 0.5 * sigma, y + b as f64 * 0.5 * sigma);
                weights += weight;
            }
        }
        sum / weights
    }

    /// The Jacobian `G = ∂z/∂ζ` of cell `g` (`face`: of its top `w` face), discrete: the height
    /// difference of the cell's faces (of the cell centres around the face) over `Δζ`, so that
    /// the pressure gradient of a constant pressure vanishes exactly.
    pub fn jacobian(&self, g: [isize; 3], face: bool) -> f64 {
        self.jacobian_over(self.column_of(g), g[2], face)
    }

    /// [`Dycore::jacobian`] of level `k` over the terrain `c`.
    fn jacobian_over(&self, c: Column, k: isize, face: bool) -> f64 {
        if self.coordinate == Coordinate::GalChen {
            return 1.0 - c.zs / self.top();
        }
        let (dz, zeta) = (self.h[2], (k as f64 + if face { 1.5 } else { 1.0 }) * self.h[2]);
        (self.height_over(c, zeta) - self.height_over(c, zeta - dz)) / dz
    }

    /// The height of the centre of cell `g`, m.
    pub fn cell_height(&self, g: [isize; 3]) -> f64 {
        self.height_over(self.column_of(g), (g[2] as f64 + 0.5) * self.h[2])
    }

    /// The background potential temperature and Exner function at height `z`.
    pub fn background(&self, z: f64) -> (f64, f64) {
        let theta0 = 300.0;
        match self.case {
            Case::Rest | Case::MountainWave => {
                let n2 = 1.0e-4;
                let pi = 1.0 + GRAV * GRAV / (CP * theta0 * n2) * ((-n2 * z / GRAV).exp() - 1.0);
                (theta0 * (n2 * z / GRAV).exp(), pi)
            }
            _ => (theta0, 1.0 - GRAV * z / (CP * theta0)),
        }
    }

    /// The perturbation of θ at `(x, z)`, K (`pi` the background Exner there).
    pub fn perturbation(&self, x: f64, z: f64, pi: f64) -> f64 {
        let bump = |l: f64| if l < 1.0 { (std::f64::consts::FRAC_PI_2 * l).cos().powi(2) } else { 0.0 };
        match self.case {
            Case::Straka => -15.0 * bump(((x / 4_000.0).powi(2) + ((z - 3_000.0) / 2_000.0).powi(2)).sqrt()) / pi,
            Case::Bubble | Case::MoistBubble => {
                2.0 * bump(((x / 2_000.0).powi(2) + ((z - 2_000.0) / 2_000.0).powi(2)).sqrt())
            }
            Case::Rest | Case::MountainWave => 0.0,
        }
    }

    /// The initial state `(R, U, V, W, Θ)` (the water dropped) and the metrics of
    /// [`Dycore::initial_all`].
    pub fn initial(&self) -> ([Field3<f64>; 5], [Field3<f64>; 8]) {
        let (mut q, m) = self.initial_all();
        (std::array::from_fn(|_| q.remove(0)), m)
    }

    /// The initial state `(R, U, V, W, Θ)` (and [`WATER`] when moist) and the metrics `(G, z_x,
    /// z_y, wmask, sponge, p̄, G_w, θ̄)` on the host, halos included (`θ̄` the background θ, θ_ρ
    /// when moist: the part the advection does not limit). Each column is in discrete hydrostatic
    /// balance with the background θ; the perturbation changes the density at fixed pressure.
    pub fn initial_all(&self) -> (Vec<Field3<f64>>, [Field3<f64>; 8]) {
        let shape = self.shape();
        let ([ex, ey, _], h) = (shape.extent(), HALO as isize);
        let (top, dz) = (self.top(), self.h[2]);
        // The terrain of every column once (SLEVE smooths it over 13 or 169 points).
        let table: Vec<Column> = (0..ex * ey)
            .into_par_iter()
            .map(|c| self.column_of([(c % ex) as isize - h, (c / ex) as isize - h, 0]))
            .collect();
        let col = |g: [isize; 3]| {
            let [i, j] = [g[0] + h, g[1] + h];
            let inside = (0..ex as isize).contains(&i) && (0..ey as isize).contains(&j);
            if inside {
                table[i as usize + j as usize * ex]
            } else {
                self.column_of(g)
            }
        };
        let zs = |g: [isize; 3]| col(g).zs;
        let jac = |g: [isize; 3]| self.jacobian_over(col(g), g[2], false);
        let height = |g: [isize; 3]| self.height_over(col(g), (g[2] as f64 + 0.5) * dz);
        // p of every level of the column through `g` by Newton on the discrete balance
        // (p_k − p_{k−1})/Δζ = −g (R_{k−1} + R_k)/2.
        let column = |g: [isize; 3]| -> Vec<f64> {
            let levels = self.n[2] as isize + 2 * HALO as isize;
            let rho = |p: f64, z: f64| (p / P0).powf(1.0 / GAMMA) * P0 / (RD * self.background(z).0);
            let at = |k: isize| height([g[0], g[1], k - HALO as isize]);
            let mut p = vec![P0 * self.background(at(0)).1.powf(CP / RD)];
            for k in 1..levels {
                let (below, z) = (p[k as usize - 1], at(k));
                let cell = |k: isize| [g[0], g[1], k - HALO as isize];
                let (g_here, r_below) = (jac(cell(k)), jac(cell(k - 1)) * rho(below, at(k - 1)));
                // Thirty iterations at most; an iterate the step leaves unchanged would stay so.
                let mut x = below;
                for _ in 0..30 {
                    let r = g_here * rho(x, z);
                    let f = x - below + dz * GRAV * 0.5 * (r_below + r);
                    let next = x - f / (1.0 + dz * GRAV * 0.5 * r / (GAMMA * x));
                    if next == x {
                        break;
                    }
                    x = next;
                }
                p.push(x);
            }
            p
        };
        // Every column (halo included) at once on the host's threads.
        let columns: Vec<Vec<f64>> =
            (0..ex * ey).into_par_iter().map(|c| column([(c % ex) as isize - h, (c / ex) as isize - h, 0])).collect();
        let p = par_field(shape, |g| columns[(g[0] + h) as usize + (g[1] + h) as usize * ex][(g[2] + h) as usize]);
        let rho_theta = |g: [isize; 3]| (p.get(g).unwrap() / P0).powf(1.0 / GAMMA) * P0 / RD;
        let r = par_field(shape, |g| {
            let z = height(g);
            let pi = (p.get(g).unwrap() / P0).powf(RD / CP);
            let theta = self.background(z).0 + self.perturbation(self.x(g[0], 0), z, pi);
            jac(g) * rho_theta(g) / theta
        });
        let at = |f: &Field3<f64>, g: [isize; 3]| f.get(g).unwrap_or(0.0);
        let u = par_field(shape, |g| 0.5 * (at(&r, g) + at(&r, [g[0] + 1, g[1], g[2]])) * self.u_ref);
        let t = par_field(shape, |g| jac(g) * rho_theta(g));
        let mut state = vec![r, u, Field3::zeros(shape), Field3::zeros(shape), t];
        // z_x at the edge (i+½, k+½): δx of the face heights ((1 − ζ/H) δx z_s for Gal-Chen); z_y likewise.
        let edge = |g: [isize; 3], axis: usize| {
            let mut e = g;
            e[axis] += 1;
            if self.coordinate == Coordinate::GalChen {
                return (1.0 - (g[2] + 1) as f64 * dz / top) * (zs(e) - zs(g)) / self.h[axis];
            }
            let face = |c: [isize; 3]| self.height_over(col(c), (g[2] + 1) as f64 * dz);
            (face(e) - face(g)) / self.h[axis]
        };
        let (depth, rate) = self.sponge;
        let sponge = |g: [isize; 3]| {
            let zeta = (g[2] as f64 + 0.5) * dz;
            let s = ((zeta - (top - depth)) / depth.max(1e-30)).clamp(0.0, 1.0);
            rate * (std::f64::consts::FRAC_PI_2 * s).sin().powi(2)
        };
        let nz = self.n[2] as isize;
        let reference = |g: [isize; 3]| match self.reference {
            Reference::Discrete => p.get(g).expect("a point of the shape"),
            Reference::Analytic => P0 * self.background(height(g)).1.powf(CP / RD),
            Reference::None => 0.0,
        };
        let mut metrics = [
            par_field(shape, jac),
            par_field(shape, |g| edge(g, 0)),
            par_field(shape, |g| if self.n[1] > 1 { edge(g, 1) } else { 0.0 }),
            par_field(shape, |g| if (0..nz - 1).contains(&g[2]) { 1.0 } else { 0.0 }),
            par_field(shape, sponge),
            par_field(shape, reference),
            par_field(shape, |g| self.jacobian_over(col(g), g[2], true)),
            par_field(shape, |g| self.background(height(g)).0),
        ];
        if self.moist() {
            (state, metrics[5], metrics[7]) = self.moist_initial();
        }
        (state, metrics)
    }

    /// θ_e (K) at pressure `p` (Pa), temperature `t` (K), vapour `qv` and total water `qt` in the
    /// reversible form of Bryan and Fritsch (2002) with the latent heat of [`crate::warm_rain`]:
    /// `T (p_d/p₀)^(−R_d/c) exp(L_v q_v/(c T))`, `c = c_p + c_l q_t`, `p_d = p ε/(ε + q_v)`.
    pub fn theta_e(p: f64, t: f64, qv: f64, qt: f64) -> f64 {
        let c = CP + 4186.0 * qt;
        t * (p * EPS / (EPS + qv) / P0).powf(-RD / c) * (LV * qv / (c * t)).exp()
    }

    /// The moist bubble's base state `(p, T, q_v)` at the cell centres `k = 0..n_z` (flat ground),
    /// saturated with total water [`QT`]: θ_e = 320 K at the ground (p₀); each level is the air of
    /// the level below adjusted by [`warm_rain_point`] at its own pressure (neutral for the model's
    /// moist thermodynamics), in discrete hydrostatic balance.
    pub fn moist_base(&self) -> Vec<[f64; 3]> {
        let rho = |[p, t, qv]: [f64; 3]| p * (1.0 + QT) / (RD * t * (1.0 + qv / EPS));
        let lift = |[pb, tb, qv]: [f64; 3], p: f64| {
            let mut s = (tb * (p / pb).powf(RD / CP), qv, QT - qv, 0.0);
            for _ in 0..8 {
                s = warm_rain_point(0.0, p, 0.0, s.0, s.1, s.2, 0.0);
            }
            [p, s.0, s.1]
        };
        let (mut lo, mut hi) = (250.0, 320.0);
        for _ in 0..60 {
            let t = 0.5 * (lo + hi);
            *(if Self::theta_e(P0, t, saturation(t, P0), QT) > 320.0 { &mut hi } else { &mut lo }) = t;
        }
        let mut below = [P0, lo, saturation(lo, P0)];
        (0..self.n[2])
            .map(|k| {
                let dz = if k == 0 { 0.5 * self.h[2] } else { self.h[2] };
                let mut at = lift(below, below[0]);
                for _ in 0..30 {
                    at = lift(below, below[0] - GRAV * dz * 0.5 * (rho(below) + rho(at)));
                }
                below = at;
                at
            })
            .collect()
    }

    /// The moist bubble's initial state ([`FIELDS`], then [`WATER`]), reference pressure and θ̄_ρ:
    /// the base state, and in the bubble saturated air with `T_ρ = T̄_ρ (1 + θ′/300 K)` (θ′ of
    /// [`Dycore::perturbation`]: the dry bubble's buoyancy, as Bryan and Fritsch).
    fn moist_initial(&self) -> (Vec<Field3<f64>>, Field3<f64>, Field3<f64>) {
        let (shape, base) = (self.shape(), self.moist_base());
        let level = |g: [isize; 3]| base[g[2].clamp(0, self.n[2] as isize - 1) as usize];
        let cell = |g: [isize; 3]| {
            let [p, t0, qv0] = level(g);
            let bump = self.perturbation(self.x(g[0], 0), (g[2] as f64 + 0.5) * self.h[2], 1.0);
            // T (1 + q_v/ε) = (1 + q_t) T_ρ, with q_v saturated at T.
            let virt = t0 * (1.0 + qv0 / EPS) * (1.0 + bump / 300.0);
            let mut t = t0;
            for _ in 0..50 {
                t = virt / (1.0 + saturation(t, p) / EPS);
            }
            let (qv, r) = (saturation(t, p), p * (1.0 + QT) / (RD * virt));
            let theta_rho = virt / (1.0 + QT) * (P0 / p).powf(RD / CP);
            [r, r * theta_rho, r / (1.0 + QT) * qv, r / (1.0 + QT) * (QT - qv)]
        };
        let (f, z) = (|v: usize| Field3::from_fn(shape, |g| cell(g)[v]), || Field3::zeros(shape));
        let theta_rho = |[p, t, qv]: [f64; 3]| t * (1.0 + qv / EPS) / (1.0 + QT) * (P0 / p).powf(RD / CP);
        let (p, theta) = (Field3::from_fn(shape, |g| level(g)[0]), Field3::from_fn(shape, |g| theta_rho(level(g))));
        (vec![f(0), z(), z(), z(), f(1), f(2), f(3), z(), z()], p, theta)
    }

    /// The decomposition over `domains` subdomains (over process grid `grid` when given; the
    /// columns stay whole: the vertical solve sweeps them).
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, Error> {
        let periodic = [self.lateral[0] == Lateral::Periodic, self.lateral[1] == Lateral::Periodic, false];
        let grid = match grid {
            Some(g) => g,
            None => Decomposition::<3>::auto([self.n[0], self.n[1], 1], domains, periodic, [HALO, HALO, 0])?.grid(),
        };
        Ok(Decomposition::with_grid(self.n, domains, Some(grid), periodic, self.shape().halo_widths())?)
    }
}

/// The fields a run works on, on executor `E`.
pub struct State<E: Executor, T: Real = f64> {
    /// The state `(R, U, V, W, Θ)` at the current time.
    pub q: [E::Field<T, 3>; 5],
    /// Stage results.
    q1: [E::Field<T, 3>; 5],
    q2: [E::Field<T, 3>; 5],
    /// The short steps' perturbations from the stage state.
    pert: [E::Field<T, 3>; 5],
    /// Slow tendencies.
    f: [E::Field<T, 3>; 5],
    /// Diagnostics `(u, v, w, θ, Ω, p)` of the stage state.
    d: [E::Field<T, 3>; 6],
    /// `(R̃, Θ̃, W̃)` of the vertical solve, `c'`, `d'`, and the mass divergence.
    e: [E::Field<T, 3>; 3],
    thomas: [E::Field<T, 3>; 2],
    div: E::Field<T, 3>,
    /// Metrics `(G, z_x, z_y, wmask, sponge, p̄, G_w, θ̄)`.
    pub m: [E::Field<T, 3>; 8],
    /// The water of a moist run.
    pub water: Option<Water<E, T>>,
}

/// The water of a moist run on executor `E`.
pub struct Water<E: Executor, T: Real = f64> {
    /// `(Gρq_v, Gρq_c, Gρq_r)` at the current time.
    pub w: [E::Field<T, 3>; 3],
    /// Stage results.
    w1: [E::Field<T, 3>; 3],
    w2: [E::Field<T, 3>; 3],
    /// Specific contents `Q/R` of the stage state, and the short steps' summed mass fluxes.
    c: [E::Field<T, 3>; 3],
    acc: [E::Field<T, 3>; 3],
    /// The rain that reached the ground (kg/m², level 0).
    pub ground: E::Field<T, 3>,
}

impl<E: Executor, T: Real> State<E, T> {
    /// The host state `q` ([`FIELDS`], then [`WATER`] when moist) and metrics `m` on `exec`, with
    /// zeroed work fields; the fields whose halos are read declare their boundary (lateral per
    /// `model`; at the bottom and top mirrored, `W` left as it is and `w` negated).
    pub fn new(exec: &E, model: &Dycore, q: &[Field3<T>], m: &[Field3<T>]) -> Result<Self, Error> {
        let shape = *q[0].shape();
        let z = || exec.alloc(shape);
        let mut s = State {
            q: all(std::array::from_fn(|v| exec.upload(&q[v])))?,
            q1: all([(); 5].map(|_| z()))?,
            q2: all([(); 5].map(|_| z()))?,
            pert: all([(); 5].map(|_| z()))?,
            f: all([(); 5].map(|_| z()))?,
            d: all([(); 6].map(|_| z()))?,
            e: all([(); 3].map(|_| z()))?,
            thomas: all([(); 2].map(|_| z()))?,
            div: z()?,
            m: all(std::array::from_fn(|v| exec.upload(&m[v])))?,
            water: None,
        };
        let (mirror, lateral) = (model.fills(Some(HaloFill::Mirror)), model.fills(None));
        if q.len() > FIELDS.len() {
            let mut w = Water {
                w: all(std::array::from_fn(|v| exec.upload(&q[5 + v])))?,
                w1: all([(); 3].map(|_| z()))?,
                w2: all([(); 3].map(|_| z()))?,
                c: all([(); 3].map(|_| z()))?,
                acc: all([(); 3].map(|_| z()))?,
                ground: exec.upload(&q[8])?,
            };
            for f in [&mut w.w, &mut w.w1, &mut w.w2, &mut w.c].into_iter().flatten().chain(&mut w.acc[..2]) {
                exec.declare_boundary(f, mirror)?;
            }
            exec.declare_boundary(&mut w.acc[2], lateral)?;
            s.water = Some(w);
        }
        let State { q, q1, q2, pert, d, div, .. } = &mut s;
        for (v, f) in [q, q1, q2].into_iter().flat_map(|q| q.iter_mut().enumerate()) {
            exec.declare_boundary(f, if v == 3 { lateral } else { mirror })?;
        }
        for (v, f) in d.iter_mut().enumerate() {
            let fills = [mirror, mirror, model.fills(Some(HaloFill::MirrorNegated)), mirror, lateral, mirror][v];
            exec.declare_boundary(f, fills)?;
        }
        let [_, u2, v2, _, t2] = pert;
        for f in [u2, v2, t2, div] {
            exec.declare_boundary(f, mirror)?;
        }
        Ok(s)
    }

    /// A host copy of the current state ([`FIELDS`], then [`WATER`] when moist).
    pub fn download(&self, exec: &E) -> Result<Vec<Field3<f64>>, Error> {
        let wide = |f: Field3<T>| Field3::from_vec(*f.shape(), f.to_vec().into_iter().map(Into::into).collect());
        self.fields().into_iter().map(|f| Ok(wide(exec.download(f)?)?)).collect()
    }

    /// The state's fields: [`FIELDS`], then [`WATER`] when moist.
    fn fields(&self) -> Vec<&E::Field<T, 3>> {
        let water = self.water.iter().flat_map(|w| w.w.iter().chain([&w.ground]));
        self.q.iter().chain(water).collect()
    }
}

/// What [`Dycore::run_with`] gives back.
pub struct Finished {
    /// The host state at the end: [`FIELDS`], then [`WATER`] when moist.
    pub state: Vec<Field3<f64>>,
    /// The case's initial state (the same fields), as the run built it: the reference of the
    /// mass and water budgets (a run resumed from a checkpoint started from the checkpoint).
    pub initial: Vec<Field3<f64>>,
    /// Long steps taken.
    pub steps: usize,
    /// The step the run started at (0, or a checkpoint's).
    pub start: usize,
}

/// An element type the fields compute in ([`Precision`]): the conversion from the host's `f64`
/// set-up, and [`Dycore::step`] with the stencils' instantiations for it.
pub trait Real: IoElement + Into<f64> + Send + Sync {
    /// `f` in this element type (each value the nearest).
    fn field(f: Field3<f64>) -> Field3<Self>;

    /// [`Dycore::step`] in this element type.
    fn step<E: Executor>(d: &Dycore, exec: &E, s: &mut State<E, Self>, dt: f64) -> Result<(), Error>;
}

/// Implements [`Real`] for `$t`.
macro_rules! real {
    ($t:ident, $field:expr) => {
        impl Real for $t {
            fn field(f: Field3<f64>) -> Field3<$t> {
                $field(f)
            }

            #[rustfmt::skip]
            fn step<E: Executor>(d: &Dycore, exec: &E, s: &mut State<E, $t>, dt: f64) -> Result<(), Error> {
                let range = Loop3D::interior(exec.shape_of(&s.q[0]));
                let r = d.h.map(|h| 1.0 / h);
                let (rz, alpha, ns) = (r[2], 0.5 * (1.0 + d.beta), d.sound_steps.max(1));
                let c = |v: f64| v as $t;
                let (rt, gamma, grav, alpha_t, rz_t) = (r.map(c), c(GAMMA), c(GRAV), c(alpha), c(rz));
                for stage in 0..3 {
                    let (frac, steps) = [(1.0 / 3.0, ns.div_ceil(3)), (0.5, ns.div_ceil(2)), (1.0, ns)][stage];
                    let dtau = frac * dt / steps as f64;
                    let kd = [0, 1].map(|a| c(d.div_damp * d.h[a] * d.h[a] / dtau * r[a]));
                    let dtau = c(dtau);
                    let State { q, q1, q2, pert, f, d: dg, e, thomas, div, m, water } = &mut *s;
                    // The step's start, the stage's state and where the stage ends.
                    let (q, st, out) = match stage {
                        0 => (q.each_ref(), q.each_ref(), q1),
                        1 => (q.each_ref(), q1.each_ref(), q2),
                        _ => (q.each_ref(), q2.each_ref(), q1),
                    };
                    let m = m.each_ref();
                    exec.run(&range, DycoreDiag::<$t>::new(), (st, m, dg.each_mut()))?;
                    let args = (rt, c(d.nu), grav, c(d.u_ref), st, dg.each_ref(), m, f.each_mut());
                    match d.momentum {
                        MomentumAdvection::Koren => exec.run(&range, DycoreTendency::<$t>::new(), args)?,
                        MomentumAdvection::Upwind3 => exec.run(&range, DycoreTendencyUnlimited::<$t>::new(), args)?,
                    }
                    exec.run(&range, DycoreInit::<$t>::new(), (q, st, pert.each_mut(), &mut *div))?;
                    if let Some(w) = water.as_mut() {
                        let ws = [&w.w, &w.w1, &w.w2][stage];
                        exec.run(&range, DycoreRatio::<$t>::new(), (st[0], ws.each_ref(), w.c.each_mut()))?;
                    }
                    // The stage's diagnostics and tendencies stay as they are over its short steps.
                    let (dg, f) = (dg.each_ref(), f.each_ref());
                    for n in 0..steps {
                        let [_, u2, v2, _, t2] = &mut *pert;
                        let args = (gamma, dtau, rt, kd, st[4], dg[5], &*t2, &*div, f[1], f[2], m, u2, v2);
                        exec.run(&range, DycoreHorizontal::<$t>::new(), args)?;
                        let args = (gamma, dtau, alpha_t, rt, grav, st[4], dg, pert.each_ref(), f, m, e.each_mut());
                        exec.run(&range, DycoreExplicit::<$t>::new(), args)?;
                        let [cp, dp] = &mut *thomas;
                        let args = (gamma, dtau, alpha_t, rz_t, grav, st[4], dg, e.each_ref(), m, &mut *cp, &mut *dp);
                        exec.run(&range, DycoreEliminate::<$t>::new(), args)?;
                        exec.run(&range, DycoreSubstitute::<$t>::new(), (&*cp, &*dp, &mut pert[3]))?;
                        let [r2, _, _, w2, t2] = &mut *pert;
                        let args = (dtau, alpha_t, rz_t, dg[3], &*w2, e.each_ref(), m, r2, t2, &mut *div);
                        exec.run(&range, DycoreFinish::<$t>::new(), args)?;
                        if let Some(w) = water.as_mut() {
                            let first = if n == 0 { 0.0 } else { 1.0 };
                            exec.run(&range, DycoreFlux::<$t>::new(), (first, pert.each_ref(), m, w.acc.each_mut()))?;
                        }
                    }
                    if let Some(w) = water.as_mut() {
                        let Water { w: w0, w1, w2, c: cq, acc, .. } = w;
                        let wout = (if stage == 1 { w2 } else { w1 }).each_mut();
                        let (dts, rn, acc, c, w0) =
                            (c(frac * dt), c(1.0 / steps as f64), acc.each_ref(), cq.each_ref(), w0.each_ref());
                        let args = (dts, rn, alpha_t, rt, st[1], st[2], dg[4], &pert[3], q[3], st[3], m, acc, c, w0, wout);
                        exec.run(&range, DycoreWater::<$t>::new(), args)?;
                    }
                    exec.run(&range, DycoreCommit::<$t>::new(), (st, pert.each_ref(), out.each_mut()))?;
                }
                std::mem::swap(&mut s.q, &mut s.q1);
                if let Some(w) = s.water.as_mut() {
                    std::mem::swap(&mut w.w, &mut w.w1);
                    let [r, _, _, _, t] = &mut s.q;
                    let rain = if d.rain { 1.0 } else { 0.0 };
                    let args = (c(dt), rz_t, rain, &s.m[0], r, t, w.w.each_mut(), &mut w.ground);
                    exec.run(&range, DycoreRain::<$t>::new(), args)?;
                }
                Ok(())
            }
        }
    };
}

real!(f32, |f: Field3<f64>| {
    // The same shape, so the same layout: element by element, padding included (zeros).
    let mut out = Field3::<f32>::zeros(*f.shape());
    out.as_mut_slice().par_iter_mut().zip(f.as_slice().par_iter()).for_each(|(o, v)| *o = *v as f32);
    out
});
real!(f64, |f| f);

impl Dycore {
    /// The halo fills of a field: lateral per [`Lateral`], and `z` (None: leave it).
    fn fills(&self, z: Option<HaloFill>) -> [Option<HaloFill>; 3] {
        let lat = |l: Lateral| Some(if l == Lateral::Periodic { HaloFill::Periodic } else { HaloFill::ZeroGradient });
        [lat(self.lateral[0]), lat(self.lateral[1]), z]
    }

    /// One long step of `dt` on `s`: three Wicker–Skamarock stages of `dt/3`, `dt/2`, `dt`, each
    /// the slow tendencies of its state and short steps from the step's start.
    pub fn step<E: Executor, T: Real>(&self, exec: &E, s: &mut State<E, T>, dt: f64) -> Result<(), Error> {
        T::step(self, exec, s, dt)
    }

    /// Runs from the initial state of [`Dycore::initial`] (or the checkpoint `plan.restart`) to
    /// `t_end` on `exec`, `after_step(step, t)` after each step: the final host state, the step
    /// count and the first step run.
    pub fn run<E: Executor>(
        &self,
        exec: &E,
        t_end: f64,
        plan: &Plan,
        after_step: impl FnMut(usize, f64),
    ) -> Result<([Field3<f64>; 5], usize, usize), Error> {
        let Finished { mut state, steps, start, .. } =
            self.run_with(exec, t_end, plan, None, after_step, |_, _| Ok(()))?;
        Ok((std::array::from_fn(|_| state.remove(0)), steps, start))
    }

    /// [`Dycore::run`] with the water: the final host state has [`FIELDS`], then [`WATER`] when
    /// moist. With `every`, `output(t, state)` gets the host state after the first step at or
    /// past each multiple of `every` seconds, and after the last.
    pub fn run_with<E: Executor>(
        &self,
        exec: &E,
        t_end: f64,
        plan: &Plan,
        every: Option<f64>,
        after_step: impl FnMut(usize, f64),
        output: impl FnMut(f64, &[Field3<f64>]) -> Result<(), Error>,
    ) -> Result<Finished, Error> {
        match self.precision {
            Precision::F64 => self.run_in::<E, f64>(exec, t_end, plan, every, after_step, output),
            Precision::F32 => self.run_in::<E, f32>(exec, t_end, plan, every, after_step, output),
        }
    }

    /// [`Dycore::run_with`] in element type `T`.
    fn run_in<E: Executor, T: Real>(
        &self,
        exec: &E,
        t_end: f64,
        plan: &Plan,
        every: Option<f64>,
        after_step: impl FnMut(usize, f64),
        mut output: impl FnMut(f64, &[Field3<f64>]) -> Result<(), Error>,
    ) -> Result<Finished, Error> {
        let (initial, m) = self.initial_all();
        let (cells, faces) = (m[0].interior_view(), m[6].interior_view());
        if let Some(g) = cells.iter().chain(faces.iter()).copied().find(|g| !g.is_finite() || *g <= 0.0) {
            let why =
                format!("the {:?} coordinate surfaces cross over this terrain (a Jacobian of {g})", self.coordinate);
            return Err(format!("{why}: lower the mountain or use another coordinate").into());
        }
        let q0 = initial.iter().map(|f| Ok(T::field(f.try_clone()?))).collect::<Result<Vec<_>, Error>>()?;
        let m: Vec<_> = m.into_iter().map(T::field).collect();
        let names: Vec<&'static str> =
            FIELDS.iter().chain(if self.moist() { &WATER[..] } else { &[] }).copied().collect();
        let mut settings = vec![("dt", self.dt), ("beta", self.beta), ("sound_steps", self.sound_steps as f64)];
        if self.momentum != MomentumAdvection::Koren {
            settings.push(("momentum_upwind3", 1.0));
        }
        if self.moist() {
            settings.push(("rain", self.rain as u8 as f64));
        }
        let id = Identity {
            name: format!("dycore {:?} {:?}", self.case, self.lateral),
            grid: self.n.to_vec(),
            fields: names.clone(),
            settings,
        };
        let spec = Spec { id, shape: self.shape(), end: End::Time(t_end), records: None, warm_up: WARM_UP };
        let build = |restart: Option<Restart<T, 3>>| -> Result<Run<E, T>, Error> {
            Ok(Run(State::new(exec, self, restart.as_ref().map_or(&q0, |r| &r.fields), &m)?))
        };
        let step = |s: &mut Run<E, T>, _: usize, t: f64| -> Result<(f64, Record<T>), Error> {
            let dt = self.dt.min(t_end - t);
            self.step(exec, &mut s.0, dt)?;
            let now = if t_end - t <= self.dt { t_end } else { t + dt };
            if every.is_some_and(|e| (now / e).floor() > (t / e).floor() || now >= t_end) {
                output(now, &s.0.download(exec)?)?;
            }
            Ok((now, Record::none()))
        };
        let plan = Plan { model: "dycore".into(), ..plan.clone() };
        let end = driver::run_fields(exec, &spec, &plan, build, step, after_step)?;
        let q = end.state.0.download(exec)?;
        if let Some(v) = q.iter().position(|f| f.interior_view().iter().any(|x| !x.is_finite())) {
            return Err(format!("{} is not finite at the end: the run went unstable", names[v]).into());
        }
        Ok(Finished { state: q, initial, steps: end.steps, start: end.start })
    }

    /// θ − θ̄ of every cell of a host state, `[i][j][k]` flattened z fastest (θ̄ the background,
    /// or the moist base state).
    pub fn theta_prime(&self, q: &[Field3<f64>]) -> Vec<(usize, usize, usize, f64)> {
        let base = if self.moist() { self.moist_base() } else { Vec::new() };
        let [r, t] = [q[0].interior_view(), q[4].interior_view()];
        let cells = r.indexed_iter().map(|((i, j, k), &rv)| match base.get(k) {
            Some(&[p, t0, _]) => (i, j, k, self.moist_cell(q, [i, j, k]).0 - t0 * (P0 / p).powf(RD / CP)),
            None => (i, j, k, t[[i, j, k]] / rv - self.background(self.cell_height([i, j, k].map(|x| x as isize))).0),
        });
        cells.collect()
    }

    /// θ (K), θ_e (K) and the mixing ratios `(q_v, q_c, q_r)` of interior cell `c` of a moist
    /// host state.
    pub fn moist_cell(&self, q: &[Field3<f64>], c: [usize; 3]) -> (f64, f64, [f64; 3]) {
        let at = |f: &Field3<f64>| f.get(c.map(|x| x as isize)).expect("an interior cell");
        let dry = at(&q[0]) - at(&q[5]) - at(&q[6]) - at(&q[7]);
        let w = [at(&q[5]) / dry, at(&q[6]) / dry, at(&q[7]) / dry];
        let qt = w[0] + w[1] + w[2];
        let theta = at(&q[4]) / at(&q[0]) * (1.0 + qt) / (1.0 + w[0] / EPS);
        let p = pressure(at(&q[4]), self.jacobian(c.map(|x| x as isize), false));
        (theta, Self::theta_e(p, theta * (p / P0).powf(RD / CP), w[0], qt), w)
    }

    /// The dry air, the water in the air and the rain that reached the ground of a moist host
    /// state, kg (per m across for a slice).
    pub fn water(&self, q: &[Field3<f64>]) -> (f64, f64, f64) {
        let sum = |v: usize| q[v].interior_view().sum() * self.h.iter().product::<f64>();
        let water = sum(5) + sum(6) + sum(7);
        let ground = q[8].interior_view().indexed_iter().filter(|((.., k), _)| *k == 0).map(|(_, x)| x).sum::<f64>();
        (sum(0) - water, water, ground * self.h[0] * self.h[1])
    }

    /// The largest `|u|` and `|w|` (Cartesian, at their faces) of a host state, m/s.
    pub fn max_wind(&self, q: &[Field3<f64>]) -> (f64, f64) {
        let at = |v: usize, g: [usize; 3]| q[v].get(g.map(|x| x as isize)).unwrap();
        let (mut um, mut wm) = (0.0f64, 0.0f64);
        for ((i, j, k), _) in q[0].interior_view().indexed_iter() {
            let ru = 0.5 * (at(0, [i, j, k]) + at(0, [(i + 1) % self.n[0], j, k]));
            um = um.max((at(1, [i, j, k]) / ru).abs());
            if k + 1 < self.n[2] {
                wm = wm.max((at(3, [i, j, k]) / (0.5 * (at(0, [i, j, k]) + at(0, [i, j, k + 1])))).abs());
            }
        }
        (um, wm)
    }

    /// The mass `Σ R Δx Δy Δζ` of a host state, kg (per m across for a slice).
    pub fn mass(&self, q: &[Field3<f64>]) -> f64 {
        q[0].interior_view().sum() * self.h.iter().product::<f64>()
    }

    /// The density current's front: where the −1 K contour of θ′ meets the lowest level, the
    /// largest such `x` (Straka et al.'s definition; linear between cell centres), m; and the
    /// minimum θ′, K.
    pub fn front(&self, q: &[Field3<f64>]) -> (f64, f64) {
        let cells = self.theta_prime(q);
        let min = cells.iter().map(|c| c.3).fold(f64::INFINITY, f64::min);
        let low: Vec<f64> = cells.iter().filter(|c| c.1 == self.n[1] / 2 && c.2 == 0).map(|c| c.3).collect();
        let front = match low.iter().rposition(|&t| t < -1.0) {
            Some(i) if i + 1 < low.len() => self.x(i as isize, 0) + self.h[0] * (low[i] + 1.0) / (low[i] - low[i + 1]),
            Some(i) => self.x(i as isize, 0),
            None => f64::NEG_INFINITY,
        };
        (front, min)
    }
}

/// The variables of the output files: name, units, long name (the last two only when moist).
pub const OUTPUT: [(&str, &str, &str); 5] = [
    ("theta_prime", "K", "potential temperature perturbation from the base state"),
    ("u", "m s-1", "horizontal wind (x) at the cell centres"),
    ("w", "m s-1", "vertical wind at the cell centres"),
    ("qr", "kg kg-1", "rain water mixing ratio"),
    ("theta_e_prime", "K", "equivalent potential temperature perturbation from the base state"),
];

/// An x–z section of a state for output: its time (s) and the values of [`OUTPUT`]'s variables,
/// `i + n_x k`.
pub struct Frame {
    /// Model time, s.
    pub time: f64,
    /// The variables' values.
    pub values: Vec<Vec<f64>>,
}

impl Dycore {
    /// The x–z section through `j = n_y/2` of a host state at time `t`: θ′, u and w (averaged from
    /// their faces to the cell centres) and, when moist, q_r and θ_e′.
    pub fn section(&self, t: f64, q: &[Field3<f64>]) -> Frame {
        let [nx, ny, nz] = self.n;
        let mut v = vec![vec![0.0; nx * nz]; if self.moist() { 5 } else { 3 }];
        let base = if self.moist() { self.moist_base() } else { Vec::new() };
        for (i, _, k, theta) in self.theta_prime(q).into_iter().filter(|c| c.1 == ny / 2) {
            v[0][i + nx * k] = theta;
        }
        let at = |f: usize, i: usize, k: usize| q[f].get([(i % nx) as isize, (ny / 2) as isize, k as isize]).unwrap();
        for (i, k) in (0..nz).flat_map(|k| (0..nx).map(move |i| (i, k))) {
            let u = |i: usize| at(1, i, k) / (0.5 * (at(0, i, k) + at(0, i + 1, k)));
            let w = |k: usize| if k + 1 < nz { at(3, i, k) / (0.5 * (at(0, i, k) + at(0, i, k + 1))) } else { 0.0 };
            v[1][i + nx * k] = 0.5 * (u(i + nx - 1) + u(i));
            v[2][i + nx * k] = 0.5 * (if k > 0 { w(k - 1) } else { 0.0 } + w(k));
            if self.moist() {
                let (_, theta_e, w) = self.moist_cell(q, [i, ny / 2, k]);
                let [p, t, qv] = base[k];
                v[3][i + nx * k] = w[2];
                v[4][i + nx * k] = theta_e - Self::theta_e(p, t, qv, QT);
            }
        }
        Frame { time: t, values: v }
    }

    /// Writes `frames` as a CF-1.8 NetCDF file: coordinates `x`, `z` (cell centres, m; `z` is
    /// the height above flat ground, ζ over terrain) and `time` (s), and each variable of
    /// [`OUTPUT`] as `(time, z, x)` with its `units` and `long_name`.
    pub fn write_netcdf(&self, path: &std::path::Path, frames: &[Frame]) -> Result<(), Error> {
        let [nx, _, nz] = self.n;
        let Some(first) = frames.first() else { return Err("no output times to write".into()) };
        let axes = vec![
            Axis::regular("x", nx, self.x(0, 0), self.h[0], "m").axis("X").long_name("x of the cell centres"),
            Axis::regular("z", nz, 0.5 * self.h[2], self.h[2], "m").axis("Z").long_name("height of the cell centres"),
            Axis::with_values("time", frames.iter().map(|f| f.time).collect(), "s").axis("T").long_name("model time"),
        ];
        let shape = Shape3::new([nx, nz, frames.len()]);
        let at = |v: usize, [i, k, t]: [isize; 3]| frames[t as usize].values[v][i as usize + nx * k as usize];
        let fields: Vec<_> = (0..first.values.len()).map(|v| Field3::from_fn(shape, |g| at(v, g))).collect();
        let mut nc = Writer::new(axes);
        nc.attribute("title", format!("dycore, case {:?}", self.case));
        for (f, (name, units, long_name)) in fields.iter().zip(OUTPUT) {
            nc.field(name, f, units, long_name)?;
        }
        Ok(nc.write(path)?)
    }
}

/// A run's state as its checkpoints hold it.
pub struct Run<E: Executor, T: Real>(pub State<E, T>);

impl<E: Executor, T: Real> Named<E::Field<T, 3>> for Run<E, T> {
    fn fields(&self) -> Vec<&E::Field<T, 3>> {
        self.0.fields()
    }
}
