//! Spatial order of the acoustic model's 25-point stencil: a standing wave
//! `u = sin(k·x) cos(ωt)`, `k = 2π(1, 1, 1)`, `ω = V|k|`, in the periodic unit box (the halo is
//! refilled periodically before every step, so the stencil runs unchanged everywhere), run to
//! `ωT = 1/2` with a time step small enough that the scheme's 2nd-order time error (relative
//! frequency error `(ωΔt)²/24`) is far below the spatial error on every grid. The error then
//! falls as `h⁸`.

use stencil_examples::acoustic::{Coefficients, RegionStrategies, State, Wave};
use stencil_runtime::prelude::*;
use stencil_runtime::HaloFill;

/// Refills the halo of `f` with the periodic images of the interior, on every axis in one call.
fn fill_periodic(f: &mut Field3<f64>) {
    Host.fill_halos(&mut [(f, [Some(HaloFill::Periodic); 3])]).unwrap();
}

/// Max error against the exact standing wave on an `n³` grid after `steps` steps of `dt`.
fn error(n: usize, dt: f64, steps: usize) -> f64 {
    let shape = Shape3::new([n; 3]).halo(4);
    let h = 1.0 / n as f64;
    let k = 2.0 * std::f64::consts::PI;
    let omega = k * 3f64.sqrt();
    let mode = |g: [isize; 3]| (k * h * (g[0] + g[1] + g[2]) as f64).sin();
    let mut state = State {
        u: Field3::from_fn(shape, mode),
        u_prev: Field3::from_fn(shape, |g| mode(g) * (omega * dt).cos()),
        vdt2: Field3::filled(shape, dt * dt),
        eta: Field3::zeros(shape),
        phi: Field3::zeros(shape),
    };
    let regions = Loop3D::interior(&shape).split_boundary(BoundaryWidths::uniform(0)).unwrap();
    let c = Coefficients::new([h; 3]);
    for _ in 0..steps {
        fill_periodic(&mut state.u);
        f64::step(&Host, &RegionStrategies::default(), &regions, &c, &mut state, &[]).unwrap();
    }
    let t = steps as f64 * dt;
    let mut max = 0.0f64;
    for k in 0..n as isize {
        for j in 0..n as isize {
            for i in 0..n as isize {
                let exact = mode([i, j, k]) * (omega * t).cos();
                max = max.max((state.u.get([i, j, k]).unwrap() - exact).abs());
            }
        }
    }
    max
}

#[test]
fn error_falls_at_eighth_order() {
    // ωT = 1/2 in 2000 steps: ωΔt = 2.5e-4, relative frequency error from time stepping
    // ~2.6e-9, about 3% of the spatial one on the finest grid (~8e-8).
    let steps = 2000;
    let omega = 2.0 * std::f64::consts::PI * 3f64.sqrt();
    let dt = 0.5 / omega / steps as f64;
    let grids = [8, 12, 16];
    let errors: Vec<f64> = grids.iter().map(|&n| error(n, dt, steps)).collect();
    let mut orders = Vec::new();
    for w in 0..grids.len() - 1 {
        let order = (errors[w] / errors[w + 1]).ln() / (grids[w + 1] as f64 / grids[w] as f64).ln();
        eprintln!(
            "n {:2} -> {:2}: max error {:.3e} -> {:.3e}, observed order {order:.2}",
            grids[w],
            grids[w + 1],
            errors[w],
            errors[w + 1]
        );
        orders.push(order);
    }
    for (w, order) in orders.iter().enumerate() {
        assert!((7.0..9.5).contains(order), "observed order {order:.2} between n = {} and {}", grids[w], grids[w + 1]);
    }
}
