//! The Schär et al. (2002) mountain wave (U = 10 m/s, N = 0.01/s, the 250 m mountain with 4 km
//! ripples) at a CI spacing (Δx = 1 km, Δζ = 600 m, a 60 km periodic domain, 2 h) against the
//! steady linear solution of `stencil_examples::mountain_wave`: the vertical velocity below
//! 10 km has the linear solution's shape and size over both coordinates (SLEVE, whose surfaces
//! lose the ripples within a few km, and Gal-Chen, whose surfaces carry them to the lid), and the
//! mass is conserved. The Boussinesq reference (Klemp et al.'s closed form) and the compressible
//! one (the linearised compressible equations over the model's sounding) give the same error
//! within a point, and the model's wave is mostly upward. The paper's resolution (Δx = 500 m,
//! Δζ = 300 m, 200 km, 6 h) and its error are on the `dycore` examples page.

use stencil_examples::checkpoint::Plan;
use stencil_examples::dycore::{Case, Coordinate, Dycore, MomentumAdvection};
use stencil_examples::mountain_wave::{compare, l2_error, Reference, Split};
use stencil_runtime::Host;

/// The normalised L2 error of w below 10 km (against the Boussinesq and the compressible
/// reference), the largest |w| of model and linear solution, the relative mass change and the
/// split of the wave into upward and downward parts.
fn run(coordinate: Coordinate, momentum: MomentumAdvection) -> ([f64; 2], f64, f64, f64, Split) {
    let mut d = Dycore::new(Case::MountainWave, 1000.0, 1).unwrap();
    d.n[0] = 60;
    d.coordinate = coordinate;
    d.momentum = momentum;
    let (q0, _) = d.initial();
    let (q, steps, _) = d.run(&Host, 7_200.0, &Plan::none(), |_, _| {}).unwrap();
    let points = compare(&d, &q, 10_000.0, Reference::Boussinesq);
    let e = l2_error(&points, f64::INFINITY, 0.0);
    let e_compressible = l2_error(&compare(&d, &q, 10_000.0, Reference::Compressible), f64::INFINITY, 0.0);
    let split = Split::of(&d, &q, 2_000.0, 10_000.0);
    let max = |v: usize| points.iter().map(|p| p[v].abs()).fold(0.0, f64::max);
    let mass = (d.mass(&q) - d.mass(&q0)) / d.mass(&q0);
    eprintln!(
        "{coordinate:?}, {momentum:?}: {steps} steps, L2 error {e:.3} (compressible reference {e_compressible:.3}), max |w| {:.3} \
         (linear {:.3}), mass {mass:.1e}, {split:?}",
        max(2),
        max(3)
    );
    ([e, e_compressible], max(2), max(3), mass, split)
}

/// The largest downward wave (relative to the upward) between 2 and 10 km: 0.023 (SLEVE) and
/// 0.026 (Gal-Chen); without the sponge 0.23 for both (and L2 errors of 0.41).
const SPLIT_DOWN: f64 = 0.1;

#[test]
fn vertical_velocity_follows_linear_theory_over_either_coordinate() {
    let (sleve, gal_chen) = std::thread::scope(|s| {
        let other = s.spawn(|| run(Coordinate::GalChen, MomentumAdvection::Koren));
        (run(Coordinate::Sleve, MomentumAdvection::Koren), other.join().expect("the Gal-Chen run"))
    });
    for (name, ([e, e_compressible], w_max, w_linear, mass, split)) in [("SLEVE", sleve), ("Gal-Chen", gal_chen)] {
        // 0.36 for both; with θ itself limited (not its deviation from θ̄) 0.43 and 0.90.
        assert!(e < 0.4, "{name}: L2 error {e}");
        assert!((0.6..1.3).contains(&(w_max / w_linear)), "{name}: max |w| {w_max} against the linear {w_linear}");
        assert!(mass.abs() < 1e-12, "{name}: mass {mass}");
        // The references differ by 0.5 % of w below 10 km: the error is the model's, not theirs.
        assert!((e - e_compressible).abs() < 0.01, "{name}: {e} against the compressible reference's {e_compressible}");
        assert!(split.downward < SPLIT_DOWN, "{name}: downward wave {split:?}");
    }
}

/// Unlimited third-order momentum fluxes (`MomentumAdvection::Upwind3`) do not clip the wave's
/// crests: over SLEVE the error against the linear solution is lower than with Koren's limiter
/// (0.300 against 0.359) and the upward wave's amplitude nearer the reference's (0.888 against
/// 0.826), with the mass conserved.
#[test]
fn unlimited_momentum_fluxes_keep_more_of_the_wave() {
    let ([koren, _], _, _, _, koren_split) = run(Coordinate::Sleve, MomentumAdvection::Koren);
    let ([unlimited, _], _, _, mass, split) = run(Coordinate::Sleve, MomentumAdvection::Upwind3);
    assert!(unlimited < koren - 0.03, "L2 error {unlimited} unlimited against {koren} with Koren's limiter");
    assert!(
        (split.amplitude - 1.0).abs() < (koren_split.amplitude - 1.0).abs() - 0.03,
        "the upward wave's amplitude {} unlimited, {} with Koren's limiter",
        split.amplitude,
        koren_split.amplitude
    );
    assert!(mass.abs() < 1e-12, "mass {mass}");
    assert!(split.downward < SPLIT_DOWN, "downward wave {split:?}");
}
