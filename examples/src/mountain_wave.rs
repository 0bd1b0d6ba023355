//! Steady solutions of flow over a mountain, the references of the `dycore`'s mountain wave case
//! (Schär et al. 2002, section 5b): uniform wind `U`, constant buoyancy frequency `N`, terrain
//! `h(x)`. Three references, all Fourier series over the periodic domain's cells: for small `h`,
//! [`LinearWave`] in closed form (Boussinesq dispersion with a density factor) and
//! [`CompressibleWave`], the linearised fully compressible equations solved per wavenumber over
//! the model's own sounding; for finite `h`, [`FiniteAmplitudeWave`] (Long's model:
//! [`LinearWave`]'s series with the lower boundary condition on the terrain). [`LinearWave`], in
//! the form of Klemp et al. (2015, appendix A), for a periodic domain (a Fourier series over the
//! cells' terrain instead of the integral over all wavenumbers):
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
use crate::dycore::{Dycore, CV, GAMMA, GRAV, P0, RD};

/// The closed-form linear solution over a model's terrain (its middle row across): Boussinesq
/// dispersion, the density factor `(ρ̄(0)/ρ̄(z))^½` (module docs).
pub struct LinearWave {
    /// `(k, Re ĥ_k, Im ĥ_k, m²)` of the modes `0 < k < k_Nyquist`.
    modes: Vec<[f64; 4]>,
    /// `N²/U² − β²/4`: a mode's `m²` is this less `k²`.
    m2_0: f64,
    u: f64,
    rho0: f64,
    model: Dycore,
}

impl LinearWave {
    /// The solution for `model`'s terrain, wind ([`Dycore::u_ref`]) and sounding (`N` from it
    /// over the lowest kilometre).
    pub fn new(model: &Dycore) -> Self {
        let density = |z: f64| {
            let (theta, pi) = model.background(z);
            pi.powf(CV / RD) / theta
        };
        let (z1, rho0) = (1_000.0, density(0.0));
        let n2 = GRAV * (model.background(z1).0 / model.background(0.0).0).ln() / z1;
        let beta = (rho0 / density(z1)).ln() / z1;
        let u = model.u_ref;
        let (ks, hs) = terrain_modes(model);
        let m2_0 = n2 / (u * u) - 0.25 * beta * beta;
        let modes = ks.iter().zip(&hs).map(|(&k, h)| [k, h.re, h.im, m2_0 - k * k]).collect();
        LinearWave { modes, m2_0, u, rho0, model: model.clone() }
    }

    /// `(ρ̄(0)/ρ̄(z))^½`, the amplitude's growth with height.
    fn amplitude(&self, z: f64) -> f64 {
        let (theta, pi) = self.model.background(z);
        (self.rho0 / (pi.powf(CV / RD) / theta)).sqrt()
    }

    /// `e^{ikx} E_k(z)` of mode `[k, _, _, m²]`: phase `kx (+ mz)`, decay `e^{−|m|z}`.
    fn unit([k, _, _, m2]: [f64; 4], x: f64, z: f64) -> Complex {
        let (phase, decay) = if m2 > 0.0 { (k * x + m2.sqrt() * z, 1.0) } else { (k * x, (-(-m2).sqrt() * z).exp()) };
        Complex::new(decay * phase.cos(), decay * phase.sin())
    }

    /// The vertical velocity at `(x, z)`, m/s.
    pub fn w(&self, x: f64, z: f64) -> f64 {
        let mut sum = 0.0;
        for &mode @ [k, re, im, _] in &self.modes {
            // Re[i k U (re + i im) e^{ikx} E(z)] = −k U (re Im e + im Re e).
            let e = Self::unit(mode, x, z);
            sum += 2.0 * k * self.u * -(re * e.im + im * e.re);
        }
        self.amplitude(z) * sum
    }

    /// The streamlines' vertical displacement at `(x, z)` less its domain mean, m: `w = U ∂δ/∂x`.
    pub fn displacement(&self, x: f64, z: f64) -> f64 {
        let sum: f64 = self
            .modes
            .iter()
            .map(|&mode @ [_, re, im, _]| 2.0 * (Complex::new(re, im) * Self::unit(mode, x, z)).re)
            .sum();
        self.amplitude(z) * sum
    }
}

/// The steady finite-amplitude solution over the same terrain, of Long's (1953) model type by
/// Lilly & Klemp's (1979) method. For constant `U` and `N` the streamline displacement `δ(x, z)`
/// of steady Boussinesq flow obeys `∇²δ + (N/U)²δ = 0` exactly; the nonlinearity is only in the
/// lower boundary condition `δ(x, h(x)) = h(x)`, on the terrain itself instead of at `z = 0`.
/// So `δ` is [`LinearWave`]'s series with coefficients `a_k` for `ĥ_k` (the same `m²`, upward
/// radiation or decay, and density factor `(ρ̄(0)/ρ̄(z))^½`: exact only in the Boussinesq limit,
/// the non-Boussinesq nonlinear terms are left out), and `w = U ∂δ/∂x`. The `a_k`, the domain
/// mean of `δ` (a uniform lift without `w`, which the linear reference drops) and, for even `n`,
/// the Nyquist mode `sin(πx/Δx)` (no `w` at cell centres) are fitted by collocation at the `n`
/// cell centres, `δ(x_j, h(x_j)) = h(x_j)`: a dense real `n × n` system solved directly (exact to
/// round-off with no convergence to watch, unlike Lilly & Klemp's fixed-point iteration, and
/// cheap for `n` of a few hundred). The series is assumed to hold down to the terrain, as in
/// their method. Steady; no sponge, lid or reflection; `h → 0` gives [`LinearWave`].
pub struct FiniteAmplitudeWave {
    wave: LinearWave,
    mean: f64,
}

impl FiniteAmplitudeWave {
    /// The solution for `model`'s terrain (its middle row across), wind and sounding.
    pub fn new(model: &Dycore) -> Self {
        let mut wave = LinearWave::new(model);
        let n = model.n[0];
        let even = n.is_multiple_of(2);
        if even {
            let k = std::f64::consts::PI / model.h[0];
            wave.modes.push([k, 0.0, 0.0, wave.m2_0 - k * k]);
        }
        let y = model.x(model.n[1] as isize / 2, 1);
        let (mut a, mut b) = (Vec::with_capacity(n * n), Vec::with_capacity(n));
        for i in 0..n as isize {
            let (x, h) = (model.x(i, 0), model.terrain(model.x(i, 0), y));
            let amplitude = 2.0 * wave.amplitude(h);
            a.push(1.0);
            for (q, &mode) in wave.modes.iter().enumerate() {
                let e = LinearWave::unit(mode, x, h);
                if !(even && q + 1 == wave.modes.len()) {
                    a.push(amplitude * e.re); // the real part's column: cos(πx_j/Δx) = 0 at Nyquist
                }
                a.push(-amplitude * e.im);
            }
            b.push(h);
        }
        let c = solve_dense(a, b);
        for (q, mode) in wave.modes.iter_mut().enumerate() {
            (mode[1], mode[2]) = if 2 * q + 2 < n { (c[2 * q + 1], c[2 * q + 2]) } else { (0.0, c[n - 1]) };
        }
        FiniteAmplitudeWave { wave, mean: c[0] }
    }

    /// The vertical velocity at `(x, z)`, m/s.
    pub fn w(&self, x: f64, z: f64) -> f64 {
        self.wave.w(x, z)
    }

    /// The streamlines' vertical displacement `δ` at `(x, z)`, m.
    pub fn displacement(&self, x: f64, z: f64) -> f64 {
        self.mean + self.wave.displacement(x, z)
    }
}

/// Solves the dense system `a x = b` (`a`'s rows one after another) by Gaussian elimination with
/// partial pivoting.
fn solve_dense(mut a: Vec<f64>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs())).expect("a row");
        for col in c..n {
            a.swap(c * n + col, p * n + col);
        }
        b.swap(c, p);
        let (top, below) = a.split_at_mut((c + 1) * n);
        let pivot = &top[c * n..];
        for (r, row) in below.chunks_exact_mut(n).enumerate() {
            let f = row[c] / pivot[c];
            row[c..].iter_mut().zip(&pivot[c..]).for_each(|(v, p)| *v -= f * p);
            b[c + 1 + r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| a[r * n + c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r * n + r];
    }
    x
}

/// Which steady solution the model is compared against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// [`LinearWave`]: Klemp et al.'s closed form, Boussinesq dispersion with a density factor.
    Boussinesq,
    /// [`CompressibleWave`]: the linearised compressible equations over the model's sounding.
    Compressible,
    /// [`FiniteAmplitudeWave`]: Long's model, the boundary condition on the terrain itself.
    FiniteAmplitude,
}

impl Reference {
    /// The reference's vertical velocity over `model`'s terrain, `(x, z) ↦ w`.
    pub fn solution(self, model: &Dycore) -> Box<dyn Fn(f64, f64) -> f64 + Sync> {
        match self {
            Reference::Boussinesq => {
                let wave = LinearWave::new(model);
                Box::new(move |x, z| wave.w(x, z))
            }
            Reference::Compressible => {
                let wave = CompressibleWave::new(model);
                Box::new(move |x, z| wave.w(x, z))
            }
            Reference::FiniteAmplitude => {
                let wave = FiniteAmplitudeWave::new(model);
                Box::new(move |x, z| wave.w(x, z))
            }
        }
    }
}

/// The model's vertical velocity on the inner `w` faces of its middle row across against a
/// linear solution: `(x, z, w_model, w_linear)` of every face whose height is at most `z_max`.
pub fn compare(model: &Dycore, q: &[Field3<f64>], z_max: f64, reference: Reference) -> Vec<[f64; 4]> {
    let linear = reference.solution(model);
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
            out.push([x, z, wm, linear(x, z)]);
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

/// The normalised L2 errors of [`compare`]'s points by height: 0–2.5, 2.5–5, 5–7.5, 7.5–10 km.
pub fn band_errors(points: &[[f64; 4]]) -> [f64; 4] {
    let band = |lo: f64, hi: f64| {
        let inside: Vec<[f64; 4]> = points.iter().filter(|p| p[1] > lo && p[1] <= hi).copied().collect();
        l2_error(&inside, f64::INFINITY, 0.0)
    };
    std::array::from_fn(|b| band(2_500.0 * b as f64, 2_500.0 * (b + 1) as f64))
}

/// Prints the errors of [`compare`]'s points below 10 km against the three references (overall,
/// near the mountain, above 1 km, by height) and writes them to `w_linear.csv` in `out`
/// (`w_linear` the Boussinesq reference, `w_compressible` the compressible one, `w_finite` the
/// finite-amplitude one).
pub fn report(d: &Dycore, q: &[Field3<f64>], out: &std::path::Path) -> Result<(), Error> {
    let points = compare(d, q, 10_000.0, Reference::Boussinesq);
    if d.u_ref == 0.0 || points.iter().all(|p| p[3] == 0.0) {
        return Err("no wind or no terrain: the linear solution is zero, so there is no error to report".into());
    }
    let compressible = compare(d, q, 10_000.0, Reference::Compressible);
    let finite = compare(d, q, 10_000.0, Reference::FiniteAmplitude);
    let references = [
        ("linear solution", &points),
        ("compressible linear solution", &compressible),
        ("finite-amplitude solution", &finite),
    ];
    for (name, points) in references {
        for (x_max, z_min) in [(f64::INFINITY, 0.0), (25_000.0, 0.0), (f64::INFINITY, 1_000.0), (25_000.0, 1_000.0)] {
            let e = l2_error(points, x_max, z_min);
            println!("w against the {name}, |x| <= {x_max} m, {z_min} m <= z <= 10 km: L2 error {e:.4}");
        }
        let bands = band_errors(points).map(|e| format!("{e:.3}"));
        println!("L2 error by height (0-2.5, 2.5-5, 5-7.5, 7.5-10 km) against the {name}: {}", bands.join(", "));
    }
    // [x, z, a, b] of two references, for ‖a − b‖/‖b‖.
    let pair = |a: &[[f64; 4]], b: &[[f64; 4]]| -> Vec<[f64; 4]> {
        a.iter().zip(b).map(|(a, b)| [a[0], a[1], a[3], b[3]]).collect()
    };
    for (name, between) in [
        ("Boussinesq against compressible linear solution", pair(&points, &compressible)),
        ("finite-amplitude against Boussinesq linear solution", pair(&finite, &points)),
    ] {
        let bands = band_errors(&between).map(|e| format!("{e:.3}"));
        println!(
            "{name}: L2 difference {:.4} (by height {})",
            l2_error(&between, f64::INFINITY, 0.0),
            bands.join(", ")
        );
    }
    let split = Split::of(d, q, 2_000.0, 10_000.0);
    println!(
        "w between 2 and 10 km as upward and downward waves of the compressible solution: downward / upward {:.4}, \
         upward against the reference {:.4}",
        split.downward, split.upward_error
    );
    for (lo, hi) in [(500.0, 3_000.0), (3_000.0, 6_000.0), (6_000.0, 10_000.0)] {
        let s = Split::of(d, q, lo, hi);
        println!(
            "  {lo}-{hi} m: upward wave's amplitude {:.4} and phase {:+.4} rad against the reference, downward / upward {:.4}",
            s.amplitude, s.phase, s.downward
        );
    }
    let max_w = points.iter().fold([0.0f64; 2], |m, p| [m[0].max(p[2].abs()), m[1].max(p[3].abs())]);
    let max_c = compressible.iter().fold(0.0f64, |m, p| m.max(p[3].abs()));
    println!("max |w| below 10 km: model {:.4} m/s, linear {:.4} m/s, compressible {max_c:.4} m/s", max_w[0], max_w[1]);
    let csv: String = points
        .iter()
        .zip(&compressible)
        .zip(&finite)
        .map(|((p, c), f)| format!("{},{},{},{},{},{}\n", p[0], p[1], p[2], p[3], c[3], f[3]))
        .collect();
    let path = out.join("w_linear.csv");
    std::fs::write(&path, format!("x,z,w_model,w_linear,w_compressible,w_finite\n{csv}"))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// A complex number, enough for [`CompressibleWave`]'s per-wavenumber solutions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex {
    pub re: f64,
    pub im: f64,
}

impl Complex {
    /// The imaginary unit.
    pub const I: Complex = Complex { re: 0.0, im: 1.0 };

    /// `re + i im`.
    pub const fn new(re: f64, im: f64) -> Self {
        Complex { re, im }
    }

    /// The modulus.
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// The complex conjugate.
    pub fn conj(self) -> Self {
        Complex::new(self.re, -self.im)
    }

    /// The principal square root (`Im ≥ 0` for negative real arguments).
    pub fn sqrt(self) -> Self {
        let r = self.abs();
        let re = (0.5 * (r + self.re)).max(0.0).sqrt();
        let im = (0.5 * (r - self.re)).max(0.0).sqrt();
        Complex::new(re, if self.im < 0.0 { -im } else { im })
    }
}

impl std::ops::Add for Complex {
    type Output = Complex;
    fn add(self, o: Complex) -> Complex {
        Complex::new(self.re + o.re, self.im + o.im)
    }
}

impl std::ops::Sub for Complex {
    type Output = Complex;
    fn sub(self, o: Complex) -> Complex {
        Complex::new(self.re - o.re, self.im - o.im)
    }
}

impl std::ops::Mul for Complex {
    type Output = Complex;
    fn mul(self, o: Complex) -> Complex {
        Complex::new(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)
    }
}

impl std::ops::Mul<f64> for Complex {
    type Output = Complex;
    fn mul(self, s: f64) -> Complex {
        Complex::new(self.re * s, self.im * s)
    }
}

impl std::ops::Div for Complex {
    type Output = Complex;
    fn div(self, o: Complex) -> Complex {
        let d = o.re * o.re + o.im * o.im;
        Complex::new((self.re * o.re + self.im * o.im) / d, (self.im * o.re - self.re * o.im) / d)
    }
}

/// A base state at rest, `z ↦ [ρ̄, c̄², N²]`: density (kg/m³), squared sound speed (m²/s²) and
/// squared buoyancy frequency (1/s²), smooth in `z`.
pub type Sounding<'a> = &'a (dyn Fn(f64) -> [f64; 3] + Sync);

/// The sounding of `model`'s base state: `ρ̄ = p₀ π^{c_v/R_d} / (R_d θ̄)`, `c̄² = γ R_d θ̄ π`,
/// `N² = g d ln θ̄/dz` (a centred difference over ±1 m).
pub fn model_sounding(model: &Dycore) -> impl Fn(f64) -> [f64; 3] + Sync + '_ {
    move |z: f64| {
        let (theta, pi) = model.background(z);
        let rho = P0 * pi.powf(CV / RD) / (RD * theta);
        let n2 = GRAV * (model.background(z + 1.0).0 / model.background(z - 1.0).0).ln() / 2.0;
        [rho, GAMMA * RD * theta * pi, n2]
    }
}

/// One horizontal wavenumber's steady linear response, `ŵ(z)` and `p̂(z)` on a uniform grid
/// from the ground to the radiation level, normalised to `ŵ(0) = 1` (see [`CompressibleWave`]).
#[derive(Clone, Debug)]
pub struct Mode {
    /// The wavenumber, 1/m (> 0).
    pub k: f64,
    /// The grid spacing, m.
    pub dz: f64,
    /// `ŵ`, `dŵ/dz` and `p̂` at `j dz`, `j = 0, 1, …`.
    pub w: Vec<Complex>,
    pub dw: Vec<Complex>,
    pub p: Vec<Complex>,
}

/// The coefficients of the system `d(ŵ, p̂)/dz = [[a, b], [c, −a]] (ŵ, p̂)` at one height.
fn coefficients(k: f64, u: f64, [rho, c2, n2]: [f64; 3]) -> (f64, Complex, Complex) {
    let a = GRAV / c2;
    let b = Complex::new(0.0, k / u * (1.0 - u * u / c2) / rho);
    let c = Complex::new(0.0, rho * (n2 - k * k * u * u) / (k * u));
    (a, b, c)
}

fn slope(k: f64, u: f64, s: [f64; 3], [w, p]: [Complex; 2]) -> [Complex; 2] {
    let (a, b, c) = coefficients(k, u, s);
    [w * a + b * p, c * w - p * a]
}

/// The squared vertical wavenumber of the second-order form at `z` (module docs), and `S`.
fn m2_and_s(k: f64, u: f64, sounding: Sounding, z: f64) -> (f64, f64) {
    let d = 50.0;
    let ln_q = |z: f64| {
        let [rho, c2, _] = sounding(z);
        (rho / (1.0 - u * u / c2)).ln()
    };
    let a = |z: f64| GRAV / sounding(z)[1];
    let s = (ln_q(z + d) - ln_q(z - d)) / (2.0 * d);
    let ds = (ln_q(z + d) - 2.0 * ln_q(z) + ln_q(z - d)) / (d * d);
    let [_, c2, n2] = sounding(z);
    let da = (a(z + d) - a(z - d)) / (2.0 * d);
    let q = (1.0 - u * u / c2) * (n2 / (u * u) - k * k) - da - a(z) * s - a(z) * a(z);
    (q - 0.25 * s * s - 0.5 * ds, s)
}

impl Mode {
    /// Solves one wavenumber `k > 0` for wind `u > 0` over `sounding`: the radiation condition
    /// at `z_top` (first-order WKB, upward energy or decay), then fourth-order Runge–Kutta steps
    /// of `dz` down to the ground.
    pub fn solve(k: f64, u: f64, sounding: Sounding, z_top: f64, dz: f64) -> Mode {
        let n = (z_top / dz).round().max(1.0) as usize;
        let z_top = n as f64 * dz;
        // ŵ = ψ e^{−∫S/2}, ψ ∝ m^{−½} e^{i∫m}: ŵ'/ŵ = −S/2 + i m − (m²)'/(4 m²) at the top.
        let (m2, s) = m2_and_s(k, u, sounding, z_top);
        let d = 50.0;
        let dm2 = (m2_and_s(k, u, sounding, z_top + d).0 - m2_and_s(k, u, sounding, z_top - d).0) / (2.0 * d);
        let m = Complex::new(m2, 0.0).sqrt();
        let log_slope = Complex::I * m + Complex::new(-0.5 * s, 0.0) - Complex::new(0.25 * dm2, 0.0) / (m * m);
        let (a, b, _) = coefficients(k, u, sounding(z_top));
        let mut y = [Complex::new(1.0, 0.0), (log_slope - Complex::new(a, 0.0)) / b];
        let mut w = vec![Complex::default(); n + 1];
        let mut p = w.clone();
        let mut dw = w.clone();
        let store = |j: usize, y: [Complex; 2], w: &mut [Complex], p: &mut [Complex], dw: &mut [Complex]| {
            w[j] = y[0];
            p[j] = y[1];
            dw[j] = slope(k, u, sounding(j as f64 * dz), y)[0];
        };
        store(n, y, &mut w, &mut p, &mut dw);
        for j in (0..n).rev() {
            let z = (j + 1) as f64 * dz;
            let (s0, sh, s1) = (sounding(z), sounding(z - 0.5 * dz), sounding(z - dz));
            let add = |y: [Complex; 2], f: [Complex; 2], h: f64| [y[0] + f[0] * h, y[1] + f[1] * h];
            let h = -dz;
            let k1 = slope(k, u, s0, y);
            let k2 = slope(k, u, sh, add(y, k1, 0.5 * h));
            let k3 = slope(k, u, sh, add(y, k2, 0.5 * h));
            let k4 = slope(k, u, s1, add(y, k3, h));
            y = [
                y[0] + (k1[0] + k2[0] * 2.0 + k3[0] * 2.0 + k4[0]) * (h / 6.0),
                y[1] + (k1[1] + k2[1] * 2.0 + k3[1] * 2.0 + k4[1]) * (h / 6.0),
            ];
            // Evanescent modes grow downward: keep the numbers finite (the part above shrinks).
            let size = y[0].abs() + y[1].abs() / (s1[0] * u);
            if size > 1e100 {
                y = [y[0] * 1e-100, y[1] * 1e-100];
                for v in w[j + 1..].iter_mut().chain(&mut p[j + 1..]).chain(&mut dw[j + 1..]) {
                    *v = *v * 1e-100;
                }
            }
            store(j, y, &mut w, &mut p, &mut dw);
        }
        let w0 = w[0];
        for v in w.iter_mut().chain(&mut p).chain(&mut dw) {
            *v = *v / w0;
        }
        Mode { k, dz, w, dw, p }
    }

    /// `ŵ(z)` (cubic Hermite between the grid points; clamped to the grid's range).
    pub fn w_at(&self, z: f64) -> Complex {
        let n = self.w.len() - 1;
        let t = (z / self.dz).clamp(0.0, n as f64);
        let j = (t.floor() as usize).min(n.saturating_sub(1));
        let t = t - j as f64;
        let (h00, h10) = ((1.0 + 2.0 * t) * (1.0 - t) * (1.0 - t), t * (1.0 - t) * (1.0 - t));
        let (h01, h11) = (t * t * (3.0 - 2.0 * t), t * t * (t - 1.0));
        self.w[j] * h00 + self.dw[j] * (h10 * self.dz) + self.w[j + 1] * h01 + self.dw[j + 1] * (h11 * self.dz)
    }
}

/// The steady linear response of the fully compressible, non-Boussinesq atmosphere to the
/// terrain, one horizontal wavenumber of the periodic domain at a time.
///
/// The linearised steady equations for a perturbation `e^{ikx}` of a uniform wind `U` over a
/// hydrostatic base state `ρ̄(z), p̄(z)` (`dp̄/dz = −ρ̄g`), without any Boussinesq or anelastic
/// approximation:
///
/// ```text
/// ρ̄ U ik û + ik p̂ = 0                                  (x momentum)
/// ρ̄ U ik ŵ + dp̂/dz + g ρ̂ = 0                            (z momentum)
/// U ik ρ̂ + ρ̄ ik û + d(ρ̄ŵ)/dz = 0                        (mass)
/// U ik p̂ + ŵ dp̄/dz = c̄² (U ik ρ̂ + ŵ dρ̄/dz)               (adiabatic: θ conserved)
/// ```
///
/// with `c̄² = γ p̄/ρ̄` and `N² = g d ln θ̄/dz = −g (d ln ρ̄/dz + g/c̄²)`. Eliminating `û` and `ρ̂`
/// leaves two first-order equations, which are integrated as they stand:
///
/// ```text
/// dŵ/dz = (g/c̄²) ŵ + i (k/U) (1 − U²/c̄²) p̂/ρ̄
/// dp̂/dz = −(g/c̄²) p̂ + i ρ̄ (N² − k²U²)/(kU) ŵ
/// ```
///
/// Equivalently `ŵ = ψ e^{−∫S/2}` with `S = d/dz ln[ρ̄/(1 − U²/c̄²)]` and the Taylor–Goldstein-type
///
/// ```text
/// ψ'' + m²(z) ψ = 0,   m² = (1 − U²/c̄²)(N²/U² − k²) − (g/c̄²)' − (g/c̄²) S − (g/c̄²)² − S²/4 − S'/2.
/// ```
///
/// With `c̄ → ∞` and `ρ̄ ∝ e^{−βz}` this is `m² = N²/U² − β²/4 − k²` and `ŵ ∝ e^{βz/2} e^{imz}`,
/// Klemp et al.'s (2015, appendix A) solution, the [`LinearWave`] reference; for an isothermal
/// atmosphere (scale height `H`, `S = −1/H`) the terms add up to the classical compressible
/// `m² = (1 − U²/c̄²)(N²/U² − k²) + (1 − 1/γ)/(γH²) − 1/(4H²)` of acoustic–gravity waves (e.g.
/// Gill 1982, chapter 6). Here `ρ̄`, `c̄²` and `N²` are the model's own (its constant-N sounding
/// is not isothermal: the temperature falls from 300 K to 138 K at the 21.6 km lid), so `m²` and
/// the amplitude vary with height.
///
/// Boundary conditions: `ŵ(0) = ikU ĥ_k` (free slip on the linearised terrain, as in
/// [`LinearWave`]) and, at a radiation level `z_top` (the model's lid by default), the WKB form
/// of the wave that carries its energy upward (`m > 0` for `k, U > 0`) or decays (`m = i|m|`):
/// `ŵ'/ŵ = −S/2 + i m − (m²)'/(4m²)`. Between, fourth-order Runge–Kutta steps of 20 m from the
/// top down (the stable direction for evanescent modes).
pub struct CompressibleWave {
    /// `(ĥ_k, ŵ_k(z)/ŵ_k(0))` of the modes `0 < k < k_Nyquist`.
    modes: Vec<(Complex, Mode)>,
    u: f64,
}

impl CompressibleWave {
    /// The vertical grid step of the modes' solutions, m.
    pub const DZ: f64 = 20.0;

    /// The solution for `model`'s terrain (its middle row across), wind and sounding, radiating
    /// at the model's lid.
    pub fn new(model: &Dycore) -> Self {
        Self::with_top(model, model.top())
    }

    /// [`CompressibleWave::new`] with the radiation condition at `z_top`.
    pub fn with_top(model: &Dycore, z_top: f64) -> Self {
        let sounding = model_sounding(model);
        let (ks, hs) = terrain_modes(model);
        Self::with_sounding(&ks, &hs, model.u_ref, &sounding, z_top)
    }

    /// The solution for terrain modes `ĥ` at wavenumbers `ks`, wind `u` and any sounding.
    pub fn with_sounding(ks: &[f64], hs: &[Complex], u: f64, sounding: Sounding, z_top: f64) -> Self {
        use rayon::prelude::*;
        let modes = ks.par_iter().zip(hs).map(|(&k, &h)| (h, Mode::solve(k, u, sounding, z_top, Self::DZ))).collect();
        CompressibleWave { modes, u }
    }

    /// The vertical velocity at `(x, z)`, m/s.
    pub fn w(&self, x: f64, z: f64) -> f64 {
        let mut sum = 0.0;
        for (h, mode) in &self.modes {
            let phase = Complex::new((mode.k * x).cos(), (mode.k * x).sin());
            // 2 Re[i k U ĥ e^{ikx} ŵ(z)/ŵ(0)]
            sum += 2.0 * (Complex::new(0.0, mode.k * self.u) * *h * phase * mode.w_at(z)).re;
        }
        sum
    }
}

/// The model's vertical velocity split into the upward wave of [`CompressibleWave`] and the
/// downward wave (its mirror image, the complex conjugate of each mode's `ŵ(z)`: the vertical
/// equation has real coefficients), fitted per propagating mode by least squares over the model
/// levels between two heights. The levels are taken at their height `ζ` away from the mountain:
/// meant for the linear regime, where the surfaces are nearly flat.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// `(Σ|B_k|² E_k / Σ|A_k|² E_k)^½`: the downward wave's amplitude over the upward's, `A_k`
    /// and `B_k` the amplitudes of the upward and downward waves relative to the reference's
    /// upward wave, `E_k` its energy in the fitted levels.
    pub downward: f64,
    /// `(Σ|A_k − 1|² E_k / Σ E_k)^½`: the upward wave's error (amplitude and phase).
    pub upward_error: f64,
    /// `Σ|A_k| E_k / Σ E_k`: the upward wave's amplitude against the reference's.
    pub amplitude: f64,
    /// `Σ arg(A_k) E_k / Σ E_k`: its phase against the reference's, rad (< 0: lagging).
    pub phase: f64,
}

impl Split {
    /// The split of `q`'s `w` over the levels from `z_lo` to `z_hi`.
    pub fn of(model: &Dycore, q: &[Field3<f64>], z_lo: f64, z_hi: f64) -> Split {
        let wave = CompressibleWave::new(model);
        let (r, w) = (&q[0], &q[3]);
        let j = model.n[1] as isize / 2;
        let nx = model.n[0] as isize;
        let levels: Vec<(f64, Vec<f64>)> = (0..model.n[2] as isize - 1)
            .map(|k| ((k + 1) as f64 * model.h[2], k))
            .filter(|(z, _)| (z_lo..=z_hi).contains(z))
            .map(|(z, k)| {
                let at = |f: &Field3<f64>, i: isize, k: isize| f.get([i, j, k]).expect("an interior face");
                (z, (0..nx).map(|i| at(w, i, k) / (0.5 * (at(r, i, k) + at(r, i, k + 1)))).collect())
            })
            .collect();
        let [mut up, mut down, mut error, mut energy, mut amplitude, mut phase] = [0.0; 6];
        let n_ground = model_sounding(model)(0.0)[2].sqrt();
        for (h, mode) in &wave.modes {
            if mode.k >= n_ground / model.u_ref {
                continue; // evanescent: no downward wave to tell apart
            }
            let scale = Complex::new(0.0, mode.k * wave.u) * *h;
            let (mut ff, mut e) = (0.0, 0.0);
            let (mut fg_bar, mut f_w, mut g_w) = (Complex::default(), Complex::default(), Complex::default());
            for (z, row) in &levels {
                let (f, g) = (scale * mode.w_at(*z), scale * mode.w_at(*z).conj());
                // ŵ_model(z) = (1/n) Σ_i w_i e^{−ikx_i}
                let mut c = Complex::default();
                for (i, wi) in row.iter().enumerate() {
                    let kx = mode.k * model.x(i as isize, 0);
                    c = c + Complex::new(kx.cos(), -kx.sin()) * (wi / nx as f64);
                }
                ff += f.abs() * f.abs();
                fg_bar = fg_bar + f.conj() * g;
                f_w = f_w + f.conj() * c;
                g_w = g_w + g.conj() * c;
                e += f.abs() * f.abs();
            }
            // Normal equations [[Σ|f|², Σ f̄g], [Σ ḡf, Σ|g|²]] (A, B) = (Σ f̄ŵ, Σ ḡŵ), |g| = |f|.
            let (a11, a12) = (Complex::new(ff, 0.0), fg_bar);
            let det = a11 * a11 - a12 * a12.conj();
            let a = (f_w * a11 - a12 * g_w) / det;
            let b = (g_w * a11 - a12.conj() * f_w) / det;
            up += a.abs().powi(2) * e;
            down += b.abs().powi(2) * e;
            error += (a - Complex::new(1.0, 0.0)).abs().powi(2) * e;
            amplitude += a.abs() * e;
            phase += a.im.atan2(a.re) * e;
            energy += e;
        }
        Split {
            downward: (down / up).sqrt(),
            upward_error: (error / energy).sqrt(),
            amplitude: amplitude / energy,
            phase: phase / energy,
        }
    }
}

/// The wavenumbers `0 < k < k_Nyquist` of `model`'s periodic domain and the Fourier
/// coefficients `ĥ_k = (1/n) Σ_i h(x_i) e^{−ikx_i}` of its terrain (the middle row across).
pub fn terrain_modes(model: &Dycore) -> (Vec<f64>, Vec<Complex>) {
    let (nx, dx) = (model.n[0], model.h[0]);
    let j = model.n[1] as isize / 2;
    let xs: Vec<f64> = (0..nx as isize).map(|i| model.x(i, 0)).collect();
    let hs: Vec<f64> = xs.iter().map(|&x| model.terrain(x, model.x(j, 1))).collect();
    let l = nx as f64 * dx;
    (1..nx.div_ceil(2))
        .map(|n| {
            let k = 2.0 * std::f64::consts::PI * n as f64 / l;
            let (mut re, mut im) = (0.0, 0.0);
            for (x, h) in xs.iter().zip(&hs) {
                re += h * (k * x).cos() / nx as f64;
                im -= h * (k * x).sin() / nx as f64;
            }
            (k, Complex::new(re, im))
        })
        .unzip()
}
