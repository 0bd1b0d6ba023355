//! Edge cases of column sweeps whose column axis is the contiguous one (`Order::Kij`, and 1D):
//! a 2D sweep reading back in both directions, a backward sweep reading three levels back with
//! an `i32` field, more levels than one block's budget, a 1D sweep against a plain loop, arrays
//! of written fields, aligned shapes, and the launch's refusal of a read past the column's end
//! (the check that keeps each column's window inside its column). Each against the same sweep on
//! `Ijk` fields, bit for bit at every point of storage.
use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::{for_each_point, random, Real, SplitMix64};

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

fn reordered<T: Real, const D: usize>(f: &Field<T, D>, order: Order) -> Field<T, D> {
    Field::from_fn(f.shape().order(order), |g| f.get(g).expect("same points"))
}

/// 2D forward sweep reading back one and two levels, unguarded.
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
