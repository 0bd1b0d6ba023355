//! Column sweeps on the host with the column axis contiguous (`Order::Kij`, and `j` fastest in
//! 2D), where the nest walks one contiguous column through all its levels at a time: the same
//! sweeps on `Ijk` fields (the nest that walks a tile of columns level by level) give the same
//! bits at every point, and so do plain loops over the columns. Random inputs, outputs poisoned
//! with NaN (or random where a sweep keeps or reads old values), odd sizes and sub-ranges,
//! forward and backward, carried locals, the level and its interval forms, reads of levels
//! passed at distances 1 and 2 (guarded and not), in-place updates and conditional stores, and
//! blocks of many columns with ragged edges on 1 and 3 threads. Then edge cases: a 2D sweep
//! reading back in both directions, a backward sweep reading three levels back with an `i32`
//! field, more levels than one block's budget, a 1D sweep against a plain loop, arrays of
//! written fields, aligned shapes, and the launch's refusal of a read past the column's end (the
//! check that keeps each column's window inside its column).

use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::sweeping::{
    LevelsLeft, RunningDown, RunningUp, Substitute, ThomasBackward, ThomasForward, ThomasForwardCarried,
};
use stencil_tests::{for_each_in_range, for_each_point, poisoned, random, Real, SplitMix64};

/// A forward sweep reading the two levels below it, past its first two levels.
#[stencil(sweep = forward)]
fn two_below(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    if idx.level() < 2 {
        out[idx] = q[idx];
    } else {
        out[idx] = 0.5 * out[idx.ix(0, 0, -1)] - 0.25 * out[idx.ix(0, 0, -2)] + q[idx];
    }
}

/// A forward sweep reading the level below unguarded (at its first level, what is stored below
/// the range), with a carried count.
#[stencil(sweep = forward)]
fn leaky(idx: Idx3, w: f64, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut count: i32 = 0;
    count += 1;
    out[idx] = w * out[idx.ix(0, 0, -1)] + q[idx] * count as f64;
}

/// A backward sweep updating `s` in place where the carried sum is positive (elsewhere `s` keeps
/// its value), reading `q` sideways, and reading `top` back one level above (at its first level,
/// what is stored above the range).
#[stencil(sweep = backward)]
fn drain(idx: Idx3, w: f64, q: &Field3<f64>, s: &mut Field3<f64>, top: &mut Field3<f64>) {
    #[carry]
    let mut acc = 0.0;
    let old = s[idx];
    let left = (idx.levels() - idx.level()) as f64;
    acc = 0.5 * acc + w * (q[idx.ix(1, 0, 0)] - q[idx.ix(0, -1, 0)]) + old * left;
    if acc > 0.0 {
        s[idx] = acc;
    }
    if idx.level() + 1 == idx.levels() {
        top[idx] = acc;
    } else {
        top[idx] = top[idx.ix(0, 0, 1)] - old;
    }
}

/// The same values (by global coordinate, halo included) in fields of any element orders.
fn assert_same<T: Real, const D: usize>(got: &Field<T, D>, want: &Field<T, D>, context: &str) {
    let mut bad = Vec::new();
    for_each_point(want.shape(), |g| {
        let (a, b) = (got.get(g).expect("same points"), want.get(g).expect("same points"));
        if a.bits() != b.bits() {
            bad.push((g, a, b));
        }
    });
    assert!(bad.is_empty(), "{context}: {} points differ, first {:?}", bad.len(), &bad[..bad.len().min(3)]);
}

/// `f` in element order `order`.
fn reordered<T: Real, const D: usize>(f: &Field<T, D>, order: Order) -> Field<T, D> {
    Field::from_fn(f.shape().order(order), |g| f.get(g).expect("same points"))
}

/// The columns of `range` (global (i, j)) with their global k from bottom to top.
fn columns(range: &Loop<3>, shape: &Shape3) -> Vec<([isize; 2], Vec<isize>)> {
    let mut cols: std::collections::BTreeMap<[isize; 2], Vec<isize>> = Default::default();
    for_each_in_range(range, shape, |[i, j, k]| cols.entry([i, j]).or_default().push(k));
    cols.into_iter()
        .map(|(c, mut ks)| {
            ks.sort();
            (c, ks)
        })
        .collect()
}

/// Sizes (odd, one level, one column, and many long columns: blocks with ragged edges) and
/// sub-ranges.
const CASES: [([usize; 3], [usize; 3]); 6] = [
    ([9, 11, 17], [0, 0, 0]),
    ([13, 7, 24], [2, 1, 3]),
    ([5, 4, 1], [0, 0, 0]),
    ([1, 1, 33], [0, 0, 0]),
    ([37, 5, 700], [0, 0, 0]),
    ([23, 6, 301], [1, 2, 7]),
];

fn on_threads(threads: usize, f: impl FnOnce() + Send) {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(f)
}

#[test]
fn thomas_sweeps_and_running_sums_on_kij_fields_give_the_ijk_bits() {
    let mut rng = SplitMix64::new(0x5eed_4a11);
    for (n, shrink) in CASES {
        let shape = Shape3::new(n).halo(1);
        let kij = shape.order(Order::Kij);
        let (range, range_kij) = (Loop3D::interior(&shape).shrink(shrink), Loop3D::interior(&kij).shrink(shrink));
        let a: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let c: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let b = Field3::from_fn(shape, |_| rng.uniform(2.5, 4.0) * if rng.unit() < 0.5 { -1.0 } else { 1.0 });
        let d: Field3<f64> = random(shape, &mut rng, -5.0, 5.0);
        let q: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
        let [ak, bk, ck, dk] = [&a, &b, &c, &d].map(|f| reordered(f, Order::Kij));
        let qk = reordered(&q, Order::Kij);
        for threads in [1, 3] {
            let context = format!("{n:?} shrunk by {shrink:?} on {threads} threads");
            let (mut cp, mut dp, mut x, mut x2) = (poisoned(shape), poisoned(shape), poisoned(shape), poisoned(shape));
            let (mut cpc, mut dpc) = (poisoned(shape), poisoned(shape));
            let (mut up, mut down) = (poisoned::<f32, 3>(shape), poisoned::<f32, 3>(shape));
            let (mut cpk, mut dpk, mut xk, mut x2k) = (poisoned(kij), poisoned(kij), poisoned(kij), poisoned(kij));
            let (mut cpck, mut dpck) = (poisoned(kij), poisoned(kij));
            let (mut upk, mut downk) = (poisoned::<f32, 3>(kij), poisoned::<f32, 3>(kij));
            on_threads(threads, || {
                range.run(ThomasForward, (&a, &b, &c, &d, &mut cp, &mut dp)).unwrap();
                range.run(ThomasForwardCarried, (&a, &b, &c, &d, &mut cpc, &mut dpc)).unwrap();
                range.run(ThomasBackward, (&cp, &dp, &mut x)).unwrap();
                range.run(Substitute, (&cp, &dp, &mut x2)).unwrap();
                range.run(RunningUp, (&q, &mut up)).unwrap();
                range.run(RunningDown, (&q, &mut down)).unwrap();
                range_kij.run(ThomasForward, (&ak, &bk, &ck, &dk, &mut cpk, &mut dpk)).unwrap();
                range_kij.run(ThomasForwardCarried, (&ak, &bk, &ck, &dk, &mut cpck, &mut dpck)).unwrap();
                range_kij.run(ThomasBackward, (&cpk, &dpk, &mut xk)).unwrap();
                range_kij.run(Substitute, (&cpk, &dpk, &mut x2k)).unwrap();
                range_kij.run(RunningUp, (&qk, &mut upk)).unwrap();
                range_kij.run(RunningDown, (&qk, &mut downk)).unwrap();
            });
            assert_same(&cpk, &cp, &format!("thomas_forward cp, {context}"));
            assert_same(&dpk, &dp, &format!("thomas_forward dp, {context}"));
            assert_same(&cpck, &cpc, &format!("thomas_forward_carried cp, {context}"));
            assert_same(&dpck, &dpc, &format!("thomas_forward_carried dp, {context}"));
            assert_same(&xk, &x, &format!("thomas_backward, {context}"));
            assert_same(&x2k, &x2, &format!("substitute, {context}"));
            assert_same(&upk, &up, &format!("running_up, {context}"));
            assert_same(&downk, &down, &format!("running_down, {context}"));
            // And the Ijk results are the plain recurrences (the carried forms agree with the
            // ones reading back, as `sweeps.rs` checks against a dense solve).
            let mut want_up = poisoned::<f32, 3>(shape);
            for ([i, j], ks) in columns(&range, &shape) {
                let mut acc = 0.0f32;
                for &k in &ks {
                    acc += q.get([i, j, k]).unwrap();
                    want_up.set([i, j, k], acc).unwrap();
                }
            }
            assert_same(&upk, &want_up, &format!("running_up against plain loops, {context}"));
            assert_same(&cpck, &cp, &format!("carried cp against read back, {context}"));
            assert_same(&x2k, &x, &format!("carried x against read back, {context}"));
        }
    }
}

#[test]
fn sweeps_reading_back_updating_in_place_and_storing_conditionally_match_plain_loops_in_both_orders() {
    let mut rng = SplitMix64::new(0x5eed_d4a1);
    let w = 0.375;
    for (n, shrink) in CASES {
        let shape = Shape3::new(n).halo_per_axis([1, 1, 2]);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let q: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let s0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let top0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let out0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        // Plain loops over the columns, the same arithmetic in the same order.
        let (mut want_two, mut want_leaky, mut want_s, mut want_top) =
            (poisoned::<f64, 3>(shape), out0.clone(), s0.clone(), top0.clone());
        for ([i, j], ks) in columns(&range, &shape) {
            let at = |f: &Field3<f64>, k: isize| f.get([i, j, k]).unwrap();
            for (l, &k) in ks.iter().enumerate() {
                let v = if l < 2 {
                    at(&q, k)
                } else {
                    0.5 * at(&want_two, k - 1) - 0.25 * at(&want_two, k - 2) + at(&q, k)
                };
                want_two.set([i, j, k], v).unwrap();
            }
            let mut count = 0i32;
            for &k in &ks {
                count += 1;
                let v = w * at(&want_leaky, k - 1) + at(&q, k) * count as f64;
                want_leaky.set([i, j, k], v).unwrap();
            }
            let (mut acc, levels) = (0.0f64, ks.len() as i32);
            for (l, &k) in ks.iter().rev().enumerate() {
                let old = at(&want_s, k);
                let left = (levels - l as i32) as f64;
                acc = 0.5 * acc + w * (q.get([i + 1, j, k]).unwrap() - q.get([i, j - 1, k]).unwrap()) + old * left;
                if acc > 0.0 {
                    want_s.set([i, j, k], acc).unwrap();
                }
                let t = if l as i32 + 1 == levels { acc } else { at(&want_top, k + 1) - old };
                want_top.set([i, j, k], t).unwrap();
            }
        }
        for order in [Order::Ijk, Order::Kij] {
            let shape = shape.order(order);
            let range = Loop3D::interior(&shape).shrink(shrink);
            let q = reordered(&q, order);
            for threads in [1, 3] {
                let context = format!("{n:?} shrunk by {shrink:?}, {order:?}, {threads} threads");
                let (mut two, mut out) = (poisoned(shape), reordered(&out0, order));
                let (mut s, mut top) = (reordered(&s0, order), reordered(&top0, order));
                on_threads(threads, || {
                    range.run(TwoBelow, (&q, &mut two)).unwrap();
                    range.run(Leaky, (w, &q, &mut out)).unwrap();
                    range.run(Drain, (w, &q, &mut s, &mut top)).unwrap();
                });
                assert_same(&two, &want_two, &format!("two_below, {context}"));
                assert_same(&out, &want_leaky, &format!("leaky, {context}"));
                assert_same(&s, &want_s, &format!("drain s, {context}"));
                assert_same(&top, &want_top, &format!("drain top, {context}"));
            }
        }
    }
}

#[test]
fn a_2d_sweep_along_the_contiguous_axis_gives_the_other_orders_bits() {
    let mut rng = SplitMix64::new(0x5eed_2d2d);
    for (n, shrink) in [([11, 9], [1, 2]), ([3, 200], [0, 0]), ([40, 1], [0, 0]), ([7, 513], [2, 5])] {
        let shape = Shape2::new(n).halo(1);
        let range = Loop2D::interior(&shape).shrink(shrink);
        let q: Field2<f64> = random(shape, &mut rng, 0.0, 0.5);
        let (mut out, mut seen) = (poisoned(shape), Field2::filled(shape, -7i32));
        range.run(LevelsLeft, (&q, &mut out, &mut seen)).unwrap();
        let kij = shape.order(Order::Kij);
        let qk = reordered(&q, Order::Kij);
        let (mut outk, mut seenk) = (poisoned(kij), Field2::filled(kij, -7i32));
        Loop2D::interior(&kij).shrink(shrink).run(LevelsLeft, (&qk, &mut outk, &mut seenk)).unwrap();
        assert_same(&outk, &out, &format!("levels_left {n:?}"));
        let (j0, nj) = (range.begin()[1] as isize - 1, range.len_per_axis()[1] as isize);
        for_each_point(&shape, |g @ [i, j]| {
            let inside = stencil_tests::range_contains(&range, &shape, g);
            let want = if inside { (j - j0 + 1) as i32 } else { -7 };
            assert_eq!(seenk.get([i, j]), Some(want), "carried count at {g:?}, {n:?}");
            let want = if inside { Some((nj - 1 - (j - j0)) as f64 + q.get(g).unwrap()) } else { None };
            if let Some(want) = want {
                assert_eq!(outk.get(g).map(f64::to_bits), Some(want.to_bits()), "{g:?} {n:?}");
            }
        });
    }
}

#[stencil(sweep = forward)]
fn back2d(idx: Idx2, q: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = 0.5 * out[idx.ix(0, -1)] - 0.25 * out[idx.ix(0, -2)] + q[idx.ix(1, 0)];
}

/// 2D backward sweep reading back two levels above, unguarded.
#[stencil(sweep = backward)]
fn up2d(idx: Idx2, q: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = 0.5 * out[idx.ix(0, 1)] - 0.25 * out[idx.ix(0, 2)] + q[idx.ix(-1, 0)];
}

/// 3D backward sweep reading back 1 and 3 above, and an i32 output read back.
#[stencil(sweep = backward)]
fn up3(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>, n: &mut Field3<i32>) {
    #[carry]
    let mut unused = 3.0;
    n[idx] = n[idx.ix(0, 0, 1)] + idx.level();
    out[idx] = out[idx.ix(0, 0, 3)] * 0.5 + out[idx.ix(0, 0, 1)] + q[idx.ix(0, 1, 0)] + n[idx] as f64;
}

/// 1D forward sweep reading back.
#[stencil(sweep = forward)]
fn one_d(idx: Idx1, q: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = 0.5 * out[idx.ix(-1)] + q[idx];
}

/// Arrays of written fields read back.
#[stencil(sweep = forward)]
fn arr(idx: Idx3, q: &Field3<f64>, o: [&mut Field3<f64>; 2]) {
    o[0][idx] = o[1][idx.ix(0, 0, -1)] + q[idx];
    o[1][idx] = o[0][idx.ix(0, 0, -2)] - q[idx];
}

#[test]
fn two_d_read_back_both_orders() {
    let mut rng = SplitMix64::new(7);
    for (n, halo, lo, hi) in [
        ([11usize, 9usize], [1usize, 2usize], 0usize, 0usize),
        ([3, 40], [1, 2], 0, 3),
        ([5, 1], [1, 2], 0, 0),
        ([5, 3], [1, 2], 2, 0),
    ] {
        let shape = Shape2::new(n).halo_per_axis(halo);
        let ext = shape.extent();
        let range = Loop::from_bounds(ext, [1, halo[1] + lo], [ext[0] - 1, ext[1] - halo[1] - hi]).unwrap();
        let q: Field2<f64> = random(shape, &mut rng, -1.0, 1.0);
        let o0: Field2<f64> = random(shape, &mut rng, -1.0, 1.0);
        let (mut a, mut b) = (o0.clone(), o0.clone());
        range.run(Back2d, (&q, &mut a)).unwrap();
        range.run(Up2d, (&q, &mut b)).unwrap();
        let kij = shape.order(Order::Kij);
        let qk = reordered(&q, Order::Kij);
        let (mut ak, mut bk) = (reordered(&o0, Order::Kij), reordered(&o0, Order::Kij));
        range.run(Back2d, (&qk, &mut ak)).unwrap();
        range.run(Up2d, (&qk, &mut bk)).unwrap();
        let _ = kij;
        assert_same(&ak, &a, &format!("back2d {n:?} {lo} {hi}"));
        assert_same(&bk, &b, &format!("up2d {n:?} {lo} {hi}"));
    }
}

#[test]
fn three_d_backward_distance_three_and_levels_over_column_points() {
    let mut rng = SplitMix64::new(8);
    for (n, lo, hi) in
        [([4usize, 3usize, 7usize], 0usize, 0usize), ([2, 2, 20000], 1, 5), ([3, 2, 1], 0, 0), ([30, 4, 5], 2, 0)]
    {
        let shape = Shape3::new(n).halo_per_axis([0, 1, 3]);
        let ext = shape.extent();
        let range = Loop::from_bounds(ext, [0, 1, 3 + lo], [ext[0], ext[1] - 1, ext[2] - 3 - hi]).unwrap();
        let q: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let o0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let n0 = Field3::from_fn(shape, |_| rng.int(-5, 5) as i32);
        let (mut a, mut m) = (o0.clone(), n0.clone());
        range.run(Up3, (&q, &mut a, &mut m)).unwrap();
        let qk = reordered(&q, Order::Kij);
        let (mut ak, mut mk) =
            (reordered(&o0, Order::Kij), Field3::from_fn(shape.order(Order::Kij), |g| n0.get(g).unwrap()));
        range.run(Up3, (&qk, &mut ak, &mut mk)).unwrap();
        assert_same(&ak, &a, &format!("up3 {n:?}"));
        for_each_point(&shape, |g| assert_eq!(mk.get(g), m.get(g), "{g:?}"));
    }
}

#[test]
fn one_d_sweep() {
    let mut rng = SplitMix64::new(9);
    let shape = Shape1::new([17]).halo(1);
    let range = Loop::interior(&shape);
    let q: Field1<f64> = random(shape, &mut rng, -1.0, 1.0);
    let mut out: Field1<f64> = random(shape, &mut rng, -1.0, 1.0);
    let o0 = out.clone();
    range.run(OneD, (&q, &mut out)).unwrap();
    let mut prev = o0.get([-1]).unwrap();
    for k in 0..17isize {
        let v = 0.5 * prev + q.get([k]).unwrap();
        assert_eq!(out.get([k]).unwrap().to_bits(), v.to_bits());
        prev = v;
    }
}

#[test]
fn arrays_of_outputs() {
    let mut rng = SplitMix64::new(10);
    let shape = Shape3::new([5, 4, 9]).halo_per_axis([0, 0, 2]);
    let range = Loop::interior(&shape);
    let q: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
    let o0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
    let o1: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
    let (mut a0, mut a1) = (o0.clone(), o1.clone());
    range.run(Arr, (&q, [&mut a0, &mut a1])).unwrap();
    let (mut b0, mut b1) = (reordered(&o0, Order::Kij), reordered(&o1, Order::Kij));
    let qk = reordered(&q, Order::Kij);
    range.run(Arr, (&qk, [&mut b0, &mut b1])).unwrap();
    assert_same(&b0, &a0, "arr 0");
    assert_same(&b1, &a1, "arr 1");
}

/// Backward sweep reading one level above, the Kij analogue of sweeps.rs's halo refusal: with
/// no halo along k, a range reaching the top level must be refused (else the window's `above`
/// level would be the next column's first element).
#[stencil(sweep = backward)]
fn down1(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    if idx.level() == 0 {
        out[idx] = q[idx];
    } else {
        out[idx] = out[idx.ix(0, 0, 1)] + q[idx];
    }
}

#[test]
fn kij_window_past_the_column_is_refused_by_the_launch() {
    let shape = Shape3::new([4, 3, 6]).halo_per_axis([0, 0, 0]).order(Order::Kij);
    let q = Field3::<f64>::zeros(shape);
    let mut out = Field3::<f64>::zeros(shape);
    let e = Loop3D::interior(&shape).run(Down1, (&q, &mut out)).unwrap_err();
    assert!(e.to_string().contains("`out`"), "{e}");
    // One level short of the top is fine.
    let ext = shape.extent();
    Loop::from_bounds(ext, [0, 0, 0], [ext[0], ext[1], ext[2] - 1]).unwrap().run(Down1, (&q, &mut out)).unwrap();
}

#[test]
fn aligned_kij_fields() {
    let mut rng = SplitMix64::new(11);
    for align in [1usize, 4, 8] {
        let shape = Shape3::new([5, 3, 13]).halo_per_axis([1, 1, 3]).align(align);
        let range = Loop3D::interior(&shape).shrink([0, 0, 1]);
        let q: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let o0: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let n0 = Field3::from_fn(shape, |_| rng.int(-5, 5) as i32);
        let (mut a, mut m) = (o0.clone(), n0.clone());
        range.run(Up3, (&q, &mut a, &mut m)).unwrap();
        let kij = shape.order(Order::Kij);
        let qk = reordered(&q, Order::Kij);
        let (mut ak, mut mk) = (reordered(&o0, Order::Kij), Field3::from_fn(kij, |g| n0.get(g).unwrap()));
        Loop3D::interior(&kij).shrink([0, 0, 1]).run(Up3, (&qk, &mut ak, &mut mk)).unwrap();
        assert_same(&ak, &a, &format!("aligned {align}"));
    }
}
