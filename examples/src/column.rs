//! Column physics with column sweeps (`#[stencil(sweep = ..)]`): every column of a 3D grid is
//! updated level by level, the way weather models run their vertical solvers and cloud
//! microphysics (one thread per column).
//!
//! **Implicit vertical diffusion** of temperature and water vapour, backward Euler in time,
//! second order in space, density-weighted (`ρ ∂x/∂t = ∂/∂z (ρ K ∂x/∂z)`), with zero flux
//! through the bottom and the top:
//!
//! ```text
//! −r ρ₋ x[k−1] + (ρ + r ρ₋ + r ρ₊) x[k] − r ρ₊ x[k+1] = ρ x_old[k],   r = K Δt / Δz²,
//! ```
//!
//! where `ρ₋`, `ρ₊` are the densities at the level's lower and upper faces (means of the two
//! levels), zero at the bottom and top faces, so every column's `Σ ρ x` is conserved. The
//! tridiagonal system is solved by the Thomas algorithm: [`DiffuseUp`] eliminates upwards,
//! carrying the level below's `c'` and `d'` in `#[carry]` locals, and [`DiffuseDown`]
//! substitutes back from the top, carrying the level above's solution. Both fields share `c'`.
//! The stencils read `ρ` one level above and below, so the fields have a halo of one level.
//!
//! **Warm rain** ([`WarmRain`], a Kessler-type scheme, the point physics of
//! [`crate::warm_rain`], shared with the dynamical core): at every level a saturation adjustment
//! (Tetens' saturation mixing ratio, one Newton step with latent heating), autoconversion of
//! cloud to rain above a threshold and accretion of cloud by rain; then the rain falls with
//! Kessler's terminal velocity, `v_t = 36.34 (10⁻³ ρ q_r)^0.1364 √(ρ₀/ρ)`, as an upwind flux
//! `F = ρ q_r v_t`: the sweep goes down from the top, carrying the flux that enters a level from
//! above, `q_r += Δt (F_above − F) / (ρ Δz)`. The flux out of the bottom level is the surface
//! rain rate; the water in a column plus the rain that left it is conserved.
//!
//! [`Column`] is written once against [`Executor`]: the host, or a GPU (one thread per column).

use stencil_runtime::prelude::*;
use stencil_runtime::{Executor, LaunchError};

pub use crate::warm_rain::saturation;
use crate::warm_rain::{fall_speed, warm_rain_point};

/// Upward elimination of the Thomas algorithm for `x = t` and `x = qv` at once.
#[stencil(sweep = forward)]
pub fn diffuse_up(
    idx: Idx3,
    r: f64,
    rho: &Field3<f64>,
    t: &Field3<f64>,
    qv: &Field3<f64>,
    c_prime: &mut Field3<f64>,
    d_t: &mut Field3<f64>,
    d_qv: &mut Field3<f64>,
) {
    #[carry]
    let mut c_below = 0.0;
    #[carry]
    let mut dt_below = 0.0;
    #[carry]
    let mut dq_below = 0.0;
    let density = rho[idx];
    let lower = if idx.level() > 0 { r * 0.5 * (density + rho[idx.ix(0, 0, -1)]) } else { 0.0 };
    let upper = if idx.level() + 1 < idx.levels() { r * 0.5 * (density + rho[idx.ix(0, 0, 1)]) } else { 0.0 };
    // The pivot after eliminating the level below: b − a c'_below with a = −lower.
    let m = density + lower + upper + lower * c_below;
    c_below = -upper / m;
    dt_below = (density * t[idx] + lower * dt_below) / m;
    dq_below = (density * qv[idx] + lower * dq_below) / m;
    c_prime[idx] = c_below;
    d_t[idx] = dt_below;
    d_qv[idx] = dq_below;
}

/// Back substitution from the top: `x[k] = d'[k] − c'[k] x[k+1]`, into `t` and `qv`.
#[stencil(sweep = backward)]
pub fn diffuse_down(
    idx: Idx3,
    c_prime: &Field3<f64>,
    d_t: &Field3<f64>,
    d_qv: &Field3<f64>,
    t: &mut Field3<f64>,
    qv: &mut Field3<f64>,
) {
    #[carry]
    let mut t_above = 0.0;
    #[carry]
    let mut q_above = 0.0;
    t_above = d_t[idx] - c_prime[idx] * t_above;
    q_above = d_qv[idx] - c_prime[idx] * q_above;
    t[idx] = t_above;
    qv[idx] = q_above;
}

/// One step of warm-rain microphysics ([`warm_rain_point`]) and rain sedimentation, in place,
/// from the top level down; `rain_out` gets the flux leaving each level downwards (kg/m²/s; at
/// the bottom level, the surface rain rate).
#[stencil(sweep = backward)]
pub fn warm_rain(
    idx: Idx3,
    dt: f64,
    dz: f64,
    p: &Field3<f64>,
    rho: &Field3<f64>,
    t: &mut Field3<f64>,
    qv: &mut Field3<f64>,
    qc: &mut Field3<f64>,
    qr: &mut Field3<f64>,
    rain_out: &mut Field3<f64>,
) {
    #[carry]
    let mut flux_above = 0.0;
    let (temp, vapour, cloud, rain) = warm_rain_point(dt, p[idx], 1.0, t[idx], qv[idx], qc[idx], qr[idx]);
    // Sedimentation: upwind flux out of this level, the flux from above in.
    let density = rho[idx];
    let flux = density * rain * fall_speed(density, rain);
    t[idx] = temp;
    qv[idx] = vapour;
    qc[idx] = cloud;
    qr[idx] = rain + dt * (flux_above - flux) / (density * dz);
    flux_above = flux;
    rain_out[idx] = flux;
}

/// The shape of the column model's fields with `n` points: a halo of one level below and above
/// (the diffusion reads the density there), none across columns.
pub fn shape(n: [usize; 3]) -> Shape3 {
    Shape3::new(n).halo_per_axis([0, 0, 1])
}

/// The state of the column model: temperature (K), vapour, cloud and rain mixing ratios
/// (kg/kg), and the fixed pressure (Pa) and density (kg/m³) of every level.
pub struct State<F> {
    /// Temperature.
    pub t: F,
    /// Water vapour.
    pub qv: F,
    /// Cloud water.
    pub qc: F,
    /// Rain water.
    pub qr: F,
    /// Pressure.
    pub p: F,
    /// Density.
    pub rho: F,
}

impl<F> State<F> {
    /// Every field through `f`.
    pub fn map<G>(&self, mut f: impl FnMut(&F) -> G) -> State<G> {
        State { t: f(&self.t), qv: f(&self.qv), qc: f(&self.qc), qr: f(&self.qr), p: f(&self.p), rho: f(&self.rho) }
    }

    /// Each field through `f`, stopping at the first error.
    pub fn try_map<G, Err>(&self, mut f: impl FnMut(&F) -> Result<G, Err>) -> Result<State<G>, Err> {
        Ok(State {
            t: f(&self.t)?,
            qv: f(&self.qv)?,
            qc: f(&self.qc)?,
            qr: f(&self.qr)?,
            p: f(&self.p)?,
            rho: f(&self.rho)?,
        })
    }
}

/// A moist, conditionally unstable atmosphere at rest: hydrostatic pressure and density of an
/// atmosphere with a constant lapse rate, 6.5 K/km from 300 K, humid below 2 km, with a warm,
/// supersaturated bubble (1.4 times the saturation mixing ratio of its surroundings at its
/// centre) of radius `n/6` columns in the middle of the lowest levels. The fields have
/// one level of halo below and above ([`shape`]).
pub fn moist_bubble(n: [usize; 3], dz: f64) -> State<Field3<f64>> {
    let shape = shape(n);
    let level = |k: isize| (k as f64 + 0.5) * dz;
    let temperature = |z: f64| 300.0 - 6.5e-3 * z;
    let pressure = |z: f64| 1.0e5 * (temperature(z) / 300.0).powf(9.81 / (287.0 * 6.5e-3));
    let centre = [n[0] as f64 / 2.0, n[1] as f64 / 2.0];
    let radius = n[0].min(n[1]) as f64 / 6.0;
    let bubble = |[i, j, k]: [isize; 3]| {
        let (x, y, z) = (i as f64 + 0.5 - centre[0], j as f64 + 0.5 - centre[1], level(k));
        let d = ((x * x + y * y).sqrt() / radius).hypot(z / 1500.0);
        if d < 1.0 {
            (std::f64::consts::FRAC_PI_2 * d).cos().powi(2)
        } else {
            0.0
        }
    };
    let t = Field3::from_fn(shape, |g| temperature(level(g[2])) + 2.0 * bubble(g));
    let p = Field3::from_fn(shape, |g| pressure(level(g[2])));
    let rho = Field3::from_fn(shape, |g| pressure(level(g[2])) / (287.0 * temperature(level(g[2]))));
    let qv = Field3::from_fn(shape, |g| {
        let z = level(g[2]);
        let qs = 380.0 / pressure(z) * (17.27 * (temperature(z) - 273.15) / (temperature(z) - 35.86)).exp();
        let humidity = if z < 2000.0 { 0.8 } else { 0.3 };
        qs * (humidity + 0.6 * bubble(g))
    });
    State { t, qv, qc: Field3::zeros(shape), qr: Field3::zeros(shape), p, rho }
}

/// The column model on one executor: its state and the scratch fields of the Thomas solve.
pub struct Column<E: Executor> {
    /// The state.
    pub state: State<E::Field<f64, 3>>,
    /// `c'` and the two `d'` of the Thomas algorithm.
    scratch: [E::Field<f64, 3>; 3],
    /// The flux leaving each level downwards in the last step (kg/m²/s).
    pub rain_out: E::Field<f64, 3>,
    /// Vertical eddy diffusivity, m²/s.
    pub diffusivity: f64,
    /// Level spacing, m.
    pub dz: f64,
}

impl<E: Executor> Column<E> {
    /// Uploads `state` to `exec`.
    pub fn new(exec: &E, state: &State<Field3<f64>>, diffusivity: f64, dz: f64) -> Result<Self, LaunchError> {
        let shape = *state.t.shape();
        let up = |f: &Field3<f64>| exec.upload(f);
        Ok(Column {
            state: State {
                t: up(&state.t)?,
                qv: up(&state.qv)?,
                qc: up(&state.qc)?,
                qr: up(&state.qr)?,
                p: up(&state.p)?,
                rho: up(&state.rho)?,
            },
            scratch: [exec.alloc(shape)?, exec.alloc(shape)?, exec.alloc(shape)?],
            rain_out: exec.alloc(shape)?,
            diffusivity,
            dz,
        })
    }

    /// One time step of `dt` seconds: vertical diffusion of `t` and `qv`, then warm rain.
    pub fn step(&mut self, exec: &E, dt: f64) -> Result<(), LaunchError> {
        self.diffuse(exec, dt)?;
        self.rain(exec, dt)
    }

    /// The implicit vertical diffusion of `t` and `qv` over `dt` seconds (two sweeps).
    pub fn diffuse(&mut self, exec: &E, dt: f64) -> Result<(), LaunchError> {
        let range = Loop3D::interior(exec.shape_of(&self.state.t));
        let r = self.diffusivity * dt / (self.dz * self.dz);
        let [c, d_t, d_q] = &mut self.scratch;
        let s = &mut self.state;
        exec.run(&range, DiffuseUp, (r, &s.rho, &s.t, &s.qv, c, d_t, d_q))?;
        exec.run(&range, DiffuseDown, (&*c, &*d_t, &*d_q, &mut s.t, &mut s.qv))
    }

    /// The warm-rain microphysics and sedimentation over `dt` seconds (one sweep).
    pub fn rain(&mut self, exec: &E, dt: f64) -> Result<(), LaunchError> {
        let range = Loop3D::interior(exec.shape_of(&self.state.t));
        let s = &mut self.state;
        let fields = (&s.p, &s.rho, &mut s.t, &mut s.qv, &mut s.qc, &mut s.qr, &mut self.rain_out);
        exec.run(&range, WarmRain, (dt, self.dz, fields.0, fields.1, fields.2, fields.3, fields.4, fields.5, fields.6))
    }
}

/// The water in each column, `Σ_k ρ Δz (q_v + q_c + q_r)` (kg/m²), indexed `[i][j]`.
pub fn column_water(state: &State<Field3<f64>>, dz: f64) -> Vec<Vec<f64>> {
    let [nx, ny, nz] = state.t.shape().interior();
    let at =
        |f: &Field3<f64>, i: usize, j: usize, k: usize| f.get([i as isize, j as isize, k as isize]).expect("inside");
    (0..nx)
        .map(|i| {
            (0..ny)
                .map(|j| {
                    (0..nz)
                        .map(|k| {
                            at(&state.rho, i, j, k)
                                * dz
                                * (at(&state.qv, i, j, k) + at(&state.qc, i, j, k) + at(&state.qr, i, j, k))
                        })
                        .sum()
                })
                .collect()
        })
        .collect()
}
