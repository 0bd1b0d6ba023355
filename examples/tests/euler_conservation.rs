//! Conservation of mass, momentum and energy with periodic boundaries, and the fused and split
//! stages agreeing bit for bit.

use stencil_examples::euler::{Euler, Riemann, Scheme, State};
use stencil_runtime::Host;

#[test]
fn periodic_totals_are_conserved_and_fused_equals_split() {
    let base = Euler::cube(16, 1.0);
    let tau = 2.0 * std::f64::consts::PI;
    let q0 = base.from_primitive(|[x, y, z]| {
        [
            1.0 + 0.3 * (tau * x).sin() * (tau * y).cos() + 0.1 * (tau * z).sin(),
            0.3 + 0.2 * (tau * (y + z)).sin(),
            -0.2 + 0.1 * (tau * (x - z)).cos(),
            0.1 + 0.2 * (tau * (x + 2.0 * y)).sin(),
            1.0 + 0.2 * (tau * (x + y + z)).cos(),
        ]
    });
    let start = base.totals(&q0);
    let dt = base.dt(&Host, &State::new(&Host, &base, &q0).expect("a state")).expect("a time step");
    for riemann in [Riemann::Hllc, Riemann::Rusanov] {
        let mut ends = Vec::new();
        for scheme in [Scheme::Fused, Scheme::Split] {
            let e = Euler { riemann, scheme, ..base };
            let mut s = State::new(&Host, &e, &q0).expect("a state");
            for _ in 0..20 {
                e.step(&Host, &mut s, dt).expect("steps");
            }
            let end = e.totals(&s.q);
            // Relative to the total of |q| (the momentum totals are not far from zero).
            let mut scale = [0.0; 5];
            e.for_each_cell(&s.q, |_, q| (0..5).for_each(|v| scale[v] += q[v].abs() * e.h.iter().product::<f64>()));
            let rel: Vec<f64> = (0..5).map(|v| (end[v] - start[v]).abs() / scale[v]).collect();
            eprintln!(
                "{riemann:?} {scheme:?}: 20 steps, totals {start:.6?} -> {end:.6?}, relative change {:?}",
                rel.iter().map(|r| format!("{r:.1e}")).collect::<Vec<_>>()
            );
            assert!(rel.iter().all(|r| *r < 1e-12), "{rel:?}");
            ends.push(s.q);
        }
        let same = (0..5)
            .all(|v| ends[0][v].as_slice().iter().zip(ends[1][v].as_slice()).all(|(a, b)| a.to_bits() == b.to_bits()));
        eprintln!("{riemann:?}: fused and split bitwise equal after 20 steps: {same}");
        assert!(same, "fused and split differ");
    }
}
