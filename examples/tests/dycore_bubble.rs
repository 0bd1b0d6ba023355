//! A warm bubble (θ′ = 2 K, radius 2 km, Bryan and Fritsch 2002, dry) rising in a neutral
//! atmosphere, periodic in x: the solution stays mirror symmetric about the bubble's axis to
//! round-off (θ′ and w even, u odd), the mass is conserved to 1e-12 relative, and the bubble
//! rises (its warmest cell moves up, w ≈ several m/s).

use stencil_examples::checkpoint::Plan;
use stencil_examples::dycore::{Case, Dycore, Precision};
use stencil_runtime::{Field3, Host};

fn at(f: &Field3<f64>, i: usize, k: usize) -> f64 {
    f.get([i as isize, 0, k as isize]).unwrap()
}

#[test]
fn the_bubble_rises_symmetric_to_round_off_and_conserves_mass() {
    let d = Dycore::new(Case::Bubble, 500.0, 1).unwrap();
    let (q0, _) = d.initial();
    let (q, steps, _) = d.run(&Host, 400.0, &Plan::none(), |_, _| {}).unwrap();
    let [nx, _, nz] = d.n;
    // Mirror: cell i <-> nx-1-i; u face i (i+1/2) <-> face nx-2-i (face nx-1 is its own image,
    // periodic with face -1).
    let (mut asym_t, mut asym_u, mut asym_w, mut scale_u) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for k in 0..nz {
        for i in 0..nx {
            let m = nx - 1 - i;
            let theta = |i| at(&q[4], i, k) / at(&q[0], i, k);
            asym_t = asym_t.max((theta(i) - theta(m)).abs());
            asym_w = asym_w.max((at(&q[3], i, k) - at(&q[3], m, k)).abs());
            let mu = (2 * nx - 2 - i) % nx;
            asym_u = asym_u.max((at(&q[1], i, k) + at(&q[1], mu, k)).abs());
            scale_u = scale_u.max(at(&q[1], i, k).abs());
        }
    }
    let mass = (d.mass(&q) - d.mass(&q0)) / d.mass(&q0);
    let (um, wm) = d.max_wind(&q);
    let warmest =
        |q: &[Field3<f64>; 5]| d.theta_prime(q).into_iter().max_by(|a, b| a.3.total_cmp(&b.3)).map(|c| c.2).unwrap();
    eprintln!(
        "{steps} steps: asymmetry theta {asym_t:.1e} K, U {asym_u:.1e} (max {scale_u:.1e}), W {asym_w:.1e}; mass \
         {mass:.1e}; max |u| {um:.2} m/s, |w| {wm:.2} m/s; warmest level {} -> {}",
        warmest(&q0),
        warmest(&q)
    );
    assert!(asym_t < 1e-10, "theta asymmetry {asym_t}");
    assert!(asym_u < 1e-10 * scale_u.max(1.0), "u asymmetry {asym_u}");
    assert!(asym_w < 1e-10 * scale_u.max(1.0), "w asymmetry {asym_w}");
    assert!(mass.abs() < 1e-12, "mass change {mass}");
    assert!(wm > 2.0 && wm < 20.0, "max w {wm}");
    assert!(warmest(&q) > warmest(&q0), "the bubble rises");
}

#[test]
fn in_single_precision_the_bubble_follows_the_double_precision_run() {
    let mut d = Dycore::new(Case::Bubble, 500.0, 1).unwrap();
    let (q0, _) = d.initial();
    let (wide, ..) = d.run(&Host, 400.0, &Plan::none(), |_, _| {}).unwrap();
    d.precision = Precision::F32;
    let (single, ..) = d.run(&Host, 400.0, &Plan::none(), |_, _| {}).unwrap();
    let (t64, t32) = (d.theta_prime(&wide), d.theta_prime(&single));
    let dt = t64.iter().zip(&t32).map(|(a, b)| (a.3 - b.3).abs()).fold(0.0, f64::max);
    let dw = (0..d.n[0]).flat_map(|i| (0..d.n[2]).map(move |k| (i, k)));
    let dw = dw.map(|(i, k)| (at(&wide[3], i, k) - at(&single[3], i, k)).abs()).fold(0.0, f64::max);
    let mass = (d.mass(&single) - d.mass(&q0)) / d.mass(&q0);
    let ((_, w64), (_, w32)) = (d.max_wind(&wide), d.max_wind(&single));
    eprintln!("f32 against f64: theta' {dt:.1e} K, W {dw:.1e}; max |w| {w32:.4} against {w64:.4} m/s; mass {mass:.1e}");
    assert!(dt > 0.0 && dt < 2e-3, "theta' differs by {dt} K");
    assert!((w32 - w64).abs() < 1e-3 * w64, "max w {w32} against {w64}");
    assert!(mass.abs() < 1e-7 && mass != 0.0, "mass change {mass}");
}
