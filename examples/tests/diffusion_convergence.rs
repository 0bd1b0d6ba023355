//! The diffusion example converges at second order: halving dx (and quartering dt, so the same
//! end time takes four times the steps) cuts the error against the analytic heat kernel ~4x.

use stencil_examples::checkpoint::Plan;
use stencil_examples::diffusion::{run, Real, Setup};
use stencil_runtime::{Host, Order};

/// Relative L2 errors on 32^3 (16 steps) and 64^3 (64 steps): the same end time.
fn errors<T: Real>(order: Order) -> (f64, f64) {
    let run = |n: usize, steps: usize| {
        let setup = Setup { order, ..Setup::cube(n, steps) };
        let (f, _) = run::<Host, T>(&Host, &setup, &Plan::none(), |_| {}).expect("launch");
        let t = steps as f64 * setup.dt();
        assert!(setup.wall_value(t) < 1e-6, "the Gaussian reached the walls: {}", setup.wall_value(t));
        setup.error(&f, t)[0]
    };
    let (coarse, fine) = (run(32, 16), run(64, 64));
    eprintln!("{} {order:?}: rel L2 error {coarse:e} on 32^3, {fine:e} on 64^3, ratio {}", T::NAME, coarse / fine);
    assert!(fine < 1e-2, "error {fine:e} on 64^3 is not small");
    (coarse, fine)
}

#[test]
fn error_falls_about_fourfold_when_dx_halves_f64() {
    let (coarse, fine) = errors::<f64>(Order::Ijk);
    assert!(coarse / fine > 3.0, "rel L2 error {coarse:e} on 32^3, {fine:e} on 64^3: ratio {}", coarse / fine);
}

#[test]
fn error_falls_about_fourfold_when_dx_halves_f32_kij() {
    let (coarse, fine) = errors::<f32>(Order::Kij);
    assert!(coarse / fine > 3.0, "rel L2 error {coarse:e} on 32^3, {fine:e} on 64^3: ratio {}", coarse / fine);
}
