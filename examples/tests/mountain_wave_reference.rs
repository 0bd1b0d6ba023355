//! The compressible linear mountain-wave reference of `stencil_examples::mountain_wave` on its
//! own: in the anelastic limit it is Klemp et al.'s closed form (the Boussinesq reference), over
//! the model's sounding it satisfies the linearised equations it solves, its radiation level
//! hardly matters below 10 km, and planted sign errors fail each check. The finite-amplitude
//! reference (Long's model) meets its boundary condition on the terrain, is the linear one for
//! a small mountain, and differs from it with the paper's 250 m mountain.

use std::f64::consts::PI;

use stencil_examples::dycore::{Case, Dycore, GRAV};
use stencil_examples::mountain_wave::{
    band_errors, l2_error, model_sounding, terrain_modes, Complex, CompressibleWave, FiniteAmplitudeWave, LinearWave,
    Mode, Sounding, Split,
};

const U: f64 = 10.0;

/// `e^{βz/2} e^{i m z}` with `m² = N²/U² − β²/4 − k²` (`sign` −1: the downward wave instead).
fn closed_form(k: f64, beta: f64, n2: f64, z: f64, sign: f64) -> Complex {
    let m = Complex::new(n2 / (U * U) - 0.25 * beta * beta - k * k, 0.0).sqrt();
    let (re, im) = (-m.im * z * sign, m.re * z * sign);
    Complex::new(re.exp() * im.cos(), re.exp() * im.sin()) * (0.5 * beta * z).exp()
}

/// The largest `|ŵ − closed form|` below 10 km relative to the closed form's size there.
fn misfit(mode: &Mode, beta: f64, n2: f64, sign: f64) -> f64 {
    (0..=500)
        .map(|i| {
            let z = 20.0 * i as f64;
            let exact = closed_form(mode.k, beta, n2, z, sign);
            let size = closed_form(mode.k, beta, n2, z, 1.0).abs();
            (mode.w_at(z + 7.0) - closed_form(mode.k, beta, n2, z + 7.0, sign)).abs().max((mode.w_at(z) - exact).abs())
                / size
        })
        .fold(0.0, f64::max)
}

#[test]
fn anelastic_limit_is_the_closed_form() {
    let (beta, n2) = (1.0 / 8_000.0, 1.0e-4);
    // ρ̄ = e^{−βz}, sound 10⁷ m/s: the compressible terms vanish, m² is constant.
    let sounding: Sounding = &|z: f64| [(-beta * z).exp(), 1.0e14, n2];
    for k in [2.0e-4, 8.0e-4, 1.5e-3, 5.0e-3] {
        let mode = Mode::solve(k, U, sounding, 20_000.0, CompressibleWave::DZ);
        let (good, downward) = (misfit(&mode, beta, n2, 1.0), misfit(&mode, beta, n2, -1.0));
        eprintln!("k = {k}: misfit {good:.2e}, against the downward wave {downward:.2e}");
        assert!(good < 1e-4, "k = {k}: misfit {good}");
        if k < 1e-3 {
            // A planted sign error (energy going down) is far off.
            assert!(downward > 0.5, "k = {k}: the downward wave is as close: {downward}");
        }
    }
    // β = 0 as well: Klemp et al.'s Boussinesq wave e^{imz}.
    let flat: Sounding = &|_| [1.0, 1.0e14, n2];
    let mode = Mode::solve(5.0e-4, U, flat, 15_000.0, CompressibleWave::DZ);
    assert!(misfit(&mode, 0.0, n2, 1.0) < 1e-5);
}

/// The largest residuals of the z momentum and mass equations over the grid below `z_max`,
/// relative to their largest terms; `g_sign` −1 plants a sign error in the buoyancy.
fn residuals(mode: &Mode, sounding: Sounding, z_max: f64, g_sign: f64) -> (f64, f64) {
    let (k, dz) = (mode.k, mode.dz);
    let ik = Complex::new(0.0, k);
    let [mut res, mut size] = [[0.0f64; 2]; 2];
    // ρ̂ from θ̂ = −ŵ θ̄'/(ikU) and the equation of state, û from the x momentum.
    let rho_hat = |j: usize| {
        let [rho, c2, n2] = sounding(j as f64 * dz);
        mode.p[j] * (1.0 / c2) - Complex::new(0.0, rho * n2 / (GRAV * k * U)) * mode.w[j]
    };
    for j in 1..((z_max / dz) as usize).min(mode.w.len() - 2) {
        let z = j as f64 * dz;
        let [rho, ..] = sounding(z);
        let u_hat = mode.p[j] * (-1.0 / (rho * U));
        let dp = (mode.p[j + 1] - mode.p[j - 1]) * (0.5 / dz);
        let flux = |j: usize| mode.w[j] * sounding(j as f64 * dz)[0];
        let dflux = (flux(j + 1) - flux(j - 1)) * (0.5 / dz);
        let momentum = [ik * mode.w[j] * (rho * U), dp, rho_hat(j) * (GRAV * g_sign)];
        let mass = [ik * rho_hat(j) * U, ik * u_hat * rho, dflux];
        for (e, terms) in [momentum, mass].iter().enumerate() {
            let sum = terms.iter().fold(Complex::default(), |s, t| s + *t);
            res[e] = res[e].max(sum.abs());
            size[e] = size[e].max(terms.iter().map(|t| t.abs()).fold(0.0, f64::max));
        }
    }
    (res[0] / size[0], res[1] / size[1])
}

#[test]
fn one_wavenumber_satisfies_the_linearised_compressible_equations() {
    let model = Dycore::new(Case::MountainWave, 500.0, 1).unwrap();
    let sounding = model_sounding(&model);
    for n in [3, 20, 40] {
        let k = 2.0 * PI * n as f64 / 200_000.0;
        let mode = Mode::solve(k, U, &sounding, model.top(), CompressibleWave::DZ);
        let (momentum, mass) = residuals(&mode, &sounding, 20_000.0, 1.0);
        let (planted, _) = residuals(&mode, &sounding, 20_000.0, -1.0);
        eprintln!("k = {k:.2e}: residuals z momentum {momentum:.1e}, mass {mass:.1e}; planted {planted:.1e}");
        assert!(momentum < 1e-4 && mass < 1e-4, "k = {k}: residuals {momentum}, {mass}");
        assert!(planted > 1e-2, "k = {k}: a flipped buoyancy leaves {planted}");
    }
}

/// The normalised L2 difference of two solutions on a 1 km × 100 m grid below 10 km.
fn difference(a: impl Fn(f64, f64) -> f64, b: impl Fn(f64, f64) -> f64) -> f64 {
    let (mut e, mut n) = (0.0, 0.0);
    for i in -100..100 {
        for j in 1..=100 {
            let (x, z) = (1_000.0 * i as f64, 100.0 * j as f64);
            let (wa, wb) = (a(x, z), b(x, z));
            e += (wa - wb) * (wa - wb);
            n += wb * wb;
        }
    }
    (e / n).sqrt()
}

#[test]
fn references_over_the_model_sounding() {
    let model = Dycore::new(Case::MountainWave, 500.0, 1).unwrap();
    let (ks, hs) = terrain_modes(&model);
    assert_eq!(ks.len(), 199);
    let compressible = CompressibleWave::new(&model);
    let lower = CompressibleWave::with_top(&model, 16_000.0);
    let boussinesq = LinearWave::new(&model);
    let top = difference(|x, z| lower.w(x, z), |x, z| compressible.w(x, z));
    let between = difference(|x, z| boussinesq.w(x, z), |x, z| compressible.w(x, z));
    // The anelastic sounding through the same solver gives the closed form over this terrain.
    let (beta, n2) = (1.0 / 8_000.0, 1.0e-4);
    let anelastic: Sounding = &|z: f64| [(-beta * z).exp(), 1.0e14, n2];
    let solved = CompressibleWave::with_sounding(&ks, &hs, U, anelastic, 20_000.0);
    let closed = |x: f64, z: f64| {
        let mut sum = 0.0;
        for (&k, &h) in ks.iter().zip(&hs) {
            let e = Complex::new((k * x).cos(), (k * x).sin()) * closed_form(k, beta, n2, z, 1.0);
            sum += 2.0 * (Complex::new(0.0, k * U) * h * e).re;
        }
        sum
    };
    let limit = difference(|x, z| solved.w(x, z), closed);
    eprintln!("radiation at 16 km against the lid: {top:.2e}; Boussinesq against compressible: {between:.4}; anelastic limit {limit:.1e}");
    assert!(limit < 1e-5, "anelastic limit {limit}");
    assert!(top < 0.02, "the radiation level moves the solution below 10 km by {top}");
    assert!(between < 0.1, "Boussinesq against compressible: {between}");
}

#[test]
fn split_finds_a_planted_downward_wave() {
    let mut d = Dycore::new(Case::MountainWave, 1000.0, 1).unwrap();
    (d.n[0], d.mountain) = (60, 2.5);
    let (ks, hs) = terrain_modes(&d);
    let sounding = model_sounding(&d);
    let modes: Vec<Mode> = ks.iter().map(|&k| Mode::solve(k, U, &sounding, d.top(), CompressibleWave::DZ)).collect();
    // Σ_k 2 Re[ikUĥ e^{ikx} (ŵ(z) + r conj ŵ(z))]: the upward wave and r times its mirror.
    let field = |x: f64, z: f64, up: Complex, r: f64| {
        let mut sum = 0.0;
        for ((&k, &h), mode) in ks.iter().zip(&hs).zip(&modes) {
            let e = Complex::new((k * x).cos(), (k * x).sin());
            let w = mode.w_at(z) * up + mode.w_at(z).conj() * r;
            sum += 2.0 * (Complex::new(0.0, k * U) * h * e * w).re;
        }
        sum
    };
    let plant = |up: Complex, r: f64| {
        let (mut q, _) = d.initial();
        for i in 0..d.n[0] as isize {
            let x = (i as f64 + 0.5 - 0.5 * d.n[0] as f64) * d.h[0];
            for k in 0..d.n[2] as isize - 1 {
                let rho = 0.5 * (q[0].get([i, 0, k]).unwrap() + q[0].get([i, 0, k + 1]).unwrap());
                q[3].set([i, 0, k], rho * field(x, (k + 1) as f64 * d.h[2], up, r)).unwrap();
            }
        }
        Split::of(&d, &q, 2_000.0, 10_000.0)
    };
    let one = Complex::new(1.0, 0.0);
    let (clean, planted, reversed) = (plant(one, 0.0), plant(one, 0.1), plant(Complex::default(), 1.0));
    // Weaker by 10 % and lagging by 0.1 rad.
    let late = plant(Complex::new(0.9 * 0.1f64.cos(), -0.9 * 0.1f64.sin()), 0.0);
    eprintln!("{clean:?}, {planted:?}, {reversed:?}, {late:?}");
    assert!(clean.downward < 1e-6 && clean.upward_error < 1e-6, "{clean:?}");
    assert!((clean.amplitude - 1.0).abs() < 1e-6 && clean.phase.abs() < 1e-6, "{clean:?}");
    assert!((late.amplitude - 0.9).abs() < 1e-6 && (late.phase + 0.1).abs() < 1e-6, "{late:?}");
    assert!((planted.downward - 0.1).abs() < 1e-6 && planted.upward_error < 1e-6, "{planted:?}");
    // Energy going down only: no upward wave at all.
    assert!(reversed.downward > 1e6 && (reversed.upward_error - 1.0).abs() < 1e-6, "{reversed:?}");
}

/// The cell centres `x_j` of a slice's periodic domain.
fn centres(d: &Dycore) -> impl Iterator<Item = f64> + '_ {
    (0..d.n[0]).map(|i| (i as f64 + 0.5 - 0.5 * d.n[0] as f64) * d.h[0])
}

/// `(x, z)` of the slice's inner `w` faces at most 10 km high, at their heights over the terrain
/// (the points of `mountain_wave::compare`).
fn faces(d: &Dycore) -> Vec<(f64, f64)> {
    let levels = (1..d.n[2]).map(|k| k as f64 * d.h[2]);
    centres(d)
        .flat_map(|x| levels.clone().map(move |zeta| (x, d.height(x, 0.0, zeta))))
        .filter(|p| p.1 <= 10_000.0)
        .collect()
}

/// `[x, z, a, b]` at each point, for `l2_error` and `band_errors` (`‖a − b‖/‖b‖`).
fn pairs(at: &[(f64, f64)], a: impl Fn(f64, f64) -> f64, b: impl Fn(f64, f64) -> f64) -> Vec<[f64; 4]> {
    at.iter().map(|&(x, z)| [x, z, a(x, z), b(x, z)]).collect()
}

#[test]
fn finite_amplitude_boundary_condition_holds_on_the_terrain() {
    let d = Dycore::new(Case::MountainWave, 500.0, 1).unwrap();
    assert_eq!(d.mountain, 250.0);
    let wave = FiniteAmplitudeWave::new(&d);
    let misfit =
        centres(&d).map(|x| (wave.displacement(x, d.terrain(x, 0.0)) - d.terrain(x, 0.0)).abs()).fold(0.0, f64::max);
    eprintln!("max |δ(x_j, h(x_j)) − h(x_j)| / h₀ = {:.2e}", misfit / d.mountain);
    assert!(misfit < 1e-9 * d.mountain, "the boundary condition is off by {misfit} m");
}

#[test]
fn finite_amplitude_is_linear_for_a_small_mountain() {
    let mut d = Dycore::new(Case::MountainWave, 500.0, 1).unwrap();
    let mut by_height = Vec::new();
    for h0 in [2.5, 25.0] {
        d.mountain = h0;
        let (finite, linear, at) = (FiniteAmplitudeWave::new(&d), LinearWave::new(&d), faces(&d));
        let points = pairs(&at, |x, z| finite.w(x, z), |x, z| linear.w(x, z));
        let (all, aloft) = (l2_error(&points, f64::INFINITY, 0.0), l2_error(&points, f64::INFINITY, 1_000.0));
        eprintln!("h₀ = {h0} m: ‖w_finite − w_linear‖/‖w_linear‖ below 10 km {all:.2e}, above 1 km {aloft:.2e}");
        by_height.push((all, aloft));
    }
    let [(small, small_aloft), (ten, ten_aloft)] = by_height[..] else { unreachable!() };
    assert!(small < 2e-3 && small_aloft < 2e-3, "h₀ = 2.5 m: {small}, above 1 km {small_aloft}");
    // The difference is the flow's finite amplitude: first order in h₀.
    for ratio in [ten / small, ten_aloft / small_aloft] {
        assert!((8.0..12.0).contains(&ratio), "10 × h₀ changes the difference {ratio} times");
    }
}

#[test]
fn finite_amplitude_effect_with_the_paper_mountain() {
    let d = Dycore::new(Case::MountainWave, 500.0, 1).unwrap();
    let (finite, linear, at) = (FiniteAmplitudeWave::new(&d), LinearWave::new(&d), faces(&d));
    let points = pairs(&at, |x, z| finite.w(x, z), |x, z| linear.w(x, z));
    let (all, bands) = (l2_error(&points, f64::INFINITY, 0.0), band_errors(&points));
    eprintln!("h₀ = 250 m, w faces of the 500 m grid below 10 km: ‖w_finite − w_linear‖/‖w_linear‖ {all:.4}, by height {bands:.4?}");
    // As the docs compare the model's two runs: the same faces (i, k) of the 2.5 m mountain's
    // grid (nearly flat) for the linear solution scaled by 100.
    let mut small = d.clone();
    small.mountain = 2.5;
    let (linear_small, at_small) = (LinearWave::new(&small), faces(&small));
    assert_eq!(at.len(), at_small.len());
    let scaled: Vec<[f64; 4]> =
        points.iter().zip(&at_small).map(|(p, &(x, z))| [p[0], p[1], p[2], 100.0 * linear_small.w(x, z)]).collect();
    let norm = points.iter().map(|p| p[3] * p[3]).sum::<f64>().sqrt();
    let diff = scaled.iter().map(|p| (p[2] - p[3]).powi(2)).sum::<f64>().sqrt();
    eprintln!("against 100 × the 2.5 m linear solution on its own faces, over ‖w_linear‖: {:.4}", diff / norm);
    eprintln!(
        "  over ‖100 × w_linear(2.5 m)‖: {:.4}, by height {:.4?}",
        l2_error(&scaled, f64::INFINITY, 0.0),
        band_errors(&scaled)
    );
    assert!((0.01..0.5).contains(&all), "the finite amplitude changes w below 10 km by {all}");
    // The collocation is resolved: twice the modes and points change w by far less.
    let fine = FiniteAmplitudeWave::new(&Dycore::new(Case::MountainWave, 250.0, 1).unwrap());
    let resolution = l2_error(&pairs(&at, |x, z| fine.w(x, z), |x, z| finite.w(x, z)), f64::INFINITY, 0.0);
    eprintln!("collocation on 250 m cells against 500 m cells: {resolution:.2e}");
    assert!(resolution < 0.01, "the collocation's resolution changes w by {resolution}");
    // The upward wave of each reference as Split sees the model's (w at each face's height,
    // the levels taken at ζ): the numbers to set beside the model's in the docs.
    let (q0, _) = d.initial();
    for (name, finite_amplitude) in [("finite-amplitude", true), ("linear", false)] {
        let w = |x, z| if finite_amplitude { finite.w(x, z) } else { linear.w(x, z) };
        let mut q = q0.clone();
        for (i, x) in centres(&d).enumerate() {
            for k in 0..d.n[2] as isize - 1 {
                let rho = 0.5 * (q[0].get([i as isize, 0, k]).unwrap() + q[0].get([i as isize, 0, k + 1]).unwrap());
                q[3].set([i as isize, 0, k], rho * w(x, d.height(x, 0.0, (k + 1) as f64 * d.h[2]))).unwrap();
            }
        }
        for (lo, hi) in [(500.0, 3_000.0), (3_000.0, 6_000.0), (6_000.0, 10_000.0)] {
            let s = Split::of(&d, &q, lo, hi);
            eprintln!(
                "{name} reference's upward wave, {lo}-{hi} m: amplitude {:.4}, phase {:+.4} rad",
                s.amplitude, s.phase
            );
        }
    }
}
