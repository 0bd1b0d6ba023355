//! Gradient stencils from `#[stencil(gradient(..))]` and the checkpointed reverse time loop
//! (`stencil_runtime::revolve::reverse`), in `f64` on the host (and on host subdomains).
//!
//! One step: `G = (∂F/∂p)ᵀ`, the generated gradient stencil, against a hand-written tangent
//! stencil `T = ∂F/∂p` (an independent reference): the dot-product test `⟨T δp, y⟩ = ⟨δp, G y⟩`
//! to 1e-12 over random fields and sub-ranges, and the Taylor test of `Φ(p) = ⟨F(p), y⟩`
//! (remainder `Φ(p + h δp) − Φ(p) − h ⟨δp, G y⟩` of order `h²` for an update nonlinear in `p`,
//! round-off for a linear one). A planted sign error in the gradient's IR, run by the IR
//! interpreter, fails.
//!
//! Many steps: a 30-step variable-coefficient wave propagator, the gradient of
//! `J = ½‖u_N − d‖²` with respect to the initial state and the coefficient field, through the
//! checkpointed reverse loop with 3 and 5 slots and with every step stored: bit-equal, a
//! Taylor test, a dot-product test of the whole propagator, and the forward steps counted.

use stencil_runtime::codegen::ir::{Expr, ExprKind, StencilIr, Stmt};
use stencil_runtime::prelude::*;
use stencil_runtime::revolve::{reverse, Schedule};
use stencil_runtime::{Decomposition, Distributed, LaunchError, Loop, Stencil};
use stencil_tests::adjoint_check::{dot, interpret, random_on, sub_range};
use stencil_tests::{for_each_in_range, nb, random, range_contains, SplitMix64};

const TOL: f64 = 1e-12;

// ---- The stencils ----

/// A second-order wave update linear in the coefficient: `u⁺ = 2u − u⁻ + dt² c Δu`.
#[stencil(adjoint(u, u_prev), gradient(c))]
fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + dt2 * c[idx] * lap;
}

/// Its derivative with respect to `c` in the direction `dc`, by hand.
#[stencil]
fn wave_tangent(idx: Idx3, dt2: f64, dc: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    out[idx] = dt2 * dc[idx] * lap;
}

/// The wave in the squared slowness `m` (Devito's parameter), with a damping term in `sqrt(m)`:
/// nonlinear in `m` (a quotient, a product and a chain rule).
#[stencil(gradient(m))]
fn slowness(idx: Idx3, dt2: f64, m: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    let damp = 0.1 * m[idx].sqrt();
    u_next[idx] = (2.0 * u[idx] - (1.0 - damp) * u_prev[idx] + dt2 * lap / m[idx]) / (1.0 + damp);
}

/// Its derivative with respect to `m` in the direction `dm`, by hand.
#[stencil]
fn slowness_tangent(
    idx: Idx3,
    dt2: f64,
    m: &Field3<f64>,
    dm: &Field3<f64>,
    u: &Field3<f64>,
    u_prev: &Field3<f64>,
    out: &mut Field3<f64>,
) {
    let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
        - 6.0 * u[idx]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    let s = m[idx].sqrt();
    let damp = 0.1 * s;
    let d_damp = 0.05 / s;
    let num = 2.0 * u[idx] - (1.0 - damp) * u_prev[idx] + dt2 * lap / m[idx];
    let d_num = d_damp * u_prev[idx] - dt2 * lap / (m[idx] * m[idx]);
    out[idx] = dm[idx] * (d_num / (1.0 + damp) - num * d_damp / ((1.0 + damp) * (1.0 + damp)));
}

/// Divergence-form diffusion with the coefficient averaged onto the faces (read at
/// neighbours: the gradient gathers) and a source term in `sqrt(k)`, in 2D.
#[stencil(gradient(k))]
fn faces(idx: Idx2, k: &Field2<f64>, u: &Field2<f64>, out: &mut Field2<f64>) {
    let east = 0.5 * (k[idx] + k[idx.ix::<1, 0>()]) * (u[idx.ix::<1, 0>()] - u[idx]);
    let west = 0.5 * (k[idx] + k[idx.ix::<-1, 0>()]) * (u[idx] - u[idx.ix::<-1, 0>()]);
    let north = 0.5 * (k[idx] + k[idx.ix::<0, 1>()]) * (u[idx.ix::<0, 1>()] - u[idx]);
    let south = 0.5 * (k[idx] + k[idx.ix::<0, -1>()]) * (u[idx] - u[idx.ix::<0, -1>()]);
    out[idx] = east - west + north - south + k[idx].sqrt() * u[idx];
}

/// Its derivative with respect to `k` in the direction `dk`, by hand.
#[stencil]
fn faces_tangent(idx: Idx2, k: &Field2<f64>, dk: &Field2<f64>, u: &Field2<f64>, out: &mut Field2<f64>) {
    let east = 0.5 * (dk[idx] + dk[idx.ix::<1, 0>()]) * (u[idx.ix::<1, 0>()] - u[idx]);
    let west = 0.5 * (dk[idx] + dk[idx.ix::<-1, 0>()]) * (u[idx] - u[idx.ix::<-1, 0>()]);
    let north = 0.5 * (dk[idx] + dk[idx.ix::<0, 1>()]) * (u[idx.ix::<0, 1>()] - u[idx]);
    let south = 0.5 * (dk[idx] + dk[idx.ix::<0, -1>()]) * (u[idx] - u[idx.ix::<0, -1>()]);
    out[idx] = east - west + north - south + 0.5 * dk[idx] / k[idx].sqrt() * u[idx];
}

/// `out = a − b` (the misfit's residual).
#[stencil]
fn residual(idx: Idx3, a: &Field3<f64>, b: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = a[idx] - b[idx];
}

// ---- The harness ----

/// `a + h b`, everywhere.
fn axpy<const D: usize>(a: &Field<f64, D>, h: f64, b: &Field<f64, D>) -> Field<f64, D> {
    Field::from_fn(*a.shape(), |g| nb(a, g, [0; D]) + h * nb(b, g, [0; D]))
}

/// A tangent launch: `(p, δp, out)`.
type Tangent<'a, const D: usize> = dyn Fn(&Field<f64, D>, &Field<f64, D>, &mut Field<f64, D>) + 'a;
/// A gradient launch: `(p, y, p_bar, mask)`.
type Gradient<'a, const D: usize> = dyn Fn(&Field<f64, D>, &Field<f64, D>, &mut Field<f64, D>, &Field<f64, D>) + 'a;

/// One step's gradient checks for a parameter `p`: `forward(p, out)` runs the forward over `r`,
/// `tangent(p, dp, out)` its hand derivative over `r`, `gradient(p, y, p_bar, mask)` the
/// generated gradient over `q` (accumulating into `p_bar`). `p` is positive (`lo .. hi`).
/// Returns the dot-product test's relative error and the Taylor remainders for `h = 2^-1 ..
/// 2^-7`, relative to `|Φ(p)|`.
#[allow(clippy::too_many_arguments)]
fn one_step<const D: usize>(
    shape: Shape<D>,
    r: &Loop<D>,
    q: &Loop<D>,
    rng: &mut SplitMix64,
    forward: &dyn Fn(&Field<f64, D>, &mut Field<f64, D>),
    tangent: &Tangent<'_, D>,
    gradient: &Gradient<'_, D>,
) -> (f64, Vec<f64>) {
    let p = random::<f64, _>(shape, rng, 0.5, 1.5);
    let dp = random_on(shape, q, rng, -0.004, 0.004);
    let y = random::<f64, _>(shape, rng, -1.0, 1.0);
    // ⟨T δp, y⟩ over r = ⟨δp, G y⟩ over q (G accumulates into a random start).
    let mut t = Field::zeros(shape);
    tangent(&p, &dp, &mut t);
    let start = random::<f64, _>(shape, rng, -1.0, 1.0);
    let mut g = start.try_clone().expect("clone");
    gradient(&p, &y, &mut g, &stencil_runtime::adjoint::range_mask(shape, r));
    let lhs = dot(&t, &y, r);
    let mut rhs = 0.0;
    for_each_in_range(&Loop::whole(&shape), &shape, |x| {
        let (after, before) = (nb(&g, x, [0; D]), nb(&start, x, [0; D]));
        if range_contains(q, &shape, x) {
            rhs += nb(&dp, x, [0; D]) * (after - before);
        } else {
            assert_eq!(after.to_bits(), before.to_bits(), "the gradient wrote {x:?}, outside its range");
        }
    });
    assert!(lhs.abs() > 1e-6, "a degenerate case: {lhs}");
    let dot_err = (lhs - rhs).abs() / lhs.abs().max(rhs.abs());
    // Taylor: Φ(p) = ⟨F(p), y⟩ over r.
    let phi = |p: &Field<f64, D>| {
        let mut out = Field::zeros(shape);
        forward(p, &mut out);
        dot(&out, &y, r)
    };
    let phi0 = phi(&p);
    let remainders =
        (1..=7).map(|e| 0.5f64.powi(e)).map(|h| (phi(&axpy(&p, h, &dp)) - phi0 - h * rhs).abs() / phi0.abs()).collect();
    (dot_err, remainders)
}

/// The slopes `log2(R(h) / R(h/2))` of successive remainders.
fn slopes(r: &[f64]) -> Vec<f64> {
    r.windows(2).map(|w| (w[0] / w[1]).log2()).collect()
}

// ---- One step ----

#[test]
fn a_linear_parameter_passes_the_dot_product_and_taylor_tests() {
    let shape = Shape3::new([12, 10, 11]).halo(1);
    let mut rng = SplitMix64::new(0x9a7e);
    for _ in 0..3 {
        let r = sub_range(&shape, 2, &mut rng);
        let dt2 = rng.uniform(0.05, 0.3);
        let (u, u_prev) = (random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
        let (err, rem) = one_step(
            shape,
            &r,
            &r,
            &mut rng,
            &|c, out| Host.run(&r, Wave, (dt2, c, &u, &u_prev, out)).expect("forward"),
            &|_, dc, out| Host.run(&r, WaveTangent, (dt2, dc, &u, out)).expect("tangent"),
            &|c, y, c_bar, m| Host.run(&r, WaveGradient, (dt2, c, &u, &u_prev, y, c_bar, m)).expect("gradient"),
        );
        assert!(err <= TOL, "wave over {r:?}: relative error {err:e}");
        // Linear in c: the first-order expansion is exact up to round-off.
        assert!(rem.iter().all(|&x| x <= 1e-12), "wave: remainders {rem:?}");
    }
}

#[test]
fn a_nonlinear_parameter_passes_the_dot_product_and_taylor_tests() {
    let shape = Shape3::new([11, 12, 10]).halo(1);
    let mut rng = SplitMix64::new(0x510);
    for _ in 0..3 {
        let r = sub_range(&shape, 2, &mut rng);
        let dt2 = rng.uniform(0.05, 0.3);
        let (u, u_prev) = (random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
        let (err, rem) = one_step(
            shape,
            &r,
            &r,
            &mut rng,
            &|m, out| Host.run(&r, Slowness, (dt2, m, &u, &u_prev, out)).expect("forward"),
            &|m, dm, out| Host.run(&r, SlownessTangent, (dt2, m, dm, &u, &u_prev, out)).expect("tangent"),
            &|m, y, m_bar, k| Host.run(&r, SlownessGradient, (dt2, m, &u, &u_prev, y, m_bar, k)).expect("gradient"),
        );
        assert!(err <= TOL, "slowness over {r:?}: relative error {err:e}");
        let s = slopes(&rem);
        assert!(s.iter().all(|x| (x - 2.0).abs() <= 0.1), "slowness: remainders {rem:?}, slopes {s:?}");
    }
}

#[test]
fn a_parameter_read_at_neighbours_gathers() {
    let shape = Shape2::new([17, 15]).halo(2);
    let mut rng = SplitMix64::new(0xface);
    for grow in [false, true, false, true] {
        let r = sub_range(&shape, 3, &mut rng);
        // Over r: k held fixed outside r; over r grown by the reach (1): every k a variable.
        let q = if grow { r.grow([1; 2]).expect("room") } else { r };
        let u = random::<f64, _>(shape, &mut rng, -1.0, 1.0);
        let (err, rem) = one_step(
            shape,
            &r,
            &q,
            &mut rng,
            &|k, out| Host.run(&r, Faces, (k, &u, out)).expect("forward"),
            &|k, dk, out| Host.run(&r, FacesTangent, (k, dk, &u, out)).expect("tangent"),
            &|k, y, k_bar, m| Host.run(&q, FacesGradient, (k, &u, y, k_bar, m)).expect("gradient"),
        );
        assert!(err <= TOL, "faces over {r:?}, gradient over {q:?}: relative error {err:e}");
        let s = slopes(&rem);
        assert!(s.iter().all(|x| (x - 2.0).abs() <= 0.1), "faces: remainders {rem:?}, slopes {s:?}");
    }
}

#[test]
fn the_gradient_parameters_follow_the_documented_convention() {
    let names: Vec<_> = <WaveGradient as Stencil<3>>::ir().params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["dt2", "c", "u", "u_prev", "u_next_bar", "c_bar", "range_mask"]);
    let info = <FacesGradient as Stencil<2>>::INFO;
    let reach = |name: &str| info.fields.iter().find(|f| f.name == name).map(|f| (f.lo, f.hi, f.writable));
    assert_eq!(reach("out_bar"), Some(([-1, -1, 0], [1, 1, 0], false)));
    assert_eq!(reach("k_bar"), Some(([0; 3], [0; 3], true)));
}

// ---- A planted bug ----

/// The gradient's IR with the sign of its first guarded term flipped (`p_bar += -(term)`).
fn flip_first_term(ir: &StencilIr) -> StencilIr {
    fn flip(e: &mut Expr, done: &mut bool) {
        if *done {
            return;
        }
        match &mut e.kind {
            ExprKind::Select(_, then, _) => {
                let ty = then.ty;
                let inner = std::mem::replace(&mut **then, Expr { ty, kind: ExprKind::Level });
                **then = Expr {
                    ty: inner.ty,
                    kind: ExprKind::Unary(stencil_runtime::codegen::ir::UnOp::Neg, Box::new(inner)),
                };
                *done = true;
            }
            ExprKind::Binary(_, a, b) => {
                flip(a, done);
                flip(b, done);
            }
            _ => {}
        }
    }
    let mut out = ir.clone();
    let mut done = false;
    for stmt in &mut out.body {
        if let Stmt::Store { value, .. } = stmt {
            flip(value, &mut done);
        }
    }
    assert!(done, "no guarded term in {}", ir.name);
    out
}

#[test]
fn a_flipped_sign_fails_the_dot_product_test() {
    let shape = Shape3::new([10, 9, 11]).halo(1);
    let ir = <SlownessGradient as Stencil<3>>::ir();
    let flipped = flip_first_term(ir);
    let mut rng = SplitMix64::new(0xbad);
    let r = sub_range(&shape, 2, &mut rng);
    let dt2 = 0.2;
    let (u, u_prev) = (random::<f64, _>(shape, &mut rng, -1.0, 1.0), random::<f64, _>(shape, &mut rng, -1.0, 1.0));
    let run = |gradient: &StencilIr, rng: &mut SplitMix64| {
        one_step(
            shape,
            &r,
            &r,
            rng,
            &|m, out| Host.run(&r, Slowness, (dt2, m, &u, &u_prev, out)).expect("forward"),
            &|m, dm, out| Host.run(&r, SlownessTangent, (dt2, m, dm, &u, &u_prev, out)).expect("tangent"),
            &|m, y, m_bar, k| {
                // Parameters: dt2, m, u, u_prev, u_next_bar, m_bar, range_mask.
                let clone = |f: &Field3<f64>| Some(f.try_clone().expect("clone"));
                let mut fields = vec![None, clone(m), clone(&u), clone(&u_prev), clone(y), clone(m_bar), clone(k)];
                interpret(gradient, &r, &mut fields, &[dt2]);
                *m_bar = fields[5].take().expect("m_bar");
            },
        )
        .0
    };
    let honest = run(ir, &mut rng.clone());
    assert!(honest <= TOL, "the interpreted gradient: relative error {honest:e}");
    let planted = run(&flipped, &mut rng);
    assert!(planted > 1e-3, "a flipped sign passed the dot-product test: relative error {planted:e}");
}

// ---- The checkpointed reverse loop ----

const STEPS: usize = 30;
const DT2: f64 = 0.1;
const INTERIOR: [usize; 3] = [12, 11, 10];

/// The gradient of `J = ½‖u_N − d‖²` (over `r`) of the 30-step wave propagator from
/// `(u_prev, u)` with coefficient `c`, through `reverse` with `schedule` on `exec`: the
/// gradients with respect to `u_prev⁰`, `u⁰` and `c` (read over `r`), and the forward steps
/// counted.
#[allow(clippy::too_many_arguments)]
fn propagator_gradient<X: Executor>(
    exec: &X,
    schedule: &Schedule,
    r: &Loop3D,
    u_prev: &Field3<f64>,
    u: &Field3<f64>,
    c: &Field3<f64>,
    d: &Field3<f64>,
) -> ([Vec<f64>; 3], usize) {
    let shape = *u.shape();
    let up = |f: &Field3<f64>| exec.upload(f).expect("upload");
    let (c, d, m) = (up(c), up(d), up(&stencil_runtime::adjoint::range_mask(shape, r)));
    let mut state = [up(u_prev), up(u)];
    struct Ctx<F> {
        scratch: F,
        a: F,
        b: F,
        t: F,
        zeros: F,
        c_bar: F,
        forward_steps: usize,
    }
    let zeros = || exec.alloc::<f64, 3>(shape).expect("alloc");
    let mut ctx =
        Ctx { scratch: zeros(), a: zeros(), b: zeros(), t: zeros(), zeros: zeros(), c_bar: zeros(), forward_steps: 0 };
    let run = reverse(
        exec,
        schedule,
        &mut state,
        &mut ctx,
        |ctx, _, s| -> Result<(), LaunchError> {
            exec.run(r, Wave, (DT2, &c, &s[1], &s[0], &mut ctx.scratch))?;
            s.swap(0, 1);
            std::mem::swap(&mut s[1], &mut ctx.scratch);
            ctx.forward_steps += 1;
            Ok(())
        },
        |ctx, _, first, s| {
            // (a, b): the cotangents of the state after the step, (u^i, u^{i+1}).
            if first {
                exec.run(r, Wave, (DT2, &c, &s[1], &s[0], &mut ctx.scratch))?;
                exec.run(r, Residual, (&ctx.scratch, &d, &mut ctx.b))?;
                exec.copy(&mut ctx.a, &ctx.zeros)?;
            }
            exec.run(r, WaveGradient, (DT2, &c, &s[1], &s[0], &ctx.b, &mut ctx.c_bar, &m))?;
            exec.copy(&mut ctx.t, &ctx.zeros)?;
            exec.run(r, WaveAdjoint, (DT2, &c, &mut ctx.a, &mut ctx.t, &ctx.b, &m))?;
            // The cotangents of the state before it, (u^{i-1}, u^i): (t, a).
            std::mem::swap(&mut ctx.b, &mut ctx.a);
            std::mem::swap(&mut ctx.a, &mut ctx.t);
            Ok(())
        },
    )
    .expect("the reverse run");
    assert_eq!(run.forward_steps, ctx.forward_steps);
    assert_eq!(run.adjoint_steps, STEPS);
    let read = |f: &X::Field<f64, 3>| exec.read_range(f, r).expect("read");
    ([read(&ctx.a), read(&ctx.b), read(&ctx.c_bar)], ctx.forward_steps)
}

/// `J` by running the propagator forward on the host.
fn misfit(r: &Loop3D, u_prev: &Field3<f64>, u: &Field3<f64>, c: &Field3<f64>, d: &Field3<f64>) -> f64 {
    let shape = *u.shape();
    let (mut p, mut u, mut next) =
        (u_prev.try_clone().expect("clone"), u.try_clone().expect("clone"), Field::zeros(shape));
    for _ in 0..STEPS {
        Host.run(r, Wave, (DT2, c, &u, &p, &mut next)).expect("forward");
        std::mem::swap(&mut p, &mut u);
        std::mem::swap(&mut u, &mut next);
    }
    let mut j = 0.0;
    for_each_in_range(r, &shape, |g| j += 0.5 * (nb(&u, g, [0; 3]) - nb(d, g, [0; 3])).powi(2));
    j
}

struct Problem {
    shape: Shape3,
    r: Loop3D,
    u_prev: Field3<f64>,
    u: Field3<f64>,
    c: Field3<f64>,
    d: Field3<f64>,
}

fn problem(seed: u64) -> Problem {
    problem_over(seed, false)
}

/// [`problem`] over a random sub-range of the grid (reaching into the halo), or over the whole
/// interior; the state is zero outside the range, so that its halo (never written) is the same in
/// every buffer a run rotates through.
fn problem_over(seed: u64, whole_interior: bool) -> Problem {
    let shape = Shape3::new(INTERIOR).halo(2);
    let mut rng = SplitMix64::new(seed);
    let r = sub_range(&shape, 1, &mut rng);
    let r = if whole_interior { Loop3D::interior(&shape) } else { r };
    Problem {
        shape,
        r,
        u_prev: random_on(shape, &r, &mut rng, -1.0, 1.0),
        u: random_on(shape, &r, &mut rng, -1.0, 1.0),
        c: random::<f64, _>(shape, &mut rng, 0.5, 1.5),
        d: random_on(shape, &r, &mut rng, -1.0, 1.0),
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn checkpointed_gradients_equal_the_stored_ones_bit_for_bit() {
    let p = problem(0xc4e);
    let all = Schedule::store_all(STEPS);
    let (stored, steps) = propagator_gradient(&Host, &all, &p.r, &p.u_prev, &p.u, &p.c, &p.d);
    assert_eq!(steps, all.forward_steps());
    assert_eq!(steps, STEPS - 1);
    assert!(stored.iter().all(|g| g.iter().any(|&x| x != 0.0)), "a zero gradient");
    for slots in [3, 5] {
        let schedule = Schedule::binomial(STEPS, slots).expect("slots");
        let (g, steps) = propagator_gradient(&Host, &schedule, &p.r, &p.u_prev, &p.u, &p.c, &p.d);
        assert_eq!(steps, schedule.forward_steps(), "{slots} slots");
        assert!(steps > STEPS - 1, "{slots} slots recompute");
        for (which, (a, b)) in ["u_prev", "u", "c"].iter().zip(g.iter().zip(&stored)) {
            assert_eq!(bits(a), bits(b), "{slots} slots: the gradient with respect to {which}");
        }
    }
}

/// The propagator's gradient on four host subdomains with 3 slots against the host's store-all
/// gradient, over a random sub-range of the grid (reaching into the halo beyond the grid's edge)
/// or over the whole interior: `(which gradients, bit-equal)`.
fn subdomain_gradients(whole_interior: bool) -> Vec<(&'static str, bool)> {
    let p = problem_over(0xd15, whole_interior);
    let (host, _) = propagator_gradient(&Host, &Schedule::store_all(STEPS), &p.r, &p.u_prev, &p.u, &p.c, &p.d);
    let grid = Decomposition::new(INTERIOR, [2, 2, 1], [false; 3], [2; 3]).expect("grid");
    let exec = Distributed::host(grid).expect("subdomains");
    let schedule = Schedule::binomial(STEPS, 3).expect("slots");
    let (sub, steps) = propagator_gradient(&exec, &schedule, &p.r, &p.u_prev, &p.u, &p.c, &p.d);
    assert_eq!(steps, schedule.forward_steps());
    ["u_prev", "u", "c"].into_iter().zip(sub.iter().zip(&host)).map(|(w, (a, b))| (w, bits(a) == bits(b))).collect()
}

#[test]
fn checkpointed_gradients_on_subdomains_give_the_host_bits() {
    for whole_interior in [false, true] {
        let equal = subdomain_gradients(whole_interior);
        assert_eq!(equal, [("u_prev", true), ("u", true), ("c", true)], "whole interior: {whole_interior}");
    }
}

/// The gradient over `r` as a field (zero elsewhere).
fn as_field(shape: Shape3, r: &Loop3D, values: &[f64]) -> Field3<f64> {
    let mut f = Field::zeros(shape);
    let mut k = 0;
    // read_range's order: axis 0 fastest.
    let (b, e) = (r.begin(), r.end());
    for z in b[2]..e[2] as usize {
        for y in b[1]..e[1] as usize {
            for x in b[0]..e[0] as usize {
                let g = shape.to_global([x, y, z]);
                f.set(g, values[k]).expect("inside");
                k += 1;
            }
        }
    }
    assert_eq!(k, values.len());
    f
}

#[test]
fn the_propagator_gradient_passes_the_taylor_test() {
    let p = problem(0x7a1);
    let schedule = Schedule::binomial(STEPS, 3).expect("slots");
    let ([gp, gu, gc], _) = propagator_gradient(&Host, &schedule, &p.r, &p.u_prev, &p.u, &p.c, &p.d);
    let (gp, gu, gc) = (as_field(p.shape, &p.r, &gp), as_field(p.shape, &p.r, &gu), as_field(p.shape, &p.r, &gc));
    let mut rng = SplitMix64::new(0x7a2);
    // Small enough that the first-order term leads from h = 1/2 (J is quadratic in the state).
    let dp = random_on(p.shape, &p.r, &mut rng, -5e-4, 5e-4);
    let du = random_on(p.shape, &p.r, &mut rng, -5e-4, 5e-4);
    let dc = random_on(p.shape, &p.r, &mut rng, -1e-4, 1e-4);
    let slope = dot(&gp, &dp, &p.r) + dot(&gu, &du, &p.r) + dot(&gc, &dc, &p.r);
    let j0 = misfit(&p.r, &p.u_prev, &p.u, &p.c, &p.d);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for e in 1..=7 {
        let h = 0.5f64.powi(e);
        let j = misfit(&p.r, &axpy(&p.u_prev, h, &dp), &axpy(&p.u, h, &du), &axpy(&p.c, h, &dc), &p.d);
        first.push((j - j0).abs());
        second.push((j - j0 - h * slope).abs());
    }
    let (s1, s2) = (slopes(&first), slopes(&second));
    assert!(s1.iter().all(|x| (x - 1.0).abs() <= 0.1), "|J(m + h dm) − J(m)|: {first:?}, slopes {s1:?}");
    assert!(s2.iter().all(|x| (x - 2.0).abs() <= 0.1), "the remainder: {second:?}, slopes {s2:?}");
}

/// The whole propagator `F: (u_prev⁰, u⁰) ↦ u_N` is linear for a fixed `c`: with the residual
/// `u_N − d = y` (`d = F x − y`), the reverse run gives `Fᵀ y`.
#[test]
fn the_propagator_passes_the_dot_product_test() {
    let p = problem(0xd07);
    let mut rng = SplitMix64::new(0xd08);
    let y = random_on(p.shape, &p.r, &mut rng, -1.0, 1.0);
    // F x on the host.
    let (mut a, mut b, mut next) =
        (p.u_prev.try_clone().expect("clone"), p.u.try_clone().expect("clone"), Field::zeros(p.shape));
    for _ in 0..STEPS {
        Host.run(&p.r, Wave, (DT2, &p.c, &b, &a, &mut next)).expect("forward");
        std::mem::swap(&mut a, &mut b);
        std::mem::swap(&mut b, &mut next);
    }
    let d = Field::from_fn(p.shape, |g| nb(&b, g, [0; 3]) - nb(&y, g, [0; 3]));
    let ([gp, gu, _], _) =
        propagator_gradient(&Host, &Schedule::binomial(STEPS, 5).expect("slots"), &p.r, &p.u_prev, &p.u, &p.c, &d);
    let lhs = dot(&b, &y, &p.r);
    let rhs = dot(&p.u_prev, &as_field(p.shape, &p.r, &gp), &p.r) + dot(&p.u, &as_field(p.shape, &p.r, &gu), &p.r);
    let err = (lhs - rhs).abs() / lhs.abs().max(rhs.abs());
    assert!(err <= TOL, "⟨F x, y⟩ = {lhs}, ⟨x, Fᵀ y⟩ = {rhs}: relative error {err:e}");
}
