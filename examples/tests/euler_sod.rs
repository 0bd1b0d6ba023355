//! Sod's shock tube along x, y and z (1D data in an n x 4 x 4 grid, periodic across, outflow at
//! the ends) against the exact Riemann solution at t = 0.2: L1 error of density at two
//! resolutions, the observed rate, and the three directions agreeing.

use stencil_examples::euler::{exact_riemann, Boundary, Euler, Riemann, GAMMA};
use stencil_runtime::Host;

const LEFT: [f64; 3] = [1.0, 0.0, 1.0];
const RIGHT: [f64; 3] = [0.125, 0.0, 0.1];
const T_END: f64 = 0.2;

/// The density along `axis` after Sod's problem to `T_END` on `n` cells (others 4 cells, the
/// same spacing), from the first transverse row; every row is checked to be the same.
fn run(axis: usize, n: usize, riemann: Riemann) -> Vec<f64> {
    let mut e = Euler::cube(n, 1.0);
    e.n = [4; 3];
    e.n[axis] = n;
    e.boundaries = [Boundary::Periodic; 3];
    e.boundaries[axis] = Boundary::Outflow;
    e.riemann = riemann;
    let q = e.from_primitive(|x| {
        let [r, _, p] = if x[axis] < 0.5 { LEFT } else { RIGHT };
        [r, 0.0, 0.0, 0.0, p]
    });
    let (q, _) = e.run(&Host, &q, T_END, 1, |_, _| {}).expect("runs");
    let mut rho = vec![f64::NAN; n];
    e.for_each_cell(&q, |c, q| {
        let i = c[axis];
        if rho[i].is_nan() {
            rho[i] = q[0];
        } else {
            assert_eq!(rho[i].to_bits(), q[0].to_bits(), "transverse rows differ at cell {c:?}");
        }
    });
    rho
}

/// L1 error of `rho` against the exact cell averages (8 samples per cell).
fn l1_error(rho: &[f64]) -> f64 {
    let h = 1.0 / rho.len() as f64;
    let exact = |i: usize| {
        (0..8)
            .map(|s| {
                let x = (i as f64 + (s as f64 + 0.5) / 8.0) * h;
                exact_riemann(LEFT, RIGHT, GAMMA, (x - 0.5) / T_END)[0]
            })
            .sum::<f64>()
            / 8.0
    };
    rho.iter().enumerate().map(|(i, r)| (r - exact(i)).abs() * h).sum()
}

#[test]
fn exact_solver_matches_toro() {
    // Toro, table 4.2 (test 1): p* = 0.30313, u* = 0.92745.
    let star = exact_riemann(LEFT, RIGHT, GAMMA, 0.92745);
    assert!((star[2] - 0.30313).abs() < 1e-5 && (star[1] - 0.92745).abs() < 1e-5, "{star:?}");
}

#[test]
fn sod_converges() {
    for riemann in [Riemann::Hllc, Riemann::Rusanov] {
        let (coarse, fine) = (run(0, 100, riemann), run(0, 200, riemann));
        let (e1, e2) = (l1_error(&coarse), l1_error(&fine));
        let rate = (e1 / e2).log2();
        eprintln!("sod {riemann:?}: L1(rho) n=100 {e1:.4e}, n=200 {e2:.4e}, observed rate {rate:.2}");
        assert!(e1 < 0.02 && e2 < e1, "errors {e1} {e2}");
        assert!(rate > 0.5, "rate {rate}");
    }
}

#[test]
fn sod_directions_agree() {
    let x = run(0, 100, Riemann::Hllc);
    for axis in [1, 2] {
        let other = run(axis, 100, Riemann::Hllc);
        let diff = x.iter().zip(&other).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        let bitwise = x.iter().zip(&other).all(|(a, b)| a.to_bits() == b.to_bits());
        eprintln!("sod along axis {axis} vs x: max |diff| {diff:.3e}, bitwise equal: {bitwise}");
        assert!(diff < 1e-12, "axis {axis} differs from x by {diff}");
    }
}
