//! Adjoint stencils from `#[stencil(adjoint(..))]`, held to the dot-product test in `f64`:
//! `⟨F x, y⟩ = ⟨x, Fᵀ y⟩` to a relative error of at most 1e-12, with random inputs, random fixed
//! fields and random sub-ranges, on the host executor. `F` is the forward stencil as compiled (its
//! linear part: the forward's other inputs are zero or held fixed), `Fᵀ` the generated adjoint.
//!
//! Each case runs the adjoint two ways: over the forward range `R` itself (the adjoint of the
//! forward with every input outside `R` held fixed, so `x` is zero there), and over `R` grown by
//! the reach (every input a variable). The cotangents `y` are random everywhere, also outside `R`
//! (the range mask must ignore them), and the adjoint's outputs start random (it accumulates:
//! the test subtracts their start, and checks that no point outside the adjoint's range changed).
//!
//! A planted bug must fail: the adjoint's IR with one cotangent load's offset flipped, run by the
//! IR interpreter of the fuzz tests (which runs the honest IR to the same result as the nest).

use stencil_runtime::codegen::ir::{ExprKind, ParamKind, StencilIr, Stmt};
use stencil_runtime::cuda_source::cuda_kernel;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Distributed, Loop, Stencil};
use stencil_tests::adjoint_check::{dot, interpret, random_on, sub_range};
use stencil_tests::{for_each_in_range, nb, random, range_contains, SplitMix64};

mod common;

const TOL: f64 = 1e-12;

// ---- The stencils ----

/// A 7-point explicit diffusion step.
#[stencil(adjoint(u))]
fn diffusion(idx: Idx3, k: f64, u: &Field3<f64>, u_new: &mut Field3<f64>) {
    let near = u[idx.ix::<1, 0, 0>()]
        + u[idx.ix::<-1, 0, 0>()]
        + u[idx.ix::<0, 1, 0>()]
        + u[idx.ix::<0, -1, 0>()]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    u_new[idx] = u[idx] + k * (near - 6.0 * u[idx]);
}

/// A second-order wave update with a variable velocity: `u⁺ = 2u − u⁻ + dt² c² Δu`.
#[stencil(adjoint(u, u_prev))]
fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + dt2 * c[idx] * c[idx] * lap;
}

/// [`wave`] with its products fused (`#[stencil(fma)]`): the adjoint is derived from the unfused
/// IR and fused in turn; both still transpose each other to rounding.
#[stencil(fma, adjoint(u, u_prev))]
fn wave_fma(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + dt2 * c[idx] * c[idx] * lap;
}

/// The 25-point eighth-order star, accumulated into its output (`out += c · Δ₈u`).
#[stencil(adjoint(u))]
fn star8(idx: Idx3, w: [f64; 5], c: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    let mut lap = 3.0 * w[0] * u[idx];
    for r in 1..=4 {
        lap += w[r] * (u[idx.ix(r, 0, 0)] + u[idx.ix(-r, 0, 0)]);
        lap += w[r] * (u[idx.ix(0, r, 0)] + u[idx.ix(0, -r, 0)]);
        lap += w[r] * (u[idx.ix(0, 0, r)] + u[idx.ix(0, 0, -r)]);
    }
    out[idx] += c[idx] * lap;
}

/// A damped wave step (a PML-like damping field `d`): divisions and products by fixed fields.
/// Also as one reverse time step (`DampedAdjointStep`), and in scaled cotangents
/// (`DampedScaledAdjointStep`, `DampedCotangentScale`).
#[stencil(adjoint(u, u_prev), adjoint_step(u, u_prev), scaled_adjoint_step(u, u_prev))]
fn damped(
    idx: Idx3,
    dt: f64,
    c2: &Field3<f64>,
    d: &Field3<f64>,
    u: &Field3<f64>,
    u_prev: &Field3<f64>,
    u_next: &mut Field3<f64>,
) {
    let lap = u[idx.ix::<1, 0, 0>()]
        + u[idx.ix::<-1, 0, 0>()]
        + u[idx.ix::<0, 1, 0>()]
        + u[idx.ix::<0, -1, 0>()]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()]
        - 6.0 * u[idx];
    let damp = d[idx] * dt;
    u_next[idx] = (2.0 * u[idx] - (1.0 - damp) * u_prev[idx] + dt * dt * c2[idx] * lap) / (1.0 + damp);
}

/// Diffusion in divergence form with a coefficient averaged onto the faces (coefficients read at
/// neighbours, so the adjoint must evaluate them at shifted points), and a branch on a fixed field.
#[stencil(adjoint(u))]
fn faces(idx: Idx3, k: &Field3<f64>, region: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    let east = 0.5 * (k[idx] + k[idx.ix::<1, 0, 0>()]) * (u[idx.ix::<1, 0, 0>()] - u[idx]);
    let west = 0.5 * (k[idx] + k[idx.ix::<-1, 0, 0>()]) * (u[idx] - u[idx.ix::<-1, 0, 0>()]);
    let north = 0.5 * (k[idx] + k[idx.ix::<0, 1, 0>()]) * (u[idx.ix::<0, 1, 0>()] - u[idx]);
    let south = 0.5 * (k[idx] + k[idx.ix::<0, -1, 0>()]) * (u[idx] - u[idx.ix::<0, -1, 0>()]);
    let mut v = east - west + north - south;
    if region[idx] > 0.0 {
        v = v.mul_add(2.0, u[idx.ix::<0, 0, 1>()] / k[idx]);
    }
    out[idx] = if region[idx.ix::<0, 0, -1>()] < 0.5 { v } else { -v };
}

/// A generic stencil: its adjoint is generic too.
#[stencil(adjoint(u))]
fn heat<T>(idx: Idx2, k: T, u: &Field2<T>, out: &mut Field2<T>) {
    out[idx] = u[idx] + k * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] - 3.0 * u[idx]);
}

/// A helper function a stencil calls.
#[stencil_fn]
fn second_difference(left: f64, centre: f64, right: f64) -> f64 {
    left - 2.0 * centre + right
}

/// A group of fields and a helper: the adjoint of a group is a group (`q_bar: [&mut ..; 2]`).
#[stencil(adjoint(q))]
fn coupled(idx: Idx2, w: [f64; 2], q: [&Field2<f64>; 2], out: &mut Field2<f64>) {
    let dx = second_difference(q[0][idx.ix::<-1, 0>()], q[0][idx], q[0][idx.ix::<1, 0>()]);
    let dy = second_difference(q[1][idx.ix::<0, -1>()], q[1][idx], q[1][idx.ix::<0, 1>()]);
    out[idx] = w[0] * dx + w[1] * dy - q[1][idx.ix::<1, 1>()];
}

// ---- The harness ----

/// A forward launch: linear inputs `x`, the output.
type Forward<'a, const D: usize> = dyn Fn(&[Field<f64, D>], &mut Field<f64, D>) + 'a;
/// An adjoint launch: the inputs' cotangents (accumulated into), the output's, the range mask.
type Adjoint<'a, const D: usize> = dyn Fn(&mut [Field<f64, D>], &Field<f64, D>, &Field<f64, D>) + 'a;

/// The dot-product test of one stencil with `inputs` linear inputs, over the forward range `r`
/// and the adjoint range `q`: `forward(x, out)` runs the forward over `r` into a zeroed `out`;
/// `adjoint(x_bar, y, mask)` runs the adjoint over `q`. Returns the relative error.
fn dot_test<const D: usize>(
    shape: Shape<D>,
    inputs: usize,
    r: &Loop<D>,
    q: &Loop<D>,
    rng: &mut SplitMix64,
    forward: &Forward<'_, D>,
    adjoint: &Adjoint<'_, D>,
) -> f64 {
    let x: Vec<_> = (0..inputs).map(|_| random_on(shape, q, rng, -1.0, 1.0)).collect();
    let mut fx = Field::zeros(shape);
    forward(&x, &mut fx);
    let y = random::<f64, _>(shape, rng, -1.0, 1.0);
    let start: Vec<_> = (0..inputs).map(|_| random::<f64, _>(shape, rng, -1.0, 1.0)).collect();
    let mut x_bar: Vec<_> = start.iter().map(|s| s.try_clone().expect("clone")).collect();
    adjoint(&mut x_bar, &y, &stencil_runtime::adjoint::range_mask(shape, r));
    let lhs = dot(&fx, &y, r);
    let mut rhs = 0.0;
    for (i, (xb, s)) in x_bar.iter().zip(&start).enumerate() {
        let whole = Loop::whole(&shape);
        for_each_in_range(&whole, &shape, |g| {
            let (after, before) = (nb(xb, g, [0; D]), nb(s, g, [0; D]));
            if range_contains(q, &shape, g) {
                rhs += nb(&x[i], g, [0; D]) * (after - before);
            } else {
                assert_eq!(after.to_bits(), before.to_bits(), "input {i}: the adjoint wrote {g:?}, outside its range");
            }
        });
    }
    assert!(lhs.abs() > 1e-3, "a degenerate case: ⟨F x, y⟩ = {lhs}");
    (lhs - rhs).abs() / lhs.abs().max(rhs.abs())
}

/// Runs `check(r, q)` for several random sub-ranges, with `q = r` and `q = r` grown by `reach`.
fn for_ranges<const D: usize>(
    shape: Shape<D>,
    margin: usize,
    reach: usize,
    seed: u64,
    mut check: impl FnMut(&Loop<D>, &Loop<D>, &mut SplitMix64),
) {
    let mut rng = SplitMix64::new(seed);
    for _ in 0..3 {
        let r = sub_range(&shape, margin, &mut rng);
        check(&r, &r, &mut rng);
        let grown = r.grow([reach; D]).expect("the margin leaves room");
        check(&r, &grown, &mut rng);
    }
}

/// `shape` with each element order (axis 0 fastest, and axis 2 fastest).
fn both_orders(shape: Shape3) -> [Shape3; 2] {
    [shape.order(Order::Ijk), shape.order(Order::Kij)]
}

// ---- The dot-product tests ----

#[test]
fn diffusion_dot_product() {
    let shape = Shape3::new([13, 11, 9]).halo(1);
    for_ranges(shape, 3, 1, 0xd1f, |r, q, rng| {
        let k = rng.uniform(0.05, 0.2);
        let err = dot_test(
            shape,
            1,
            r,
            q,
            rng,
            &|x, out| Host.run(r, Diffusion, (k, &x[0], out)).expect("forward"),
            &|xb, y, m| Host.run(q, DiffusionAdjoint, (k, &mut xb[0], y, m)).expect("adjoint"),
        );
        assert!(err <= TOL, "diffusion over {r:?}, adjoint over {q:?}: relative error {err:e}");
    });
}

#[test]
fn wave_dot_product() {
    for shape in both_orders(Shape3::new([12, 10, 11]).halo(1)) {
        for_ranges(shape, 3, 1, 0x3a7e, |r, q, rng| {
            let dt2 = rng.uniform(0.05, 0.3);
            let c = random::<f64, _>(shape, rng, 0.5, 1.5);
            let err = dot_test(
                shape,
                2,
                r,
                q,
                rng,
                &|x, out| Host.run(r, Wave, (dt2, &c, &x[0], &x[1], out)).expect("forward"),
                &|xb, y, m| {
                    let (u_bar, u_prev_bar) = xb.split_at_mut(1);
                    Host.run(q, WaveAdjoint, (dt2, &c, &mut u_bar[0], &mut u_prev_bar[0], y, m)).expect("adjoint")
                },
            );
            assert!(err <= TOL, "wave over {r:?}, adjoint over {q:?}: relative error {err:e}");
        });
    }
}

#[test]
fn fused_wave_dot_product() {
    let shape = Shape3::new([12, 10, 11]).halo(1);
    let mut fused_differs = false;
    for_ranges(shape, 3, 1, 0xf3a, |r, q, rng| {
        let dt2 = rng.uniform(0.05, 0.3);
        let c = random::<f64, _>(shape, rng, 0.5, 1.5);
        let (u, up) = (random::<f64, _>(shape, rng, -1.0, 1.0), random::<f64, _>(shape, rng, -1.0, 1.0));
        let (mut plain, mut fused) = (Field3::zeros(shape), Field3::zeros(shape));
        Host.run(r, Wave, (dt2, &c, &u, &up, &mut plain)).expect("forward");
        Host.run(r, WaveFma, (dt2, &c, &u, &up, &mut fused)).expect("forward");
        fused_differs |= plain.as_slice().iter().zip(fused.as_slice()).any(|(a, b)| a.to_bits() != b.to_bits());
        let err = dot_test(
            shape,
            2,
            r,
            q,
            rng,
            &|x, out| Host.run(r, WaveFma, (dt2, &c, &x[0], &x[1], out)).expect("forward"),
            &|xb, y, m| {
                let (u_bar, u_prev_bar) = xb.split_at_mut(1);
                Host.run(q, WaveFmaAdjoint, (dt2, &c, &mut u_bar[0], &mut u_prev_bar[0], y, m)).expect("adjoint")
            },
        );
        assert!(err <= TOL, "fused wave over {r:?}, adjoint over {q:?}: relative error {err:e}");
    });
    assert!(fused_differs, "the fused wave gave the unfused bits everywhere");
    // The adjoint is fused too (derived from the unfused forward, then fused like any stencil).
    let fused_calls = |ir: &StencilIr| {
        let mut n = 0;
        stencil_runtime::codegen::ir::visit_exprs(&ir.body, &mut |e| {
            n += usize::from(matches!(e.kind, ExprKind::Call(stencil_runtime::codegen::ir::MathFn::MulAdd, _)));
        });
        n
    };
    assert_eq!(fused_calls(<WaveAdjoint as Stencil<3>>::ir()), 0);
    assert!(fused_calls(<WaveFmaAdjoint as Stencil<3>>::ir()) >= 8, "the fused wave's adjoint is not fused");
}

#[test]
fn star8_dot_product() {
    for shape in both_orders(Shape3::new([20, 19, 18]).halo(4)) {
        let w = [-2.847_222_2, 1.6, -0.2, 0.025_396_8, -0.001_785_7];
        for_ranges(shape, 8, 4, 0x25, |r, q, rng| {
            let c = random::<f64, _>(shape, rng, 0.5, 1.5);
            let err = dot_test(
                shape,
                1,
                r,
                q,
                rng,
                &|x, out| Host.run(r, Star8, (w, &c, &x[0], out)).expect("forward"),
                &|xb, y, m| Host.run(q, Star8Adjoint, (w, &c, &mut xb[0], y, m)).expect("adjoint"),
            );
            assert!(err <= TOL, "star8 over {r:?}, adjoint over {q:?}: relative error {err:e}");
        });
    }
}

#[test]
fn damped_dot_product() {
    for shape in both_orders(Shape3::new([11, 12, 10]).halo(1)) {
        for_ranges(shape, 3, 1, 0xda3b, |r, q, rng| {
            let dt = rng.uniform(0.1, 0.5);
            let c2 = random::<f64, _>(shape, rng, 0.5, 2.0);
            let d = random::<f64, _>(shape, rng, 0.0, 3.0);
            let err = dot_test(
                shape,
                2,
                r,
                q,
                rng,
                &|x, out| Host.run(r, Damped, (dt, &c2, &d, &x[0], &x[1], out)).expect("forward"),
                &|xb, y, m| {
                    let (u_bar, u_prev_bar) = xb.split_at_mut(1);
                    Host.run(q, DampedAdjoint, (dt, &c2, &d, &mut u_bar[0], &mut u_prev_bar[0], y, m)).expect("adjoint")
                },
            );
            assert!(err <= TOL, "damped over {r:?}, adjoint over {q:?}: relative error {err:e}");
        });
    }
}

#[test]
fn shifted_coefficients_and_branches_dot_product() {
    let shape = Shape3::new([12, 12, 10]).halo(1);
    for_ranges(shape, 3, 1, 0xface, |r, q, rng| {
        let k = random::<f64, _>(shape, rng, 0.5, 2.0);
        let region = random::<f64, _>(shape, rng, -1.0, 1.0);
        let err = dot_test(
            shape,
            1,
            r,
            q,
            rng,
            &|x, out| Host.run(r, Faces, (&k, &region, &x[0], out)).expect("forward"),
            &|xb, y, m| Host.run(q, FacesAdjoint, (&k, &region, &mut xb[0], y, m)).expect("adjoint"),
        );
        assert!(err <= TOL, "faces over {r:?}, adjoint over {q:?}: relative error {err:e}");
    });
}

#[test]
fn generic_dot_product_2d() {
    let shape = Shape2::new([17, 15]).halo(1);
    for_ranges(shape, 3, 1, 0x2d, |r, q, rng| {
        let k = rng.uniform(0.1, 0.3);
        let err = dot_test(
            shape,
            1,
            r,
            q,
            rng,
            &|x, out| Host.run(r, Heat::<f64>::new(), (k, &x[0], out)).expect("forward"),
            &|xb, y, m| Host.run(q, HeatAdjoint::<f64>::new(), (k, &mut xb[0], y, m)).expect("adjoint"),
        );
        assert!(err <= TOL, "heat over {r:?}, adjoint over {q:?}: relative error {err:e}");
    });
    // The f32 instance exists and runs.
    let (u, mut ub) = (Field2::<f32>::filled(shape, 1.0), Field2::<f32>::zeros(shape));
    let r = Loop2D::interior(&shape);
    let m = Field2::<f32>::from_fn(shape, |g| if range_contains(&r, &shape, g) { 1.0 } else { 0.0 });
    Host.run(&r, HeatAdjoint::<f32>::new(), (0.25, &mut ub, &u, &m)).expect("f32 adjoint");
}

#[test]
fn groups_and_helpers_dot_product() {
    let shape = Shape2::new([14, 13]).halo(1);
    for_ranges(shape, 3, 1, 0x9a, |r, q, rng| {
        let w = [rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5)];
        let err = dot_test(
            shape,
            2,
            r,
            q,
            rng,
            &|x, out| Host.run(r, Coupled, (w, [&x[0], &x[1]], out)).expect("forward"),
            &|xb, y, m| {
                let (a, b) = xb.split_at_mut(1);
                Host.run(q, CoupledAdjoint, (w, [&mut a[0], &mut b[0]], y, m)).expect("adjoint")
            },
        );
        assert!(err <= TOL, "coupled over {r:?}, adjoint over {q:?}: relative error {err:e}");
    });
}

// ---- Other executors and strategies ----

/// The wave's adjoint on four host subdomains gives the host's bits (its cotangent and mask are
/// read at offsets, so their halos travel between subdomains first).
#[test]
fn the_adjoint_on_subdomains_gives_the_host_bits() {
    let n = [14, 12, 10];
    let shape = Shape3::new(n).halo(2);
    let mut rng = SplitMix64::new(0xd15);
    let r = Loop3D::interior(&shape).shrink([1; 3]);
    let q = r.grow([1; 3]).expect("room");
    let c = random::<f64, _>(shape, &mut rng, 0.5, 1.5);
    let y = random::<f64, _>(shape, &mut rng, -1.0, 1.0);
    let m = stencil_runtime::adjoint::range_mask(shape, &r);
    let start = [random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0)];
    let [mut a, mut b] = [start[0].try_clone().expect("clone"), start[1].try_clone().expect("clone")];
    Host.run(&q, WaveAdjoint, (0.2, &c, &mut a, &mut b, &y, &m)).expect("host");
    let grid = Decomposition::new(n, [2, 2, 1], [false; 3], [2; 3]).expect("grid");
    let exec = Distributed::host(grid).expect("subdomains");
    let (dc, dy, dm) = (exec.upload(&c).expect("c"), exec.upload(&y).expect("y"), exec.upload(&m).expect("m"));
    let (mut da, mut db) = (exec.upload(&start[0]).expect("a"), exec.upload(&start[1]).expect("b"));
    exec.run(&q, WaveAdjoint, (0.2, &dc, &mut da, &mut db, &dy, &dm)).expect("subdomains");
    for (host, sub) in [(&a, &da), (&b, &db)] {
        let got = exec.read_range(sub, &q).expect("read");
        assert!(
            got.iter().zip(host.read_range(&q).expect("read")).all(|(x, y)| x.to_bits() == y.to_bits()),
            "subdomains and host differ"
        );
    }
}

/// Every GPU strategy prints the adjoint's kernel (the printing path of any stencil; whether it
/// compiles and runs is for a machine with a GPU).
#[test]
fn every_strategy_prints_the_adjoint() {
    let shape = Shape3::new([40, 36, 32]).halo(4);
    let range = Loop3D::interior(&shape);
    for strategy in common::strategies() {
        let kernel = cuda_kernel::<Star8Adjoint, 3>(strategy, &shape, &range).expect("a kernel");
        assert!(kernel.source.contains("out_bar"), "{strategy:?}: no cotangent in\n{}", kernel.source);
    }
}

// ---- A planted bug ----

/// The adjoint's IR (its point functions inlined) with one offset flipped: the first cotangent
/// load (a read-only field the forward writes, `.._bar`) at a nonzero offset, in the scaled
/// cotangents the body gathers, reads at the negated offset instead.
fn flip_one_offset(ir: &StencilIr) -> StencilIr {
    fn flip(e: &mut stencil_runtime::codegen::ir::Expr, ir: &StencilIr, done: &mut bool) {
        if *done {
            return;
        }
        match &mut e.kind {
            ExprKind::Load { field, offset } => {
                let cotangent = matches!(ir.params[*field].kind, ParamKind::Field(f) if !f.writable)
                    && ir.params[*field].name.ends_with("_bar");
                if cotangent && *offset != [0; 3] {
                    *offset = offset.map(|v| -v);
                    *done = true;
                }
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => flip(a, ir, done),
            ExprKind::Binary(_, a, b) => {
                flip(a, ir, done);
                flip(b, ir, done);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(|a| flip(a, ir, done)),
            ExprKind::Select(c, a, b) => {
                flip(c, ir, done);
                flip(a, ir, done);
                flip(b, ir, done);
            }
            _ => {}
        }
    }
    let mut out = ir.clone();
    let mut done = false;
    for stmt in &mut out.body {
        if let Stmt::Let { init: Some(value), .. } | Stmt::Store { value, .. } = stmt {
            flip(value, ir, &mut done);
        }
    }
    assert!(done, "no cotangent load at a nonzero offset in {}", ir.name);
    out
}

/// The wave's adjoint IR run by the interpreter passes the dot-product test; with one offset
/// flipped it fails.
#[test]
fn a_flipped_offset_fails_the_dot_product_test() {
    let shape = Shape3::new([11, 10, 9]).halo(1);
    let ir = <WaveAdjoint as Stencil<3>>::ir();
    let flipped = flip_one_offset(ir);
    let mut rng = SplitMix64::new(0xbad);
    let r = sub_range(&shape, 3, &mut rng);
    let q = r.grow([1; 3]).expect("room");
    let dt2 = 0.2;
    let c = random::<f64, _>(shape, &mut rng, 0.5, 1.5);
    let run = |adjoint: &StencilIr, rng: &mut SplitMix64| {
        dot_test(
            shape,
            2,
            &r,
            &q,
            rng,
            &|x, out| Host.run(&r, Wave, (dt2, &c, &x[0], &x[1], out)).expect("forward"),
            &|xb, y, m| {
                // Parameters: dt2, c, u_bar, u_prev_bar, u_next_bar, range_mask.
                let mut fields = vec![
                    None,
                    Some(c.try_clone().expect("clone")),
                    Some(xb[0].try_clone().expect("clone")),
                    Some(xb[1].try_clone().expect("clone")),
                    Some(y.try_clone().expect("clone")),
                    Some(m.try_clone().expect("clone")),
                ];
                interpret(adjoint, &q, &mut fields, &[dt2]);
                xb[0] = fields[2].take().expect("u_bar");
                xb[1] = fields[3].take().expect("u_prev_bar");
            },
        )
    };
    let honest = run(ir, &mut rng.clone());
    assert!(honest <= TOL, "the interpreted adjoint: relative error {honest:e}");
    let planted = run(&flipped, &mut rng);
    assert!(planted > 1e-6, "a flipped offset passed the dot-product test: relative error {planted:e}");
}

/// The compiled adjoint computes what the interpreter computes from its IR.
#[test]
fn the_compiled_adjoint_matches_its_ir() {
    let shape = Shape3::new([10, 9, 8]).halo(1);
    let mut rng = SplitMix64::new(0x1e);
    let r = sub_range(&shape, 3, &mut rng);
    let q = r.grow([1; 3]).expect("room");
    let dt2 = 0.3;
    let c = random::<f64, _>(shape, &mut rng, 0.5, 1.5);
    let (y, m) = (random::<f64, _>(shape, &mut rng, -1.0, 1.0), stencil_runtime::adjoint::range_mask(shape, &r));
    let (mut u_bar, mut u_prev_bar) =
        (random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
    let clone = |f: &Field3<f64>| Some(f.try_clone().expect("clone"));
    let mut fields = vec![None, clone(&c), clone(&u_bar), clone(&u_prev_bar), clone(&y), clone(&m)];
    interpret(<WaveAdjoint as Stencil<3>>::ir(), &q, &mut fields, &[dt2]);
    Host.run(&q, WaveAdjoint, (dt2, &c, &mut u_bar, &mut u_prev_bar, &y, &m)).expect("adjoint");
    for (got, want) in [(&u_bar, &fields[2]), (&u_prev_bar, &fields[3])] {
        let want = want.as_ref().expect("a field");
        for_each_in_range(&Loop3D::whole(&shape), &shape, |g| {
            let (x, w) = (nb(got, g, [0; 3]), nb(want, g, [0; 3]));
            assert!((x - w).abs() <= 1e-14 * w.abs().max(1.0), "compiled {x} and interpreted {w} at {g:?}");
        });
    }
}

/// The passes of the GPU's two-pass strategies (`passes::materialise`), run by the IR
/// interpreter, give the one-pass adjoint's bits: the point pass over the adjoint range, the
/// first over the range grown by the offsets of the written-out scaled cotangents, the second
/// over the range, the scratch field starting with stale values. Two planted bugs fail: the first pass one point short of the
/// grown range at one end (a stale scratch value read), and one tap of the second pass dropped.
#[test]
fn the_two_passes_give_the_one_pass_bits_and_planted_bugs_do_not() {
    use stencil_runtime::codegen::passes::{inline_point_fns, materialise};
    let shape = Shape3::new([11, 10, 9]).halo(1);
    let mut rng = SplitMix64::new(0x2fa);
    let r = Loop3D::interior(&shape).shrink([1; 3]);
    let q = r.grow([1; 3]).expect("room");
    let dt = 0.3;
    let (c2, d) = (random::<f64, _>(shape, &mut rng, 0.5, 1.5), random::<f64, _>(shape, &mut rng, 0.0, 0.5));
    let (y, m) = (random::<f64, _>(shape, &mut rng, -1.0, 1.0), stencil_runtime::adjoint::range_mask(shape, &r));
    let (u_bar, u_prev_bar) =
        (random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
    let clone = |f: &Field3<f64>| Some(f.try_clone().expect("clone"));
    // Parameters: dt, c2, d, u_bar, u_prev_bar, u_next_bar, range_mask (then the scratch fields).
    let start = || vec![None, clone(&c2), clone(&d), clone(&u_bar), clone(&u_prev_bar), clone(&y), clone(&m)];
    let bits = |fields: &[Option<Field3<f64>>]| {
        let mut out = Vec::new();
        for p in [3, 4] {
            let f = fields[p].as_ref().expect("a cotangent");
            for_each_in_range(&Loop3D::whole(&shape), &shape, |g| out.push(nb(f, g, [0; 3]).to_bits()));
        }
        out
    };
    let mut one = start();
    interpret(<DampedAdjoint as Stencil<3>>::ir(), &q, &mut one, &[dt]);
    let split = materialise(<DampedAdjoint as Stencil<3>>::source_ir()).expect("a split");
    assert_eq!(split.values.len(), 1, "one scaled cotangent is read at neighbours");
    assert_eq!(split.first.len(), 1, "one value, one box of offsets, one first pass");
    let (first, second) = (inline_point_fns(&split.first[0].ir), inline_point_fns(&split.second));
    // `u_prev_bar`'s sum and the start of `u_bar`'s (up to the first neighbour's term) need values
    // at the point only: the point pass does them.
    let point = inline_point_fns(split.point.as_ref().expect("a point pass"));
    assert_eq!(second.body.len(), 1, "the second pass adds only into u_bar");
    let stale = random::<f64, _>(shape, &mut rng, -1.0, 1.0);
    let grown = |short: usize| {
        let (b, e, lo, hi) = (q.begin(), q.end(), split.first[0].lo, split.first[0].hi);
        let end: [usize; 3] = std::array::from_fn(|a| (e[a] + hi[a] as isize) as usize - usize::from(a == 0) * short);
        let begin: [usize; 3] = std::array::from_fn(|a| (b[a] as isize + lo[a] as isize) as usize);
        Loop3D::from_bounds(shape.extent(), begin, end).expect("inside")
    };
    let two = |first_range: &Loop3D, second: &StencilIr| {
        let mut fields = start();
        // The scratch field starts with stale values, as device memory does: every value the
        // second pass reads must come from the first.
        fields.push(Some(stale.try_clone().expect("clone")));
        // The point pass over the range (the parts of the sums at the point, and the values
        // there), then the first pass over the rest of the grown range (run over all of it, its
        // values on the range itself thrown away, as the GPU does not compute them there).
        interpret(&point, &q, &mut fields, &[dt]);
        let on_range = fields[7].as_ref().expect("scratch").try_clone().expect("clone");
        interpret(&first, first_range, &mut fields, &[dt]);
        let scratch = fields[7].as_mut().expect("scratch");
        for_each_in_range(&q, &shape, |g| scratch.set(g, nb(&on_range, g, [0; 3])).expect("inside"));
        interpret(second, &q, &mut fields, &[dt]);
        fields
    };
    assert!(bits(&two(&grown(0), &second)) == bits(&one), "the two passes differ from the one-pass adjoint");
    assert!(bits(&two(&grown(1), &second)) != bits(&one), "a first pass one point short passed");
    // The second pass with its first tap at a neighbour dropped (the term replaced by zero).
    let mut dropped = second.clone();
    let mut done = false;
    fn drop_tap(e: &mut stencil_runtime::codegen::ir::Expr, scratch: usize, done: &mut bool) {
        use stencil_runtime::codegen::ir::{BinOp, Literal};
        if *done {
            return;
        }
        match &mut e.kind {
            ExprKind::Binary(BinOp::Mul, _, b) if matches!(b.kind, ExprKind::Load { field, offset } if field == scratch && offset != [0; 3]) =>
            {
                e.kind = ExprKind::Lit(Literal::Float(0.0, 0.0));
                *done = true;
            }
            ExprKind::Binary(_, a, b) => {
                drop_tap(a, scratch, done);
                drop_tap(b, scratch, done);
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => drop_tap(a, scratch, done),
            _ => {}
        }
    }
    for stmt in &mut dropped.body {
        if let Stmt::Store { value, .. } = stmt {
            drop_tap(value, 7, &mut done);
        }
    }
    assert!(done, "no tap of the scratch field at a neighbour in {:?}", dropped.body);
    assert!(bits(&two(&grown(0), &dropped)) != bits(&one), "a dropped tap passed");
}

/// The adjoint's parameters mirror the forward's: same places, roles swapped, the mask last.
#[test]
fn the_adjoint_parameters_mirror_the_forward() {
    let names: Vec<_> = <WaveAdjoint as Stencil<3>>::ir().params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["dt2", "c", "u_bar", "u_prev_bar", "u_next_bar", "range_mask"]);
    let info = <Star8Adjoint as Stencil<3>>::INFO;
    let reach = |name: &str| info.fields.iter().find(|f| f.name == name).map(|f| (f.lo, f.hi, f.writable));
    assert_eq!(reach("out_bar"), Some(([-4, -4, -4], [4, 4, 4], false)));
    assert_eq!(reach("u_bar"), Some(([0; 3], [0; 3], true)));
}

// ---- The adjoint step ----

/// The step `λ⁽ⁿ⁾ = f(λ⁽ⁿ⁺¹⁾, λ⁽ⁿ⁺²⁾)` gives the bits of the accumulating adjoint as a reverse loop
/// runs it: `λ⁽ⁿ⁾` zeroed, the adjoint of step `n + 1` adding its `u_prev` terms from `λ⁽ⁿ⁺²⁾`,
/// then that of step `n` its `u` terms from `λ⁽ⁿ⁺¹⁾`. It writes its range only (the rest stays
/// poisoned) and reads the cotangents only on the forward range (NaN outside it).
#[test]
fn the_adjoint_step_gives_the_accumulating_adjoints_bits() {
    let shape = Shape3::new([11, 12, 10]).halo(1);
    for_ranges(shape, 3, 1, 0x57e9, |r, q, rng| {
        let dt = rng.uniform(0.1, 0.5);
        let (c2, d) = (random::<f64, _>(shape, rng, 0.5, 2.0), random::<f64, _>(shape, rng, 0.0, 3.0));
        let mask = stencil_runtime::adjoint::range_mask(shape, r);
        let poisoned = |rng: &mut SplitMix64| {
            let mut f = random::<f64, _>(shape, rng, -1.0, 1.0);
            for_each_in_range(&Loop3D::whole(&shape), &shape, |g| {
                if !range_contains(r, &shape, g) {
                    f.set(g, f64::NAN).expect("a point of the field");
                }
            });
            f
        };
        let (later, next) = (poisoned(rng), poisoned(rng));
        let mut want = Field::zeros(shape);
        let mut scratch = Field::zeros(shape);
        Host.run(q, DampedAdjoint, (dt, &c2, &d, &mut scratch, &mut want, &later, &mask)).expect("step n + 1");
        Host.run(q, DampedAdjoint, (dt, &c2, &d, &mut want, &mut scratch, &next, &mask)).expect("step n");
        let mut got = Field::filled(shape, f64::NAN);
        Host.run(q, DampedAdjointStep, (dt, &c2, &d, &mut got, &later, &next, &mask)).expect("adjoint step");
        for_each_in_range(&Loop3D::whole(&shape), &shape, |g| {
            let (x, w) = (nb(&got, g, [0; 3]), nb(&want, g, [0; 3]));
            if range_contains(q, &shape, g) {
                assert_eq!(x.to_bits(), w.to_bits(), "at {g:?} over {q:?}: step {x}, accumulated {w}");
            } else {
                assert!(x.is_nan(), "the step wrote {g:?}, outside its range {q:?}");
            }
        });
    });
}

/// The whole reverse loop of adjoint steps against the forward loop: `N` damped wave steps map
/// the initial levels `(u⁰, u⁻¹)` (random on the adjoint range) to the final ones `(uᴺ, uᴺ⁻¹)`;
/// the steps from `λᴺ = y_N`, `λᴺ⁺¹ = 0` (with `y_{N−1}` added to `λᴺ⁻¹`) down to `λ⁰` and
/// `λ⁻¹` give `⟨F x, y⟩ = ⟨x, Fᵀ y⟩` to 1e-12. The step's IR with one tap's offset flipped,
/// run by the IR interpreter in the same loop, fails it.
#[test]
fn the_reverse_loop_of_adjoint_steps_passes_the_dot_product_test() {
    const STEPS: usize = 4;
    type Step<'a> = dyn Fn(&Loop3D, &mut Field3<f64>, &Field3<f64>, &Field3<f64>) + 'a;
    for shape in both_orders(Shape3::new([12, 11, 10]).halo(1)) {
        let mut planted_checked = false;
        for_ranges(shape, 3, 1, 0x1007, |r, q, rng| {
            let dt = rng.uniform(0.1, 0.5);
            let (c2, d) = (random::<f64, _>(shape, rng, 0.5, 2.0), random::<f64, _>(shape, rng, 0.0, 3.0));
            let mask = stencil_runtime::adjoint::range_mask(shape, r);
            let (x0, x_prev) = (random_on(shape, q, rng, -1.0, 1.0), random_on(shape, q, rng, -1.0, 1.0));
            let (y_new, y_old) = (random::<f64, _>(shape, rng, -1.0, 1.0), random::<f64, _>(shape, rng, -1.0, 1.0));
            // levels[k] = u^(k - 1).
            let mut levels = vec![x_prev.try_clone().expect("clone"), x0.try_clone().expect("clone")];
            for n in 0..STEPS {
                let mut next = Field::zeros(shape);
                Host.run(r, Damped, (dt, &c2, &d, &levels[n + 1], &levels[n], &mut next)).expect("forward");
                levels.push(next);
            }
            let lhs = dot(&levels[STEPS + 1], &y_new, r) + dot(&levels[STEPS], &y_old, r);
            assert!(lhs.abs() > 1e-3, "a degenerate case: ⟨F x, y⟩ = {lhs}");
            // The reverse loop of `step` from `λᴺ = newest`, `λᴺ⁺¹ = 0`, with `older` added to `λᴺ⁻¹`
            // (`fill`: the cotangents outside the adjoint range, NaN: never read unmasked);
            // `back` maps the loop's last two fields to λ⁰ and λ⁻¹. Returns the relative error.
            type Back<'a> = dyn Fn(&Field3<f64>) -> Field3<f64> + 'a;
            let reverse = |step: &Step<'_>, fill: f64, newest: &Field3<f64>, older: &Field3<f64>, back: &Back<'_>| {
                // lam[k] = λ^(k - 1).
                let mut lam: Vec<Option<Field3<f64>>> = (0..STEPS + 3).map(|_| None).collect();
                lam[STEPS + 2] = Some(Field::zeros(shape));
                lam[STEPS + 1] = Some(newest.try_clone().expect("clone"));
                for k in (0..=STEPS).rev() {
                    let zeros = Field::zeros(shape);
                    // λ^(-1) is read by step 0 as its older level only.
                    let next = if k == 0 { &zeros } else { lam[k + 1].as_ref().expect("λ") };
                    let mut out = Field::filled(shape, fill);
                    step(q, &mut out, lam[k + 2].as_ref().expect("λ"), next);
                    if k == STEPS {
                        for_each_in_range(q, &shape, |g| {
                            let v = nb(&out, g, [0; 3]) + nb(older, g, [0; 3]);
                            out.set(g, v).expect("a point of the field");
                        });
                    }
                    lam[k] = Some(out);
                }
                let (l0, l_prev) = (back(lam[1].as_ref().expect("λ0")), back(lam[0].as_ref().expect("λ-1")));
                let rhs = dot(&x0, &l0, q) + dot(&x_prev, &l_prev, q);
                (lhs - rhs).abs() / lhs.abs().max(rhs.abs())
            };
            let same = |f: &Field3<f64>| f.try_clone().expect("clone");
            let compiled = |q: &Loop3D, out: &mut Field3<f64>, later: &Field3<f64>, next: &Field3<f64>| {
                Host.run(q, DampedAdjointStep, (dt, &c2, &d, out, later, next, &mask)).expect("adjoint step")
            };
            let err = reverse(&compiled, f64::NAN, &y_new, &y_old, &same);
            assert!(err <= TOL, "{STEPS} damped steps over {r:?}, reversed over {q:?}: relative error {err:e}");
            if q == r {
                // The same loop in scaled cotangents μ = λ / ρ, zero outside the forward range (every
                // field starts zeroed): y enters as y / ρ, and λ⁰ = ρ μ⁰, λ⁻¹ = ρ μ⁻¹.
                let mut rho = Field::zeros(shape);
                Host.run(r, DampedCotangentScale, (dt, &c2, &d, &mut rho)).expect("scale");
                let over = |f: &Field3<f64>| {
                    let mut out = Field::zeros(shape);
                    for_each_in_range(r, &shape, |g| {
                        out.set(g, nb(f, g, [0; 3]) / nb(&rho, g, [0; 3])).expect("a point")
                    });
                    out
                };
                let lambda = |f: &Field3<f64>| {
                    let mut out = Field::zeros(shape);
                    for_each_in_range(r, &shape, |g| {
                        out.set(g, nb(f, g, [0; 3]) * nb(&rho, g, [0; 3])).expect("a point")
                    });
                    out
                };
                let (newest, older) = (over(&y_new), over(&y_old));
                let scaled_reverse = |step: &Step<'_>| reverse(step, 0.0, &newest, &older, &lambda);
                let compiled = |q: &Loop3D, out: &mut Field3<f64>, later: &Field3<f64>, next: &Field3<f64>| {
                    Host.run(q, DampedScaledAdjointStep, (dt, &c2, &d, out, later, next)).expect("scaled step")
                };
                let err = scaled_reverse(&compiled);
                assert!(
                    err <= TOL,
                    "{STEPS} damped steps over {r:?}, reversed in scaled cotangents: relative error {err:e}"
                );
                // The scaled step's IR with one tap's offset flipped, run by the interpreter, fails it.
                let flipped = flip_one_offset(<DampedScaledAdjointStep as Stencil<3>>::ir());
                let interpreted = |q: &Loop3D, out: &mut Field3<f64>, later: &Field3<f64>, next: &Field3<f64>| {
                    // Parameters: dt, c2, d, u_bar, u_next_bar_2, u_next_bar.
                    let clone = |f: &Field3<f64>| Some(f.try_clone().expect("clone"));
                    let mut fields = vec![None, clone(&c2), clone(&d), clone(out), clone(later), clone(next)];
                    interpret(&flipped, q, &mut fields, &[dt]);
                    *out = fields[3].take().expect("u_bar");
                };
                let planted = scaled_reverse(&interpreted);
                assert!(planted > 1e-6, "a flipped offset passed the scaled reverse loop: relative error {planted:e}");
            }
            if !planted_checked {
                let flipped = flip_one_offset(<DampedAdjointStep as Stencil<3>>::ir());
                let interpreted = |q: &Loop3D, out: &mut Field3<f64>, later: &Field3<f64>, next: &Field3<f64>| {
                    // Parameters: dt, c2, d, u_bar, u_next_bar_2, u_next_bar, range_mask.
                    let clone = |f: &Field3<f64>| Some(f.try_clone().expect("clone"));
                    let mut fields =
                        vec![None, clone(&c2), clone(&d), clone(out), clone(later), clone(next), clone(&mask)];
                    interpret(&flipped, q, &mut fields, &[dt]);
                    *out = fields[3].take().expect("u_bar");
                };
                assert!(
                    reverse(&interpreted, f64::NAN, &y_new, &y_old, &same).is_nan(),
                    "the flipped tap reads outside the forward range"
                );
                let planted = reverse(&interpreted, 0.0, &y_new, &y_old, &same);
                assert!(planted > 1e-6, "a flipped offset passed the reverse loop's test: relative error {planted:e}");
                planted_checked = true;
            }
        });
    }
}

#[test]
fn the_adjoint_step_parameters_follow_the_forward() {
    let names: Vec<&str> = <DampedAdjointStep as Stencil<3>>::ir().params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["dt", "c2", "d", "u_bar", "u_next_bar_2", "u_next_bar", "range_mask"]);
}

/// On a GPU, every strategy runs the 25-point star's and the damped wave's adjoints over the
/// grown range with the host's bits (the same accumulation order, no contraction), so the
/// dot-product tests above hold there too.
#[cfg(feature = "cuda")]
#[test]
fn every_strategy_runs_the_adjoint_on_a_gpu_with_the_host_bits() {
    use stencil_runtime::cuda::Gpu;
    let gpu = Gpu::new(0).expect("a CUDA device");
    let shape = Shape3::new([41, 36, 30]).halo(4);
    let mut rng = SplitMix64::new(0x6b0);
    let w = [-2.847_222_2, 1.6, -0.2, 0.025_396_8, -0.001_785_7];
    let r = Loop3D::interior(&shape).shrink([4; 3]);
    let q = r.grow([4; 3]).expect("room");
    let (c, y) = (random::<f64, _>(shape, &mut rng, 0.5, 1.5), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
    let m = stencil_runtime::adjoint::range_mask(shape, &r);
    let start = random::<f64, _>(shape, &mut rng, -1.0, 1.0);
    let mut host = start.try_clone().expect("clone");
    Host.run(&q, Star8Adjoint, (w, &c, &mut host, &y, &m)).expect("host");
    let (dc, dy, dm) = (gpu.upload(&c).expect("c"), gpu.upload(&y).expect("y"), gpu.upload(&m).expect("m"));
    let bits = |f: &Field3<f64>| f.read_range(&q).expect("read").iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut strategies = 0;
    let two_pass = [
        stencil_runtime::Strategy::TwoPass { block_x: 64, block_y: 4, points_per_thread: 16 },
        stencil_runtime::Strategy::TwoPass { block_x: 16, block_y: 3, points_per_thread: 5 },
        stencil_runtime::Strategy::TwoPassStream { tile_x: 32, tile_y: 8 },
        stencil_runtime::Strategy::TwoPassStream { tile_x: 16, tile_y: 5 },
    ];
    for strategy in common::strategies().into_iter().chain(two_pass) {
        let mut dx = gpu.upload(&start).expect("x");
        gpu.run_with(&q, Star8Adjoint, Some(strategy), (w, &dc, &mut dx, &dy, &dm)).expect("adjoint on the GPU");
        assert_eq!(bits(&gpu.download(&dx).expect("download")), bits(&host), "star8 adjoint, {strategy}");
        strategies += 1;
    }
    eprintln!("star8 adjoint: {strategies} strategies on the GPU give the host bits");
}
