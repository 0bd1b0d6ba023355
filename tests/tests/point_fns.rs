//! Point functions (`let flux = |p: Idx3| ...;` in a stencil body, evaluated at several points
//! near the current one): the CPU nest computes each once per point of a block and reads the
//! values back. Checked bit for bit against plain loops that evaluate the same closures at every
//! offset, on random inputs with poisoned outputs, over both element orders, sub-ranges, 1D to
//! 3D, thread counts, branches and array values; and the launch checks the reach of the
//! closures' reads (the halo they need) like any other read.

use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::canonical::{FluxUpdate, Nested};
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, SplitMix64};

fn flux_x(u: &Field3<f64>, v: &Field3<f64>, p: [isize; 3]) -> f64 {
    let (l, r) = (nb(u, p, [0, 0, 0]), nb(u, p, [1, 0, 0]));
    let s = nb(v, p, [0, 0, 0]) + nb(v, p, [1, 0, 0]);
    if s > 0.0 {
        s * l
    } else {
        s * r - (l - r).abs().sqrt()
    }
}

fn flux_y(u: &Field3<f64>, v: &Field3<f64>, p: [isize; 3]) -> f64 {
    0.5 * (nb(u, p, [0, 0, 0]) + nb(u, p, [0, 1, 0])) * nb(v, p, [0, 1, 0])
}

fn flux_z(c: f64, u: &Field3<f64>, p: [isize; 3]) -> f64 {
    (nb(u, p, [0, 0, 1]) - nb(u, p, [0, 0, 0])) * c
}

/// An array-valued point function with a scalar and a constant, evaluated at a diagonal and a
/// distant point too.
#[stencil]
fn pairs(idx: Idx2, w: f32, a: &Field2<f32>, out: &mut Field2<f32>, out2: &mut Field2<f32>) {
    const TWO: usize = 2;
    let g = |p: Idx2| {
        let m = a[p] * w;
        [m + a[p.ix::<0, 1>()], m * a[p.ix::<TWO, 0>()]]
    };
    let s = g(idx);
    let t = g(idx.ix::<1, 1>());
    let z = g(idx.ix::<-2, 0>());
    out[idx] = s[0] + t[1] - z[0];
    out2[idx] = s[1] * t[0] + z[1];
}

fn g_ref(w: f32, a: &Field2<f32>, p: [isize; 2]) -> [f32; 2] {
    let m = nb(a, p, [0, 0]) * w;
    [m + nb(a, p, [0, 1]), m * nb(a, p, [2, 0])]
}

/// A 1D point function returning a tuple, evaluated in both branches of an `if`, and a sum of
/// its differences folded besides the written field.
#[stencil]
fn branchy(idx: Idx1, c: f64, a: &Field1<f64>, out: &mut Field1<f64>, total: &mut Sum<f64>) {
    let h = |p: Idx1| (a[p] * a[p.ix::<1>()], a[p.ix::<-1>()].max(a[p]));
    let (x0, y0) = h(idx);
    if a[idx] > c {
        let (x1, _) = h(idx.ix::<-1>());
        out[idx] = x0 - x1;
    } else {
        let (_, y2) = h(idx.ix::<2>());
        out[idx] = y0 * y2;
    }
    total.fold(x0);
}

#[test]
fn point_functions_calling_point_functions_match_plain_loops() {
    let mut rng = SplitMix64::new(0x0f1c_0004);
    for (n, order, shrink) in [([21, 9, 13], Order::Ijk, [0, 0, 0]), ([10, 12, 19], Order::Kij, [2, 1, 3])] {
        let shape = Shape3::new(n).halo(2).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let (q, r): (Field3<f64>, Field3<f64>) = (random(shape, &mut rng, 0.5, 2.0), random(shape, &mut rng, 0.5, 2.0));
        let g = 1.7;
        let w = |p: [isize; 3]| [nb(&q, p, [0; 3]) / nb(&r, p, [0; 3]), (nb(&q, p, [0; 3]) * g).sqrt()];
        let at = |p: [isize; 3], o: [isize; 3]| -> [isize; 3] { std::array::from_fn(|a| p[a] + o[a]) };
        let fx = |p| w(at(p, [-1, 0, 0]))[0] * w(at(p, [1, 0, 0]))[1] - w(p)[0];
        let fz = |p| w(at(p, [0, 0, 1]))[1] - w(p)[1];
        let mut want = poisoned::<f64, 3>(shape);
        for_each_in_range(&range, &shape, |p| {
            want.set(p, fx(p) - fx(at(p, [-1, 0, 0])) + fz(p) * fz(at(p, [0, 0, -1])) + w(p)[0]).unwrap();
        });
        let mut out = poisoned(shape);
        range.run(Nested, (g, &q, &r, &mut out)).unwrap();
        assert_bits_eq(&out, &want, &format!("nested {n:?} {order:?}"));
    }
}

#[test]
fn a_flux_difference_with_point_functions_matches_plain_loops() {
    let mut rng = SplitMix64::new(0x0f1c_0001);
    for (n, order, shrink) in [
        ([19, 13, 11], Order::Ijk, [0, 0, 0]),
        ([12, 9, 21], Order::Kij, [0, 0, 0]),
        ([33, 17, 9], Order::Ijk, [3, 2, 1]),
        ([7, 30, 8], Order::Kij, [1, 4, 2]),
        ([1, 1, 1], Order::Ijk, [0, 0, 0]),
    ] {
        let shape = Shape3::new(n).halo(1).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let (u, v): (Field3<f64>, Field3<f64>) =
            (random(shape, &mut rng, 0.0, 2.0), random(shape, &mut rng, -1.0, 1.0));
        let c = 0.3;
        let mut want = poisoned::<f64, 3>(shape);
        for_each_in_range(&range, &shape, |p| {
            let m = |o: [isize; 3]| std::array::from_fn(|a| p[a] + o[a]);
            let d = (flux_x(&u, &v, p) - flux_x(&u, &v, m([-1, 0, 0])))
                + (flux_y(&u, &v, p) - flux_y(&u, &v, m([0, -1, 0])))
                + (flux_z(c, &u, p) - flux_z(c, &u, m([0, 0, -1])));
            want.set(p, nb(&u, p, [0; 3]) - c * d).unwrap();
        });
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut out = poisoned(shape);
            pool.install(|| range.run(FluxUpdate, (c, &u, &v, &mut out))).unwrap();
            assert_bits_eq(&out, &want, &format!("{n:?} {order:?} shrink {shrink:?}, {threads} threads"));
        }
    }
}

#[test]
fn array_values_at_diagonal_and_distant_points_match_plain_loops() {
    let mut rng = SplitMix64::new(0x0f1c_0002);
    for (n, order, shrink) in
        [([40, 23], Order::Ijk, [0, 0]), ([17, 31], Order::Kij, [2, 5]), ([3, 2], Order::Ijk, [0, 0])]
    {
        let shape = Shape2::new(n).halo(4).order(order);
        let range = Loop2D::interior(&shape).shrink(shrink);
        let a: Field2<f32> = random(shape, &mut rng, -1.0, 1.0);
        let w = 0.75f32;
        let (mut want, mut want2) = (poisoned::<f32, 2>(shape), poisoned::<f32, 2>(shape));
        for_each_in_range(&range, &shape, |p| {
            let at = |o: [isize; 2]| g_ref(w, &a, [p[0] + o[0], p[1] + o[1]]);
            let (s, t, z) = (at([0, 0]), at([1, 1]), at([-2, 0]));
            want.set(p, s[0] + t[1] - z[0]).unwrap();
            want2.set(p, s[1] * t[0] + z[1]).unwrap();
        });
        let (mut out, mut out2) = (poisoned(shape), poisoned(shape));
        range.run(Pairs, (w, &a, &mut out, &mut out2)).unwrap();
        assert_bits_eq(&out, &want, &format!("pairs out {n:?} {order:?}"));
        assert_bits_eq(&out2, &want2, &format!("pairs out2 {n:?} {order:?}"));
    }
}

#[test]
fn tuple_values_in_branches_and_a_fold_match_plain_loops() {
    let mut rng = SplitMix64::new(0x0f1c_0003);
    // `h(idx.ix(2))` reads `a` three points to the right: a halo of 2 is refused.
    let short = Shape1::new([50]).halo(2);
    let (a, mut out, mut total) = (Field1::<f64>::zeros(short), Field1::<f64>::zeros(short), Sum::<f64>::new());
    let e = Loop1D::interior(&short).run(Branchy, (0.0, &a, &mut out, &mut total)).unwrap_err();
    assert!(e.to_string().contains("`a`"), "{e}");
    let shape = Shape1::new([100_000]).halo(3);
    for range in [Loop1D::interior(&shape), Loop1D::interior(&shape).shrink([777])] {
        let a: Field1<f64> = random(shape, &mut rng, -1.0, 1.0);
        let c = 0.1;
        let h = |p: isize| (nb(&a, [p], [0]) * nb(&a, [p], [1]), nb(&a, [p], [-1]).max(nb(&a, [p], [0])));
        let mut want = poisoned::<f64, 1>(shape);
        let mut sum = 0.0;
        for_each_in_range(&range, &shape, |[p]| {
            let (x0, y0) = h(p);
            let v = if nb(&a, [p], [0]) > c { x0 - h(p - 1).0 } else { y0 * h(p + 2).1 };
            want.set([p], v).unwrap();
            sum += x0;
        });
        let mut out = poisoned(shape);
        let mut total = Sum::<f64>::new();
        range.run(Branchy, (c, &a, &mut out, &mut total)).unwrap();
        assert_bits_eq(&out, &want, "branchy");
        assert!((total.get() - sum).abs() <= 1e-9 * sum.abs().max(1.0), "{} vs {sum}", total.get());
    }
}

/// Integer point functions (`i32` wrapping where the block's widened rows reach the halo's
/// extremes, `u32`), and a local named like a kernel register of the output field.
#[stencil]
fn integers(idx: Idx2, a: &Field2<i32>, out: &mut Field2<i32>, count: &mut Field2<u32>) {
    let big = |p: Idx2| a[p] * 3 + 1;
    let odd = |p: Idx2| (a[p] & 1) as u32;
    let r_out = |p: Idx2| {
        let r_out = a[p] - 1;
        r_out * 2
    };
    out[idx] = big(idx.ix::<-1, 0>()) - big(idx.ix::<0, -1>()) + r_out(idx) + r_out(idx.ix::<0, 1>());
    count[idx] = odd(idx) + odd(idx.ix::<1, 1>());
}

#[test]
fn integer_point_functions_match_plain_loops_and_do_not_panic_at_unread_points() {
    let shape = Shape2::new([37, 11]).halo(1);
    let range = Loop2D::interior(&shape);
    let mut rng = SplitMix64::new(0x0f1c_0005);
    // The halo's corners, which no call reads, hold values whose `* 3` overflows.
    let a = Field2::from_fn(shape, |g| {
        let corner = (g[0] == -1 || g[0] == 37) && (g[1] == -1 || g[1] == 11);
        if corner {
            i32::MAX
        } else {
            (rng.unit() * 2000.0) as i32 - 1000
        }
    });
    let (mut want, mut want_count) = (Field2::filled(shape, -7i32), Field2::filled(shape, 7u32));
    for_each_in_range(&range, &shape, |p| {
        let at = |o: [isize; 2]| nb(&a, p, o);
        let big = |o: [isize; 2]| at(o) * 3 + 1;
        let r_out = |o: [isize; 2]| (at(o) - 1) * 2;
        want.set(p, big([-1, 0]) - big([0, -1]) + r_out([0, 0]) + r_out([0, 1])).unwrap();
        want_count.set(p, (at([0, 0]) & 1) as u32 + (at([1, 1]) & 1) as u32).unwrap();
    });
    let (mut out, mut count) = (Field2::filled(shape, -7i32), Field2::filled(shape, 7u32));
    range.run(Integers, (&a, &mut out, &mut count)).unwrap();
    assert_eq!(out.as_slice(), want.as_slice());
    assert_eq!(count.as_slice(), want_count.as_slice());
    // The inlined IR's locals stay clear of the names kernels use (`r_out_1` is a register).
    let ir = <Integers as Stencil<2>>::ir();
    let fields: Vec<&str> = ir.field_ids().map(|p| ir.params[p].name.as_str()).collect();
    for l in &ir.locals {
        assert!(!stencil_runtime::codegen::naming::is_reserved(&l.name, &fields), "local `{}`", l.name);
    }
}

#[test]
fn the_functor_ir_has_them_inlined_and_the_launch_checks_their_reach() {
    // The serialised IR (what CUDA is printed from) has no point function left.
    let ir = <FluxUpdate as Stencil<3>>::ir();
    assert!(ir.point_fns.is_empty());
    // `fx(idx.ix(-1, 0, 0))` reads `u` one point to the left: a field without a halo along x
    // is refused, naming it.
    let shape = Shape3::new([6, 6, 6]).halo_per_axis([0, 1, 1]);
    let (u, v) = (Field3::<f64>::zeros(shape), Field3::<f64>::zeros(shape));
    let mut out = Field3::<f64>::zeros(shape);
    let e = Loop3D::interior(&shape).run(FluxUpdate, (1.0, &u, &v, &mut out)).unwrap_err();
    assert!(e.to_string().contains("`u`"), "{e}");
    let r: Loop<3> = Loop3D::interior(&shape).shrink([1, 0, 0]);
    r.run(FluxUpdate, (1.0, &u, &v, &mut out)).unwrap();
}

/// The two-pass split (`stencil_codegen::passes::materialise`) writes each value only over the
/// box of offsets where the body reads it: every first pass reads the fields within the
/// stencil's own reach, so any launch the checks accept can run it. Values read over different
/// boxes get passes of their own (one pass over the union of the boxes would compute `a` of
/// `SplitBoxes` a point further up along z and read `u` past the stencil's reach).
#[test]
fn two_pass_first_passes_read_within_the_stencils_reach() {
    use stencil_codegen::passes::materialise;
    use stencil_runtime::Stencil;
    use stencil_tests::canonical::{Lopsided, LopsidedRing, SplitBoxes, SplitBoxesSum};
    fn check<S: Stencil<3>>(passes: usize, point: bool) {
        let ir = S::source_ir();
        let split = materialise(ir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((split.first.len(), split.point.is_some()), (passes, point), "{}", ir.name);
        let (mut lo, mut hi) = ([0i32; 3], [0i32; 3]);
        for f in S::INFO.fields {
            for a in 0..3 {
                (lo[a], hi[a]) = (lo[a].min(f.lo[a]), hi[a].max(f.hi[a]));
            }
        }
        for (n, pass) in split.first.iter().enumerate() {
            for a in 0..3 {
                let ok = lo[a] <= pass.reads_lo[a] && pass.reads_hi[a] <= hi[a];
                assert!(
                    ok,
                    "{} pass {n}: reads {:?}..{:?}, reach {lo:?}..{hi:?}",
                    ir.name, pass.reads_lo, pass.reads_hi
                );
                assert!(pass.lo[a] <= 0 && pass.hi[a] >= 0, "{} pass {n}: the box holds the point", ir.name);
            }
        }
        // Every value is written by exactly one pass.
        let stored: Vec<usize> = (split.first.iter())
            .flat_map(|p| {
                p.ir.body.iter().map(|s| match s {
                    stencil_codegen::ir::Stmt::Store { field, .. } => *field,
                    _ => panic!("a first pass only stores"),
                })
            })
            .collect();
        let n = ir.params.len();
        let mut sorted = stored.clone();
        sorted.sort();
        assert_eq!(sorted, (n..n + split.values.len()).collect::<Vec<_>>(), "{}", ir.name);
    }
    check::<FluxUpdate>(3, false);
    check::<Lopsided>(2, false);
    check::<LopsidedRing>(2, false);
    check::<SplitBoxes>(2, false);
    check::<SplitBoxesSum>(2, true);
}
