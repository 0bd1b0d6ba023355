//! The gravity source term: a uniform gas at rest in a periodic box (no flux divergence) falls
//! freely, `ρw = −ρ g t` and `E = E₀ + ρ g² t² / 2`, and SSP-RK3 is exact for this quadratic-in-
//! time solution, so the numbers must match to round-off, under both schemes and solvers.

use stencil_examples::euler::{Euler, Riemann, Scheme, State};
use stencil_runtime::Host;

#[test]
fn uniform_gas_falls_freely() {
    let g = 9.81;
    let base = Euler { gravity: g, ..Euler::cube(8, 1.0) };
    let (rho, p) = (1.3, 2.0);
    let q0 = base.from_primitive(|_| [rho, 0.0, 0.0, 0.0, p]);
    let e0 = p / (base.gamma - 1.0);
    let dt = 1e-3;
    for riemann in [Riemann::Hllc, Riemann::Rusanov] {
        for scheme in [Scheme::Fused, Scheme::Split] {
            let e = Euler { riemann, scheme, ..base };
            let mut s = State::new(&Host, &e, &q0).expect("a state");
            let steps = 25;
            for _ in 0..steps {
                e.step(&Host, &mut s, dt).expect("steps");
            }
            let t = steps as f64 * dt;
            let (mut worst_w, mut worst_e, mut worst_other) = (0.0f64, 0.0f64, 0.0f64);
            e.for_each_cell(&s.q, |_, q| {
                worst_w = worst_w.max((q[3] - (-rho * g * t)).abs() / (rho * g * t));
                worst_e = worst_e.max((q[4] - (e0 + 0.5 * rho * g * g * t * t)).abs() / e0);
                worst_other = worst_other.max((q[0] - rho).abs().max(q[1].abs()).max(q[2].abs()));
            });
            eprintln!(
                "{riemann:?} {scheme:?}: t = {t}: rel error of rho w {worst_w:.1e}, of E {worst_e:.1e}; \
                 rho, rho u, rho v off by {worst_other:.1e}"
            );
            assert!(worst_w < 1e-12 && worst_e < 1e-12 && worst_other < 1e-12);
        }
    }
}
