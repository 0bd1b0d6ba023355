//! The steady linear solution of flow over a mountain, the reference of the `dycore`'s mountain
//! wave case (Schär et al. 2002, section 5b): uniform wind `U`, constant buoyancy frequency `N`,
//! small terrain `h(x)`. In the form of Klemp et al. (2015, appendix A), for a periodic domain
//! (a Fourier series over the cells' terrain instead of the integral over all wavenumbers):
//!
//! ```text
//! w(x, z) = A(z) Σ_{k > 0} 2 Re[ i k U ĥ_k e^{ikx} E_k(z) ],    ĥ_k = (1/n) Σ_i h(x_i) e^{−ikx_i}
//! m² = N²/U² − β²/4 − k²,   E_k = e^{i sgn(k) |m| z} (m² > 0: waves carry energy upward)
//!                               E_k = e^{−|m| z}       (m² < 0: evanescent)
//! ```
//!
//! `A(z) = (ρ̄(0)/ρ̄(z))^½` is the growth of the amplitude as the density falls (Klemp et al.'s
//! `e^{βz/2}` for an isothermal atmosphere), here from the model's own sounding, and `β` its
//! density scale at the ground. Linear theory puts the lower boundary condition at `z = 0`:
//! near terrain of height `h₀` it is off by `O(h₀ ∂w/∂z)`.

use stencil_runtime::prelude::*;

use crate::checkpoint::Error;
use crate::dycore::{Dycore, CV, GRAV, RD};

/// The linear solution over a model's terrain (its middle row across).
pub struct LinearWave {
    /// `(k, Re ĥ_k, Im ĥ_k, m²)` of the modes `0 < k < k_Nyquist`.
    modes: Vec<[f64; 4]>,
    u: f64,
    rho0: f64,
    model: Dycore,
}

impl LinearWave {
    /// The solution for `model`'s terrain, wind ([`Dycore::u_ref`]) and sounding (`N` from it
    /// over the lowest kilometre).
    pub fn new(model: &Dycore) -> Self {
        let (nx, dx) = (model.n[0], model.h[0]);
        let j = model.n[1] as isize / 2;
        let xs: Vec<f64> = (0..nx as isize).map(|i| model.x(i, 0)).collect();
        let hs: Vec<f64> = xs.iter().map(|&x| model.terrain(x, model.x(j, 1))).collect();
        let density = |z: f64| {
            let (theta, pi) = model.background(z);
            pi.powf(CV / RD) / theta
        };
        let (z1, rho0) = (1_000.0, density(0.0));
        let n2 = GRAV * (model.background(z1).0 / model.background(0.0).0).ln() / z1;
        let beta = (rho0 / density(z1)).ln() / z1;
        let u = model.u_ref;
        let l = nx as f64 * dx;
        let modes = (1..nx.div_ceil(2))
            .map(|n| {
                let k = 2.0 * std::f64::consts::PI * n as f64 / l;
                let (mut re, mut im) = (0.0, 0.0);
                for (x, h) in xs.iter().zip(&hs) {
                    re += h * (k * x).cos() / nx as f64;
                    im -= h * (k * x).sin() / nx as f64;
                }
                [k, re, im, n2 / (u * u) - 0.25 * beta * beta - k * k]
            })
            .collect();
        LinearWave { modes, u, rho0, model: model.clone() }
    }

    /// The vertical velocity at `(x, z)`, m/s.
    pub fn w(&self, x: f64, z: f64) -> f64 {
        let (theta, pi) = self.model.background(z);
        let amplitude = (self.rho0 / (pi.powf(CV / RD) / theta)).sqrt();
        let mut sum = 0.0;
        for &[k, re, im, m2] in &self.modes {
            // i k U ĥ e^{ikx} E(z): phase kx (+ mz), decay e^{−|m|z}.
            let (phase, decay) =
                if m2 > 0.0 { (k * x + m2.sqrt() * z, 1.0) } else { (k * x, (-(-m2).sqrt() * z).exp()) };
            // Re[i (re + i im) (cos + i sin)] = −(re sin + im cos).
            sum += 2.0 * k * self.u * decay * -(re * phase.sin() + im * phase.cos());
        }
        amplitude * sum
    }
}

/// The model's vertical velocity on the inner `w` faces of its middle row across against the
/// linear solution: `(x, z, w_model, w_linear)` of every face whose height is at most `z_max`.
pub fn compare(model: &Dycore, q: &[Field3<f64>], z_max: f64) -> Vec<[f64; 4]> {
    let linear = LinearWave::new(model);
    let (r, w) = (&q[0], &q[3]);
    let j = model.n[1] as isize / 2;
    let mut out = Vec::new();
    for i in 0..model.n[0] as isize {
        let x = model.x(i, 0);
        for k in 0..model.n[2] as isize - 1 {
            let z = model.height(x, model.x(j, 1), (k + 1) as f64 * model.h[2]);
            if z > z_max {
                break;
            }
            let at = |f: &Field3<f64>, k: isize| f.get([i, j, k]).expect("an interior face");
            let wm = at(w, k) / (0.5 * (at(r, k) + at(r, k + 1)));
            out.push([x, z, wm, linear.w(x, z)]);
        }
    }
    out
}

/// The normalised L2 error `‖w_model − w_linear‖ / ‖w_linear‖` of the points of [`compare`]
/// with `|x| ≤ x_max` and `z_min ≤ z`.
pub fn l2_error(points: &[[f64; 4]], x_max: f64, z_min: f64) -> f64 {
    let (mut e, mut n) = (0.0, 0.0);
    for &[_, _, wm, wl] in points.iter().filter(|p| p[0].abs() <= x_max && p[1] >= z_min) {
        e += (wm - wl) * (wm - wl);
        n += wl * wl;
    }
    (e / n).sqrt()
}

/// Prints the errors of [`compare`]'s points below 10 km against the linear solution (overall, near
/// the mountain, above 1 km, by height) and writes them to `w_linear.csv` in `out`.
pub fn report(d: &Dycore, q: &[Field3<f64>], out: &std::path::Path) -> Result<(), Error> {
    let points = compare(d, q, 10_000.0);
    if d.u_ref == 0.0 || points.iter().all(|p| p[3] == 0.0) {
        return Err("no wind or no terrain: the linear solution is zero, so there is no error to report".into());
    }
    for (x_max, z_min) in [(f64::INFINITY, 0.0), (25_000.0, 0.0), (f64::INFINITY, 1_000.0), (25_000.0, 1_000.0)] {
        let e = l2_error(&points, x_max, z_min);
        println!("w against the linear solution, |x| <= {x_max} m, {z_min} m <= z <= 10 km: L2 error {e:.4}");
    }
    let band = |lo: f64, hi: f64| {
        let inside: Vec<[f64; 4]> = points.iter().filter(|p| p[1] > lo && p[1] <= hi).copied().collect();
        l2_error(&inside, f64::INFINITY, 0.0)
    };
    let bands = [0.0, 2_500.0, 5_000.0, 7_500.0, 10_000.0].windows(2).map(|b| format!("{:.3}", band(b[0], b[1])));
    println!("L2 error by height (0-2.5, 2.5-5, 5-7.5, 7.5-10 km): {}", bands.collect::<Vec<_>>().join(", "));
    let max_w = points.iter().fold([0.0f64; 2], |m, p| [m[0].max(p[2].abs()), m[1].max(p[3].abs())]);
    println!("max |w| below 10 km: model {:.4} m/s, linear {:.4} m/s", max_w[0], max_w[1]);
    let csv: String = points.iter().map(|p| format!("{},{},{},{}\n", p[0], p[1], p[2], p[3])).collect();
    let path = out.join("w_linear.csv");
    std::fs::write(&path, format!("x,z,w_model,w_linear\n{csv}")).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
