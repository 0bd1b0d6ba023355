//! Order of accuracy on a smooth density wave advected through a periodic box (uniform velocity
//! and pressure): the exact solution is the initial wave shifted, the L1 error of density should
//! fall about 4x per halving of h.

use stencil_examples::checkpoint::Plan;
use stencil_examples::euler::{Boundary, Euler, Limiter};
use stencil_runtime::Host;

const T_END: f64 = 0.25;

/// L1 error of density after advecting `1 + 0.2 sin(2πx)` at u = 1 to `T_END` on n x 4 x 4 cells.
fn error(n: usize, limiter: Limiter) -> f64 {
    let mut e = Euler::cube(n, 1.0);
    e.n = [n, 4, 4];
    e.boundaries = [Boundary::Periodic; 3];
    e.limiter = limiter;
    let wave = |x: f64| 1.0 + 0.2 * (2.0 * std::f64::consts::PI * x).sin();
    let q = e.from_primitive(|x| [wave(x[0]), 1.0, 0.0, 0.0, 1.0]);
    let (q, _, _) = e.run(&Host, &q, T_END, 1, &Plan::none(), |_, _| {}).expect("runs");
    let h = e.h[0];
    // Exact cell averages of the shifted wave.
    let avg = |i: usize| {
        let (a, b) = (i as f64 * h - T_END, (i as f64 + 1.0) * h - T_END);
        let k = 2.0 * std::f64::consts::PI;
        1.0 + 0.2 * ((k * a).cos() - (k * b).cos()) / (k * h)
    };
    let mut sum = 0.0;
    e.for_each_cell(&q, |c, q| sum += (q[0] - avg(c[0])).abs());
    sum * h / 16.0
}

#[test]
fn smooth_wave_is_second_order() {
    for limiter in [Limiter::Koren, Limiter::Minmod] {
        let errors: Vec<f64> = [32, 64, 128].iter().map(|&n| error(n, limiter)).collect();
        let orders: Vec<f64> = errors.windows(2).map(|w| (w[0] / w[1]).log2()).collect();
        eprintln!(
            "density wave {limiter:?}: L1 n=32 {:.3e}, n=64 {:.3e}, n=128 {:.3e}; observed orders {:.2}, {:.2}",
            errors[0], errors[1], errors[2], orders[0], orders[1]
        );
        if limiter == Limiter::Koren {
            assert!(orders[1] > 1.8, "order {orders:?}");
        } else {
            assert!(orders[1] > 1.4, "order {orders:?}");
        }
    }
}
