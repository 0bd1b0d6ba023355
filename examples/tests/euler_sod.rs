//! Sod's shock tube along x, y and z (1D data in an n x 4 x 4 grid, periodic across, outflow at
//! the ends) against the exact Riemann solution at t = 0.2: L1 error of density at two
//! resolutions, the observed rate, and the three directions agreeing.

use stencil_examples::checkpoint::Plan;
use stencil_examples::euler::{Boundary, Euler, Riemann, GAMMA};
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
    let (q, _, _) = e.run(&Host, &q, T_END, 1, &Plan::none(), |_, _| {}).expect("runs");
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

/// The exact solution of the 1D Riemann problem of the Euler equations (Toro, chapter 4): the
/// primitive state `(ρ, u, p)` at `ξ = x / t` of the initial states `left` and `right`
/// (each `(ρ, u, p)`), for the validation tests. Newton iteration on the star pressure.
fn exact_riemann(left: [f64; 3], right: [f64; 3], gamma: f64, xi: f64) -> [f64; 3] {
    let g = gamma;
    let [rl, ul, pl] = left;
    let [rr, ur, pr] = right;
    let (cl, cr) = ((g * pl / rl).sqrt(), (g * pr / rr).sqrt());
    // The pressure function of one side and its derivative.
    let side = |p: f64, rk: f64, pk: f64, ck: f64| -> (f64, f64) {
        if p > pk {
            let (a, b) = (2.0 / ((g + 1.0) * rk), (g - 1.0) / (g + 1.0) * pk);
            let s = (a / (p + b)).sqrt();
            ((p - pk) * s, s * (1.0 - 0.5 * (p - pk) / (b + p)))
        } else {
            let r = p / pk;
            (2.0 * ck / (g - 1.0) * (r.powf((g - 1.0) / (2.0 * g)) - 1.0), r.powf(-(g + 1.0) / (2.0 * g)) / (rk * ck))
        }
    };
    let mut p = (0.5 * (pl + pr) - 0.125 * (ur - ul) * (rl + rr) * (cl + cr)).max(1e-8);
    for _ in 0..100 {
        let ((fl, dl), (fr, dr)) = (side(p, rl, pl, cl), side(p, rr, pr, cr));
        let next = (p - (fl + fr + ur - ul) / (dl + dr)).max(1e-12);
        let change = 2.0 * (next - p).abs() / (next + p);
        p = next;
        if change < 1e-15 {
            break;
        }
    }
    let u = 0.5 * (ul + ur) + 0.5 * (side(p, rr, pr, cr).0 - side(p, rl, pl, cl).0);
    let g6 = (g - 1.0) / (g + 1.0);
    if xi <= u {
        if p > pl {
            let s = ul - cl * ((g + 1.0) / (2.0 * g) * p / pl + (g - 1.0) / (2.0 * g)).sqrt();
            if xi <= s {
                left
            } else {
                [rl * (p / pl + g6) / (g6 * p / pl + 1.0), u, p]
            }
        } else if xi <= ul - cl {
            left
        } else if xi > u - cl * (p / pl).powf((g - 1.0) / (2.0 * g)) {
            [rl * (p / pl).powf(1.0 / g), u, p]
        } else {
            let c = 2.0 / (g + 1.0) * (cl + 0.5 * (g - 1.0) * (ul - xi));
            [
                rl * (c / cl).powf(2.0 / (g - 1.0)),
                2.0 / (g + 1.0) * (cl + 0.5 * (g - 1.0) * ul + xi),
                pl * (c / cl).powf(2.0 * g / (g - 1.0)),
            ]
        }
    } else if p > pr {
        let s = ur + cr * ((g + 1.0) / (2.0 * g) * p / pr + (g - 1.0) / (2.0 * g)).sqrt();
        if xi >= s {
            right
        } else {
            [rr * (p / pr + g6) / (g6 * p / pr + 1.0), u, p]
        }
    } else if xi >= ur + cr {
        right
    } else if xi <= u + cr * (p / pr).powf((g - 1.0) / (2.0 * g)) {
        [rr * (p / pr).powf(1.0 / g), u, p]
    } else {
        let c = 2.0 / (g + 1.0) * (cr - 0.5 * (g - 1.0) * (ur - xi));
        [
            rr * (c / cr).powf(2.0 / (g - 1.0)),
            2.0 / (g + 1.0) * (-cr + 0.5 * (g - 1.0) * ur + xi),
            pr * (c / cr).powf(2.0 * g / (g - 1.0)),
        ]
    }
}

/// Each step sized from the state before (`dt_lagged`, what `euler3d` does by default): at CFL
/// 0.5 Sod's problem runs to the same accuracy as with each step sized from its own state; at
/// CFL 1 the first steps, whose waves speed up, exceed the limit of 1 and the run stops with
/// an error that says what to change.
#[test]
fn lagged_step_sizes_keep_the_accuracy_and_stop_past_the_cfl_limit() {
    let sod = |cfl: f64, lagged: bool| {
        let mut e = Euler::cube(64, 1.0);
        e.n = [64, 4, 4];
        e.boundaries = [Boundary::Outflow, Boundary::Periodic, Boundary::Periodic];
        (e.cfl, e.dt_lagged) = (cfl, lagged);
        let q = e.from_primitive(|x| {
            let [r, _, p] = if x[0] < 0.5 { LEFT } else { RIGHT };
            [r, 0.0, 0.0, 0.0, p]
        });
        let out = e.run(&Host, &q, T_END, 1, &Plan::none(), |_, _| {});
        out.map(|(q, steps, _)| {
            let mut rho = vec![0.0; 64];
            e.for_each_cell(&q, |c, q| rho[c[0]] = q[0]);
            (l1_error(&rho), steps)
        })
    };
    let ((own, own_steps), (lagged, lagged_steps)) = (sod(0.5, false).unwrap(), sod(0.5, true).unwrap());
    eprintln!(
        "L1 error: {own:.5} ({own_steps} steps) sized from each step's state, {lagged:.5} ({lagged_steps}) lagged"
    );
    assert!(own != lagged && (lagged - own).abs() < 0.05 * own, "{own} against {lagged}");
    let e = sod(1.0, true).unwrap_err().to_string();
    assert!(e.contains("was taken from the state one step before") && e.contains("lower the CFL number"), "{e}");
    assert!(sod(1.0, false).is_ok(), "sized from its own state, CFL 1 runs");
}
