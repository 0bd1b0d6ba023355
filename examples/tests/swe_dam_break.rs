//! 1D dam break (wet on both sides) against Stoker's exact solution: a left-going rarefaction,
//! a constant middle state and a right-going shock. Run along x (data constant in y, periodic
//! in y) at three resolutions for the observed L1 order, and along y, which must give the
//! transposed field.

use stencil_examples::swe::{Edge, Model, Solver, State, G};
use stencil_runtime::{Field2, Host};

const H_L: f64 = 2.0;
const H_R: f64 = 1.0;
/// Domain `[-L/2, L/2]` along the dam-break axis, the dam at 0.
const L: f64 = 10.0;
const T_END: f64 = 0.5;
/// Cells across the other axis (constant data; more than the halo).
const WIDTH: usize = 4;

/// Stoker's solution: the middle depth `h_m` from the Riemann invariant across the rarefaction
/// (`u_m = 2 (c_L − c_m)`) and the Rankine-Hugoniot conditions of a shock into still water
/// (`u_m = (h_m − h_R) √(g (h_m + h_R) / (2 h_m h_R))`), by bisection; then `h(x/t)`.
struct Stoker {
    cl: f64,
    hm: f64,
    cm: f64,
    um: f64,
    shock: f64,
}

impl Stoker {
    fn new(hl: f64, hr: f64) -> Self {
        let cl = (G * hl).sqrt();
        let mismatch = |hm: f64| 2.0 * (cl - (G * hm).sqrt()) - (hm - hr) * (G * (hm + hr) / (2.0 * hm * hr)).sqrt();
        let (mut lo, mut hi) = (hr, hl);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mismatch(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let hm = 0.5 * (lo + hi);
        let cm = (G * hm).sqrt();
        let um = 2.0 * (cl - cm);
        Stoker { cl, hm, cm, um, shock: hm * um / (hm - hr) }
    }

    /// Depth at `xi = x / t`.
    fn h(&self, xi: f64) -> f64 {
        if xi < -self.cl {
            H_L
        } else if xi < self.um - self.cm {
            (2.0 * self.cl - xi).powi(2) / (9.0 * G)
        } else if xi < self.shock {
            self.hm
        } else {
            H_R
        }
    }

    /// The cell average of `h` over `[x0, x1]` at time `t` (Simpson, 64 panels).
    fn average(&self, x0: f64, x1: f64, t: f64) -> f64 {
        let m = 64;
        let dx = (x1 - x0) / m as f64;
        let s: f64 = (0..=m)
            .map(|k| {
                let w = if k == 0 || k == m {
                    1.0
                } else if k % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                w * self.h((x0 + k as f64 * dx) / t)
            })
            .sum();
        s * dx / 3.0 / (x1 - x0)
    }
}

/// Runs the dam break with `n` cells along `axis` until `T_END`; returns the final state.
fn run(n: usize, axis: usize) -> (Model, State<Field2<f64>>) {
    let dx = L / n as f64;
    let mut cells = [WIDTH; 2];
    cells[axis] = n;
    let mut edges = [Edge::Periodic; 2];
    edges[axis] = Edge::Outflow;
    let model = Model { n: cells, dx: [dx; 2], edges, cfl: 0.4 };
    let q0 = model.initial(|c| [if c[axis] < 0.0 { H_L } else { H_R }, 0.0, 0.0]);
    let mut solver = Solver::new(Host, model, &q0).unwrap();
    solver.run_until(T_END, |_| {}).unwrap();
    assert!((solver.t - T_END).abs() < 1e-12, "ended at t = {}", solver.t);
    (model, solver.state().unwrap())
}

/// L1 error of `h` along x (row `j = 0`) against Stoker's cell averages.
fn l1_error(exact: &Stoker, model: &Model, state: &State<Field2<f64>>) -> f64 {
    let n = model.n[0];
    let dx = model.dx[0];
    (0..n as isize)
        .map(|i| {
            let xc = model.centre([i, 0])[0];
            (state.h.get([i, 0]).unwrap() - exact.average(xc - 0.5 * dx, xc + 0.5 * dx, T_END)).abs() * dx
        })
        .sum()
}

#[test]
fn stoker_dam_break_converges_at_first_order() {
    let exact = Stoker::new(H_L, H_R);
    eprintln!(
        "Stoker: h_m = {:.6}, u_m = {:.6}, shock speed {:.6}, rarefaction from {:.6} to {:.6}",
        exact.hm,
        exact.um,
        exact.shock,
        -exact.cl,
        exact.um - exact.cm
    );
    // The waves stay inside the domain.
    assert!(exact.shock * T_END < 0.45 * L && exact.cl * T_END < 0.45 * L);
    let sizes = [100, 200, 400, 800];
    let mut errors = Vec::new();
    for n in sizes {
        let (model, state) = run(n, 0);
        // Constant in y.
        for j in 1..WIDTH as isize {
            for i in 0..n as isize {
                assert_eq!(state.h.get([i, j]), state.h.get([i, 0]));
                assert_eq!(state.hv.get([i, j]), Some(0.0));
            }
        }
        let e = l1_error(&exact, &model, &state);
        eprintln!("n = {n:4}: L1 error of h = {e:.4e}");
        errors.push(e);
    }
    for k in 1..sizes.len() {
        let rate = (errors[k - 1] / errors[k]).log2();
        eprintln!("n = {} -> {}: observed L1 order {rate:.3}", sizes[k - 1], sizes[k]);
        assert!(rate > 0.7 && rate < 1.5, "observed order {rate}");
    }
    assert!(errors[sizes.len() - 1] < 2e-2, "L1 error {}", errors[sizes.len() - 1]);
}

#[test]
fn dam_break_along_y_is_the_transpose() {
    let n = 200;
    let (_, x) = run(n, 0);
    let (_, y) = run(n, 1);
    let mut worst = 0.0f64;
    let mut bitwise = true;
    for j in 0..WIDTH as isize {
        for i in 0..n as isize {
            for (a, b) in [(&x.h, &y.h), (&x.hu, &y.hv), (&x.hv, &y.hu)] {
                let (a, b) = (a.get([i, j]).unwrap(), b.get([j, i]).unwrap());
                bitwise &= a.to_bits() == b.to_bits();
                worst = worst.max((a - b).abs());
            }
        }
    }
    eprintln!("dam break along x vs along y (transposed): max |difference| = {worst:.3e}, bitwise equal: {bitwise}");
    assert!(worst <= 1e-13, "max difference {worst}");
}
