//! The circular dam break in a walled square box: the solution keeps the symmetries of the
//! problem (x ↔ −x, y ↔ −y, x ↔ y), bit for bit, and its mass to round-off.

use stencil_examples::swe::{circular_dam, Edge, Model, Solver, State};
use stencil_runtime::{Field2, Host};

const N: usize = 96;
const STEPS: usize = 150;

fn model() -> Model {
    Model { n: [N, N], dx: [0.25, 0.25], edges: [Edge::Wall; 2], cfl: 0.4 }
}

fn run(steps: usize) -> (Model, State<Field2<f64>>, State<Field2<f64>>) {
    let model = model();
    let q0 = model.initial(circular_dam(6.0, 2.0, 1.0));
    let mut solver = Solver::new(Host, model, &q0).unwrap();
    for _ in 0..steps {
        solver.cfl_step(None).unwrap();
    }
    (model, q0, solver.state().unwrap())
}

/// Largest difference between `value(p)` and `sign · other(map(p))` over the interior, relative
/// to the largest `|value|`, and whether every pair is bitwise equal.
fn compare(a: &Field2<f64>, b: &Field2<f64>, sign: f64, map: impl Fn([isize; 2]) -> [isize; 2]) -> (f64, bool) {
    let (mut worst, mut scale, mut bitwise) = (0.0f64, 0.0f64, true);
    for j in 0..N as isize {
        for i in 0..N as isize {
            let x = a.get([i, j]).unwrap();
            let y = sign * b.get(map([i, j])).unwrap();
            bitwise &= x.to_bits() == y.to_bits() || (x == 0.0 && y == 0.0);
            worst = worst.max((x - y).abs());
            scale = scale.max(x.abs());
        }
    }
    (worst / scale.max(f64::MIN_POSITIVE), bitwise)
}

#[test]
fn circular_dam_break_keeps_its_symmetries() {
    let (_, _, q) = run(STEPS);
    let n = N as isize;
    let flip_x = |[i, j]: [isize; 2]| [n - 1 - i, j];
    let flip_y = |[i, j]: [isize; 2]| [i, n - 1 - j];
    let transpose = |[i, j]: [isize; 2]| [j, i];
    let checks = [
        ("h(x, y) = h(-x, y)", compare(&q.h, &q.h, 1.0, flip_x)),
        ("hu(x, y) = -hu(-x, y)", compare(&q.hu, &q.hu, -1.0, flip_x)),
        ("hv(x, y) = hv(-x, y)", compare(&q.hv, &q.hv, 1.0, flip_x)),
        ("h(x, y) = h(x, -y)", compare(&q.h, &q.h, 1.0, flip_y)),
        ("hu(x, y) = hu(x, -y)", compare(&q.hu, &q.hu, 1.0, flip_y)),
        ("hv(x, y) = -hv(x, -y)", compare(&q.hv, &q.hv, -1.0, flip_y)),
        ("h(x, y) = h(y, x)", compare(&q.h, &q.h, 1.0, transpose)),
        ("hu(x, y) = hv(y, x)", compare(&q.hu, &q.hv, 1.0, transpose)),
    ];
    for (what, (rel, bitwise)) in checks {
        eprintln!("{N}x{N}, {STEPS} steps: {what:<24} max rel. difference {rel:.3e}, bitwise: {bitwise}");
        assert!(rel <= 1e-12, "{what}: {rel}");
        // Achieved so far: every mirror/transposed pair is bit-identical (see swe.rs: minmod,
        // HLL and the update are written to be exactly odd/even under mirroring).
        assert!(bitwise, "{what}: not bitwise symmetric");
    }
    // The waves have reached the walls and come back: not a trivial state.
    let corner = q.h.get([0, 0]).unwrap();
    assert!(corner > 1.01, "corner depth {corner}");
}

#[test]
fn mass_is_conserved_with_walls() {
    let (model, q0, q) = run(STEPS);
    let (m0, m1) = (model.mass(&q0), model.mass(&q));
    let rel = (m1 - m0).abs() / m0;
    eprintln!("{N}x{N}, {STEPS} steps: mass {m0:.15e} -> {m1:.15e}, relative change {rel:.3e}");
    assert!(rel < 1e-12, "relative mass change {rel}");
}
