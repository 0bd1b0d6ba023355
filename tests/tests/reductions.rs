//! Reductions on the host: sums, minima and maxima (f32, f64, several at once, with and without
//! written fields, 1D to 3D, both element orders, sub-ranges) against plain Rust loops over the
//! points of the range; the documented summation order reproduced bit for bit by an independent
//! reference; the same bits on every run and for every thread count; and the composition with
//! the global reductions of host subdomains.

use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains, Loop};
use stencil_tests::reducing::{ScaleAndNorm, Stats3dF32, Stats3dF64};
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, Real, SplitMix64};

#[stencil]
fn total1d(idx: Idx1, u: &Field1<f64>, total: &mut Sum<f64>) {
    total.fold(u[idx]);
}

/// The bound on the difference of two sums of the same `n` values in different orders: each is
/// within `(n - 1) ε Σ|x|` of the exact sum (the classic bound for any order of additions).
fn sum_tolerance(n: usize, abs_sum: f64, eps: f64) -> f64 {
    2.0 * (n.max(2) - 1) as f64 * eps * abs_sum
}

/// The host's documented order, written independently of the nest: each row (run along the
/// contiguous axis; in 1D, chunks of 16384 points) summed from its first point, then the row
/// sums combined by a balanced binary tree (left half, right half) in storage order.
fn documented_sum<T: Real, const D: usize>(u: &Field<T, D>, range: &Loop<D>) -> T {
    let shape = u.shape();
    let axes = shape.element_order().axes::<D>();
    let len = range.len_per_axis();
    let begin = range.begin();
    let halo = shape.halo_widths();
    let at = |s: [usize; D]| u.get(std::array::from_fn(|a| s[a] as isize - halo[a] as isize)).unwrap();
    let mut rows = Vec::new();
    let (c, row_len) = (axes[0], len[axes[0]]);
    let chunk = if D == 1 { 16384 } else { row_len };
    let others: Vec<usize> = axes[1..].to_vec();
    let n_rows: usize = others.iter().map(|&a| len[a]).product();
    for r in 0..n_rows {
        let mut rest = r;
        let mut s = begin;
        for &a in &others {
            s[a] = begin[a] + rest % len[a];
            rest /= len[a];
        }
        for start in (0..row_len).step_by(chunk) {
            let mut acc = T::lit(0.0);
            for x in start..(start + chunk).min(row_len) {
                s[c] = begin[c] + x;
                acc = acc + at(s);
            }
            rows.push(acc);
        }
    }
    fn tree<T: Real>(v: &[T]) -> T {
        match v.len() {
            0 => T::lit(0.0),
            1 => v[0],
            n => tree(&v[..n / 2]) + tree(&v[n / 2..]),
        }
    }
    tree(&rows)
}

macro_rules! check_stats3d {
    ($test:ident, $stencil:ident, $t:ident) => {
        #[test]
        fn $test() {
            let mut rng = SplitMix64::new(0x5eed_0016);
            for (n, order, shrink) in [
                ([37, 19, 11], Order::Ijk, [0, 0, 0]),
                ([20, 33, 9], Order::Kij, [0, 0, 0]),
                ([41, 13, 17], Order::Ijk, [3, 1, 2]),
            ] {
                let shape = Shape3::new(n).halo(1).order(order);
                let u: Field3<$t> = random(shape, &mut rng, -3.0, 5.0);
                let range = Loop3D::interior(&shape).shrink(shrink);
                let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
                range.run($stencil, (&u, &mut total, &mut lo, &mut jump)).unwrap();
                // Independent reference: a plain loop over the points.
                let (mut s, mut a, mut mn, mut mx) = (0.0f64, 0.0f64, $t::INFINITY, $t::NEG_INFINITY);
                for_each_in_range(&range, &shape, |g| {
                    let v = nb(&u, g, [0, 0, 0]);
                    s += v as f64;
                    a += (v as f64).abs();
                    mn = mn.min(v);
                    mx = mx.max((v - nb(&u, g, [-1, 0, 0])).abs());
                });
                let ctx = format!("{n:?} {order:?} shrink {shrink:?}");
                let tol = sum_tolerance(range.points(), a, $t::EPSILON as f64);
                assert!((total.get() as f64 - s).abs() <= tol, "{ctx}: sum {} vs {s} (tolerance {tol:e})", total.get());
                assert_eq!(lo.get().to_bits(), mn.to_bits(), "{ctx}: min");
                assert_eq!(jump.get().to_bits(), mx.to_bits(), "{ctx}: max");
                // The documented order, bit for bit.
                let want = documented_sum(&u, &range);
                assert_eq!(
                    total.get().to_bits(),
                    want.to_bits(),
                    "{ctx}: sum {} vs documented order {want}",
                    total.get()
                );
            }
        }
    };
}
check_stats3d!(stats3d_f32_matches_loops, Stats3dF32, f32);
check_stats3d!(stats3d_f64_matches_loops, Stats3dF64, f64);

#[test]
fn writes_and_reduces_in_one_pass() {
    let mut rng = SplitMix64::new(7);
    let shape = Shape2::new([300, 45]).halo(2);
    let u: Field2<f32> = random(shape, &mut rng, -1.0, 1.0);
    let range = Loop2D::interior(&shape).shrink([1, 2]);
    let mut out = poisoned::<f32, 2>(shape);
    let (mut sq, mut pos) = (Sum::new(), Max::new());
    range.run(ScaleAndNorm, (1.5, &u, &mut out, &mut sq, &mut pos)).unwrap();
    let mut want = poisoned::<f32, 2>(shape);
    let (mut s, mut mx) = (0.0f64, f32::NEG_INFINITY);
    for_each_in_range(&range, &shape, |g| {
        let v = 1.5 * nb(&u, g, [0, 0]);
        want.set(g, v).unwrap();
        s += (v as f64) * (v as f64);
        if v > 0.0 {
            mx = mx.max(v);
        }
    });
    assert_bits_eq(&out, &want, "the written field");
    let tol = sum_tolerance(range.points(), s, f64::EPSILON);
    assert!((sq.get() - s).abs() <= tol, "{} vs {s}", sq.get());
    assert_eq!(pos.get(), mx);
}

#[test]
fn one_dimensional_chunks_and_documented_order() {
    let mut rng = SplitMix64::new(11);
    let shape = Shape1::new([100_003]).halo(1);
    let u: Field1<f64> = random(shape, &mut rng, -1.0, 2.0);
    let range = Loop1D::interior(&shape).shrink([5]);
    let mut total = Sum::new();
    range.run(Total1d, (&u, &mut total)).unwrap();
    assert_eq!(total.get().to_bits(), documented_sum(&u, &range).to_bits());
}

#[test]
fn same_bits_on_every_run_and_thread_count() {
    let mut rng = SplitMix64::new(99);
    let shape = Shape3::new([70, 31, 23]).halo(1);
    let u: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
    let range = Loop3D::interior(&shape);
    let run = || {
        let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
        range.run(Stats3dF32, (&u, &mut total, &mut lo, &mut jump)).unwrap();
        [total.get().to_bits(), lo.get().to_bits(), jump.get().to_bits()]
    };
    let first = run();
    for threads in [1, 2, 3, 5] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        for _ in 0..3 {
            assert_eq!(pool.install(run), first, "{threads} threads");
        }
    }
}

#[test]
fn launches_fold_into_the_value_and_empty_ranges_leave_it() {
    let mut rng = SplitMix64::new(3);
    let shape = Shape3::new([16, 12, 10]).halo(1);
    let u: Field3<f64> = random(shape, &mut rng, 0.0, 1.0);
    let whole = Loop3D::interior(&shape);
    let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
    whole.run(Stats3dF64, (&u, &mut total, &mut lo, &mut jump)).unwrap();
    // The same range in two halves along k, folded into one set of values.
    let (mut t2, mut l2, mut j2) = (Sum::new(), Min::new(), Max::new());
    for (k0, k1) in [(1, 6), (6, 11)] {
        let half = Loop3D::from_bounds(shape.extent(), [1, 1, k0], [17, 13, k1]).unwrap();
        half.run(Stats3dF64, (&u, &mut t2, &mut l2, &mut j2)).unwrap();
    }
    assert_eq!((l2.get(), j2.get()), (lo.get(), jump.get()));
    assert!((t2.get() - total.get()).abs() <= sum_tolerance(whole.points(), total.get(), f64::EPSILON));
    let empty = Loop3D::from_bounds(shape.extent(), [1, 1, 1], [17, 13, 1]).unwrap();
    empty.run(Stats3dF64, (&u, &mut t2, &mut l2, &mut j2)).unwrap();
    assert_eq!((l2.get(), j2.get()), (lo.get(), jump.get()));
    let mut fresh = Sum::new();
    let (mut a, mut b) = (Min::new(), Max::new());
    empty.run(Stats3dF64, (&u, &mut fresh, &mut a, &mut b)).unwrap();
    assert_eq!((fresh.get(), a.get(), b.get()), (0.0, f64::INFINITY, f64::NEG_INFINITY));
}

#[test]
fn nan_sticks_in_min_and_max() {
    let shape = Shape3::new([40, 5, 4]).halo(1);
    let mut u = Field3::<f64>::from_fn(shape, |[i, j, k]| (i + 2 * j + 3 * k) as f64);
    u.set([17, 2, 1], f64::NAN).unwrap();
    let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
    Loop3D::interior(&shape).run(Stats3dF64, (&u, &mut total, &mut lo, &mut jump)).unwrap();
    assert!(total.get().is_nan() && lo.get().is_nan() && jump.get().is_nan());
}

#[test]
fn launch_errors_name_the_field() {
    let shape = Shape3::new([8, 8, 8]);
    let u = Field3::<f64>::zeros(shape);
    let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
    let e = Loop3D::interior(&shape).run(Stats3dF64, (&u, &mut total, &mut lo, &mut jump)).unwrap_err();
    assert!(e.to_string().contains("`u`"), "{e}");
    assert_eq!(total.get(), 0.0, "a refused launch folds nothing");
}

/// A per-subdomain reduction, then the global one over the subdomains: the decomposed max is the
/// single domain's bit for bit, the sum agrees to the order tolerance.
#[test]
fn composes_with_the_subdomains_global_reductions() {
    let mut rng = SplitMix64::new(1234);
    let global = [29, 22, 13];
    let whole = Shape3::new(global).halo(1);
    let g: Field3<f64> = random(whole, &mut rng, -2.0, 3.0);
    let (mut total, mut lo, mut jump) = (Sum::new(), Min::new(), Max::new());
    Loop3D::interior(&whole).run(Stats3dF64, (&g, &mut total, &mut lo, &mut jump)).unwrap();
    for n in [2, 3, 4, 6] {
        let d = Decomposition::auto(global, n, [false; 3], [1; 3]).unwrap();
        let domains = Domains::new(d, vec![Host; d.len()]).unwrap();
        let (mut sums, mut mins, mut maxs) = (Vec::new(), Vec::new(), Vec::new());
        for i in domains.local_range() {
            // The subdomain with its halo from the global field (what an exchange would give).
            let filled = d.subdomain(i).part_of(&g);
            let (mut t, mut l, mut j) = (Sum::new(), Min::new(), Max::new());
            Loop3D::interior(filled.shape()).run(Stats3dF64, (&filled, &mut t, &mut l, &mut j)).unwrap();
            sums.push(t.get());
            mins.push(-l.get());
            maxs.push(j.get());
        }
        assert_eq!(domains.max(maxs).to_bits(), jump.get().to_bits(), "{n} subdomains: max");
        assert_eq!((-domains.max(mins)).to_bits(), lo.get().to_bits(), "{n} subdomains: min");
        let abs: f64 = g.read_range(&Loop3D::interior(&whole)).unwrap().iter().map(|v| v.abs()).sum();
        let tol = sum_tolerance(whole.points(), abs, f64::EPSILON);
        let s = domains.sum(sums);
        assert!((s - total.get()).abs() <= tol, "{n} subdomains: sum {s} vs {}", total.get());
    }
}
