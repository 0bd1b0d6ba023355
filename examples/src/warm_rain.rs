//! Warm-rain microphysics of one point (a Kessler-type scheme), shared by the column model
//! ([`crate::column`]) and the dynamical core ([`crate::dycore`]): each calls these helpers from its own
//! column sweep, which carries the rain falling in from above.
//!
//! At a point, over a step `dt`: a saturation adjustment (Tetens' saturation mixing ratio, one
//! Newton step, latent heating `L_v/c_p` per kg of water condensed, at constant pressure), then
//! autoconversion of cloud to rain above a threshold (Kessler: `10⁻³/s (q_c − 10⁻³)`) and
//! accretion of cloud by rain (`2.2 q_c q_r^0.875`/s). Rain falls with Kessler's terminal velocity
//! `v_t = 36.34 (10⁻³ ρ q_r)^0.1364 √(ρ₀/ρ)` (ρ₀ = 1.2 kg/m³). Mixing ratios in kg/kg.

use stencil_runtime::prelude::*;

/// Latent heat of vaporisation, J/kg.
pub const LV: f64 = 2.5e6;
/// Gas constant of water vapour, J/(kg K).
pub const RV: f64 = 461.5;

/// Saturation mixing ratio over water (Tetens), kg/kg, at temperature `t` (K) and pressure `p`
/// (Pa).
#[stencil_fn]
pub fn saturation<T>(t: T, p: T) -> T {
    380.0 / p * (17.27 * (t - 273.15) / (t - 35.86)).exp()
}

/// Kessler's terminal velocity of rain (m/s) at air density `rho` (kg/m³) and rain mixing ratio
/// `qr`.
#[stencil_fn]
pub fn fall_speed<T>(rho: T, qr: T) -> T {
    36.34 * (1.0e-3 * rho * qr.max(0.0)).powf(0.1364) * (1.2 / rho).sqrt()
}

/// The microphysics of one point over `dt` at pressure `p`: the new `(t, qv, qc, qr)`. `rain`
/// scales the conversion of cloud to rain (1: Kessler; 0: none, a reversible saturation
/// adjustment only).
#[stencil_fn]
pub fn warm_rain_point<T>(dt: T, p: T, rain: T, t: T, qv: T, qc: T, qr: T) -> (T, T, T, T) {
    // Latent heat (J/kg), specific heat of dry air (J/(kg K)), gas constant of water vapour
    // (J/(kg K)): module constants are not visible in stencil code.
    let (lv, cp, rv) = (2.5e6, 1004.0, 461.5);
    let mut temp = t;
    let mut vapour = qv;
    let mut cloud = qc;
    let mut rain_water = qr;
    // Saturation adjustment: condense the excess vapour, or evaporate cloud into the deficit.
    let qs = saturation(temp, p);
    let excess = (vapour - qs) / (1.0 + lv * lv * qs / (cp * rv * temp * temp));
    let change = excess.max(-cloud);
    vapour -= change;
    cloud += change;
    temp += lv / cp * change;
    // Autoconversion above the threshold and accretion of cloud by rain.
    let auto = (1.0e-3 * (cloud - 1.0e-3)).max(0.0) * dt;
    let accr = 2.2 * cloud * rain_water.max(0.0).powf(0.875) * dt;
    let to_rain = ((auto + accr) * rain).min(cloud);
    cloud -= to_rain;
    rain_water += to_rain;
    (temp, vapour, cloud, rain_water)
}
