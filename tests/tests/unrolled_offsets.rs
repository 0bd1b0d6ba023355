//! Offsets from compile-time integers: the variable of a constant `for` loop, a `const`, and
//! arithmetic of them, in both spellings (`idx.ix(r, 0, 0)`, `idx.ix::<r, 0, 0>()`). An 8th-order
//! star written with a loop must give the bits of the same star written out by hand.

use stencil_runtime::prelude::*;
use stencil_tests::SplitMix64;

#[stencil]
fn star_loop(idx: Idx3, c: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    let w = [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0];
    let mut lap = 3.0 * w[0] * u[idx];
    for r in 1..=4 {
        lap += w[r] * (u[idx.ix(r, 0, 0)] + u[idx.ix(-r, 0, 0)]);
        lap += w[r] * (u[idx.ix::<0, r, 0>()] + u[idx.ix::<0, { -r }, 0>()]);
        lap += w[r] * (u[idx.ix(0, 0, r)] + u[idx.ix(0, 0, 0 - r)]);
    }
    out[idx] = c * lap;
}

#[stencil]
fn star_by_hand(idx: Idx3, c: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    let w = [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0];
    let mut lap = 3.0 * w[0] * u[idx];
    lap += w[1] * (u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()]);
    lap += w[1] * (u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]);
    lap += w[1] * (u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()]);
    lap += w[2] * (u[idx.ix::<2, 0, 0>()] + u[idx.ix::<-2, 0, 0>()]);
    lap += w[2] * (u[idx.ix::<0, 2, 0>()] + u[idx.ix::<0, -2, 0>()]);
    lap += w[2] * (u[idx.ix::<0, 0, 2>()] + u[idx.ix::<0, 0, -2>()]);
    lap += w[3] * (u[idx.ix::<3, 0, 0>()] + u[idx.ix::<-3, 0, 0>()]);
    lap += w[3] * (u[idx.ix::<0, 3, 0>()] + u[idx.ix::<0, -3, 0>()]);
    lap += w[3] * (u[idx.ix::<0, 0, 3>()] + u[idx.ix::<0, 0, -3>()]);
    lap += w[4] * (u[idx.ix::<4, 0, 0>()] + u[idx.ix::<-4, 0, 0>()]);
    lap += w[4] * (u[idx.ix::<0, 4, 0>()] + u[idx.ix::<0, -4, 0>()]);
    lap += w[4] * (u[idx.ix::<0, 0, 4>()] + u[idx.ix::<0, 0, -4>()]);
    out[idx] = c * lap;
}

/// A `const` and arithmetic of loop variables as offsets.
#[stencil]
fn shifted(idx: Idx2, u: &Field2<f32>, out: &mut Field2<f32>) {
    const REACH: usize = 2;
    let mut s = 0.0;
    for a in 0..2 {
        for b in 0..2 {
            s += u[idx.ix(2 * a - 1, b * REACH - 1)];
        }
    }
    out[idx] = s + u[idx.ix::<REACH, 0>()];
}

#[test]
fn a_looped_star_is_the_star_written_out() {
    let shape = Shape3::new([13, 9, 11]).halo(4);
    let mut rng = SplitMix64::new(7);
    let u = Field3::from_fn(shape, |_| rng.uniform(-1.0, 1.0));
    let (mut a, mut b) = (Field3::filled(shape, f64::NAN), Field3::filled(shape, f64::NAN));
    let range = Loop3D::interior(&shape);
    range.run(StarLoop, (0.3, &u, &mut a)).unwrap();
    range.run(StarByHand, (0.3, &u, &mut b)).unwrap();
    assert_eq!(
        a.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        b.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(a.get([6, 4, 5]).unwrap().is_finite());
}

#[test]
fn const_and_arithmetic_offsets() {
    let shape = Shape2::new([10, 7]).halo(2);
    let u = Field2::from_fn(shape, |[i, j]| (i * 31 + j * 7) as f32);
    let mut out = Field2::filled(shape, f32::NAN);
    Loop2D::interior(&shape).run(Shifted, (&u, &mut out)).unwrap();
    let at = |i: isize, j: isize| u.get([i, j]).unwrap();
    for i in 0..10 {
        for j in 0..7 {
            let want = at(i - 1, j - 1) + at(i - 1, j + 1) + at(i + 1, j - 1) + at(i + 1, j + 1) + at(i + 2, j);
            assert_eq!(out.get([i, j]), Some(want), "({i}, {j})");
        }
    }
}
