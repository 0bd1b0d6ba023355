//! The Straka et al. (1993) density current at CI resolutions (Δx = Δz = 800 m and 400 m, ν =
//! 75 m²/s, 900 s): as the grid refines, the front position and the minimum θ′ move toward the
//! published reference (front ≈ 15.5 km from the centre, θ′min ≈ −9.8 K at Δx ≤ 50 m), from the
//! side of the coarse grids (a coarse grid smears the cold pool: a slower front, a weaker
//! minimum). The 200 m, 100 m and 50 m figures are on the `dycore` examples page.

use stencil_examples::checkpoint::Plan;
use stencil_examples::dycore::{Case, Dycore};
use stencil_runtime::Host;

/// Front (m) and θ′min (K) at 900 s and the relative mass change at spacing `dx`.
fn straka(dx: f64) -> (f64, f64, f64) {
    let d = Dycore::new(Case::Straka, dx, 1).unwrap();
    let (q0, _) = d.initial();
    let (q, steps, _) = d.run(&Host, 900.0, &Plan::none(), |_, _| {}).unwrap();
    let (front, tmin) = d.front(&q);
    let mass = (d.mass(&q) - d.mass(&q0)) / d.mass(&q0);
    eprintln!("dx = {dx} m: {steps} steps, front {front:.0} m, theta'min {tmin:.3} K, mass change {mass:.1e}");
    (front, tmin, mass)
}

#[test]
fn front_and_minimum_converge_toward_the_reference() {
    let (front_ref, tmin_ref) = (15_500.0, -9.8);
    let coarse = straka(800.0);
    let fine = straka(400.0);
    for (f, t, m) in [coarse, fine] {
        // Both within the range the coarse runs of Straka et al. (1993) span.
        assert!((11_000.0..16_500.0).contains(&f), "front {f}");
        assert!((-10.5..-3.0).contains(&t), "theta'min {t}");
        assert!(m.abs() < 1e-12, "mass change {m}");
    }
    assert!(fine.0 > coarse.0 && fine.0 < front_ref + 500.0, "the front moves toward 15.5 km: {coarse:?} -> {fine:?}");
    assert!(
        (fine.0 - front_ref).abs() < 0.7 * (coarse.0 - front_ref).abs(),
        "the front's error shrinks: {coarse:?} -> {fine:?}"
    );
    assert!(fine.1 < coarse.1 - 1.0, "theta'min deepens toward -9.8 K: {coarse:?} -> {fine:?}");
    assert!((fine.1 - tmin_ref).abs() < (coarse.1 - tmin_ref).abs(), "theta'min error shrinks");
}
