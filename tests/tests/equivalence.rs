//! The loop nest `#[stencil]` generates against plain hand-written loops over global coordinates
//! that read through `Field::get`.
//!
//! Every output is poisoned with a marked NaN before a launch, and the whole field (halo
//! included) is compared bit for bit with a copy of that poisoned field into which the reference
//! wrote the points of the range: a point the nest computes wrongly, a point of the range it
//! skips and a point outside the range it touches all show. The references evaluate the same
//! expressions in the same order as the stencil bodies, so the results are bit-equal.

use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::canonical::*;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, Real, SplitMix64};

// ---------------------------------------------------------------------------------------------
// Stencils, each written once for f32 and once for f64.

macro_rules! smooth1d {
    ($name:ident, $t:ident) => {
        #[stencil]
        fn $name(idx: Idx1, w: $t, u: &Field1<$t>, out: &mut Field1<$t>) {
            out[idx] = (1.0 - 2.0 * w) * u[idx] + w * (u[idx.ix::<-1>()] + u[idx.ix::<1>()]);
        }
    };
}
smooth1d!(smooth1d_f32, f32);
smooth1d!(smooth1d_f64, f64);

macro_rules! lap2d {
    ($name:ident, $t:ident) => {
        #[stencil]
        fn $name(idx: Idx2, c: $t, u: &Field2<$t>, out: &mut Field2<$t>) {
            out[idx] = u[idx]
                + c * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()]
                    - 4.0 * u[idx]);
        }
    };
}
lap2d!(lap2d_f32, f32);
lap2d!(lap2d_f64, f64);

// 7-point diffusion and the 25-point star are the canonical ones (`stencil_tests::canonical`,
// f32 and f64), with their references.

// Two outputs; an if / else-if / else statement assigning `let mut` locals; sqrt and max; an
// `if` value that is a select and one whose branch has a statement (hoisted).
macro_rules! two_outputs {
    ($name:ident, $t:ident) => {
        #[stencil]
        fn $name(idx: Idx2, thr: $t, a: &Field2<$t>, b: &Field2<$t>, mag: &mut Field2<$t>, flag: &mut Field2<$t>) {
            let gx = a[idx.ix::<1, 0>()] - a[idx.ix::<-1, 0>()];
            let gy = b[idx.ix::<0, 1>()] - b[idx.ix::<0, -1>()];
            let m = (gx * gx + gy * gy).sqrt();
            let mut s = 0.0;
            let mut hits = 0;
            if m > thr {
                s = m.max(a[idx]);
                hits += 1;
            } else if gx < 0.0 {
                s = -m;
            } else {
                s = gx.max(gy) * 0.5;
                hits = 2;
            }
            let w = if hits > 0 { s * 2.0 } else { s };
            let v = if s > 0.0 {
                let t = s.sqrt();
                t + 1.0
            } else {
                0.0
            };
            mag[idx] = w + v;
            flag[idx] = hits as $t;
        }
    };
}
two_outputs!(two_outputs_f32, f32);
two_outputs!(two_outputs_f64, f64);

// Reads the written field at offset 0, after and before writing it.
macro_rules! accumulate {
    ($name:ident, $t:ident) => {
        #[stencil]
        fn $name(idx: Idx3, a: $t, b: $t, f: &Field3<$t>, out: &mut Field3<$t>) {
            out[idx] += a * f[idx.ix::<0, 0, 1>()];
            out[idx] = out[idx] * b;
            if out[idx] < 0.0 {
                out[idx] = -out[idx];
            }
        }
    };
}
accumulate!(accumulate_f32, f32);
accumulate!(accumulate_f64, f64);

// An i32 and a u32 scalar, an i32 field, integer arithmetic and casts both ways.
#[stencil]
fn int_scale(idx: Idx3, n: i32, k: u32, f: &Field3<f32>, cnt: &Field3<i32>, out: &mut Field3<f32>) {
    let m = n * 2 + cnt[idx] % 3;
    let s = (m as f32) * 0.5;
    let t = (k >> 1) as f64;
    let big = if m > 0 { m.max(n) } else { -(m.abs()) };
    out[idx] = f[idx.ix::<1, 0, 0>()] * s + (t as f32) - (cnt[idx.ix::<0, -1, 0>()] as f32) + (big as f32);
}

// Constant-trip loops (unrolled), exclusive and inclusive, with a local declared in the body.
#[stencil]
fn horner(idx: Idx1, x: f64, f: &Field1<f64>, out: &mut Field1<f64>) {
    let mut acc = 0.0;
    for q in 0..3 {
        acc = acc * x + f[idx] * (q as f64 + 1.0);
    }
    for r in 1..=2 {
        let w = r as f64;
        acc += w * f[idx.ix::<-1>()];
    }
    out[idx] = acc;
}

// ---------------------------------------------------------------------------------------------
// References: the same expressions, evaluated in the same order, over global coordinates.

fn smooth1d_ref<T: Real>(w: T, u: &Field1<T>, g: [isize; 1]) -> T {
    (T::lit(1.0) - T::lit(2.0) * w) * nb(u, g, [0]) + w * (nb(u, g, [-1]) + nb(u, g, [1]))
}

fn lap2d_ref<T: Real>(c: T, u: &Field2<T>, g: [isize; 2]) -> T {
    nb(u, g, [0, 0])
        + c * (nb(u, g, [1, 0]) + nb(u, g, [-1, 0]) + nb(u, g, [0, 1]) + nb(u, g, [0, -1])
            - T::lit(4.0) * nb(u, g, [0, 0]))
}

fn two_outputs_ref<T: Real>(thr: T, a: &Field2<T>, b: &Field2<T>, g: [isize; 2]) -> (T, T) {
    let gx = nb(a, g, [1, 0]) - nb(a, g, [-1, 0]);
    let gy = nb(b, g, [0, 1]) - nb(b, g, [0, -1]);
    let m = (gx * gx + gy * gy).sqrt();
    let (s, hits) = if m > thr {
        (m.max(nb(a, g, [0, 0])), 1)
    } else if gx < T::lit(0.0) {
        (-m, 0)
    } else {
        (gx.max(gy) * T::lit(0.5), 2)
    };
    let w = if hits > 0 { s * T::lit(2.0) } else { s };
    let v = if s > T::lit(0.0) { s.sqrt() + T::lit(1.0) } else { T::lit(0.0) };
    (w + v, T::lit(hits as f64))
}

fn accumulate_ref<T: Real>(a: T, b: T, f: &Field3<T>, old: T, g: [isize; 3]) -> T {
    let mut o = old;
    o = o + a * nb(f, g, [0, 0, 1]);
    o = o * b;
    if o < T::lit(0.0) {
        o = -o;
    }
    o
}

fn int_scale_ref(n: i32, k: u32, f: &Field3<f32>, cnt: &Field3<i32>, g: [isize; 3]) -> f32 {
    let m = n * 2 + nb(cnt, g, [0, 0, 0]) % 3;
    let s = (m as f32) * 0.5;
    let t = (k >> 1) as f64;
    let big = if m > 0 { m.max(n) } else { -(m.abs()) };
    nb(f, g, [1, 0, 0]) * s + (t as f32) - (nb(cnt, g, [0, -1, 0]) as f32) + (big as f32)
}

fn horner_ref(x: f64, f: &Field1<f64>, g: [isize; 1]) -> f64 {
    let mut acc = 0.0;
    for q in 0..3 {
        acc = acc * x + nb(f, g, [0]) * (q as f64 + 1.0);
    }
    for r in 1..=2 {
        acc += r as f64 * nb(f, g, [-1]);
    }
    acc
}

// ---------------------------------------------------------------------------------------------
// Drivers, generic over the element type; `run` launches the f32 or the f64 functor.

type Run1<T> = fn(&Loop1D, T, &Field1<T>, &mut Field1<T>) -> Result<(), LaunchError>;
type Run2<T> = fn(&Loop2D, T, &Field2<T>, &mut Field2<T>) -> Result<(), LaunchError>;
type Run3<T, C> = fn(&Loop3D, C, &Field3<T>, &mut Field3<T>) -> Result<(), LaunchError>;

/// Runs `run` over `range` into a poisoned output and compares it with `reference` written into
/// a poisoned copy over the same range.
fn check<T: Real, const D: usize>(
    shape: Shape<D>,
    range: Loop<D>,
    run: impl FnOnce(&Loop<D>, &mut Field<T, D>) -> Result<(), LaunchError>,
    reference: impl Fn([isize; D]) -> T,
    context: &str,
) {
    let mut out = poisoned::<T, D>(shape);
    let mut want = out.clone();
    run(&range, &mut out).unwrap_or_else(|e| panic!("{context}: launch over {range:?} refused: {e}"));
    for_each_in_range(&range, &shape, |g| want.set(g, reference(g)).expect("inside"));
    assert_bits_eq(&out, &want, &format!("{context}, range {range:?}"));
}

fn check_smooth1d<T: Real>(seed: u64, run: Run1<T>) {
    let mut rng = SplitMix64::new(seed);
    for halo in 1..=3 {
        for order in ORDERS {
            let shape = Shape1::new([37]).halo(halo).order(order);
            let u = random::<T, 1>(shape, &mut rng, -1.0, 1.0);
            let w = T::lit(rng.uniform(0.0, 0.5));
            // The interior, and the interior grown into the halo as far as the reach allows.
            for range in [Loop1D::interior(&shape), Loop1D::interior(&shape).grow([halo - 1]).unwrap()] {
                let ctx = format!("smooth1d<{}> halo {halo} {order:?}", T::NAME);
                check(shape, range, |r, out| run(r, w, &u, out), |g| smooth1d_ref(w, &u, g), &ctx);
            }
        }
    }
}

#[test]
fn smooth1d_f32_matches_reference() {
    check_smooth1d::<f32>(11, |r, w, u, out| r.run(Smooth1dF32, (w, u, out)));
}

#[test]
fn smooth1d_f64_matches_reference() {
    check_smooth1d::<f64>(12, |r, w, u, out| r.run(Smooth1dF64, (w, u, out)));
}

fn check_lap2d<T: Real>(seed: u64, run: Run2<T>) {
    let mut rng = SplitMix64::new(seed);
    for halo in 1..=3 {
        for order in ORDERS {
            let shape = Shape2::new([37, 5]).halo(halo).order(order);
            let u = random::<T, 2>(shape, &mut rng, -1.0, 1.0);
            let c = T::lit(rng.uniform(0.0, 0.25));
            for range in [Loop2D::interior(&shape), Loop2D::interior(&shape).grow([halo - 1, halo - 1]).unwrap()] {
                let ctx = format!("lap2d<{}> halo {halo} {order:?}", T::NAME);
                check(shape, range, |r, out| run(r, c, &u, out), |g| lap2d_ref(c, &u, g), &ctx);
            }
        }
    }
}

#[test]
fn lap2d_f32_matches_reference() {
    check_lap2d::<f32>(21, |r, c, u, out| r.run(Lap2dF32, (c, u, out)));
}

#[test]
fn lap2d_f64_matches_reference() {
    check_lap2d::<f64>(22, |r, c, u, out| r.run(Lap2dF64, (c, u, out)));
}

fn coefficients<T: Real>(rng: &mut SplitMix64) -> [T; 7] {
    std::array::from_fn(|_| T::lit(rng.uniform(-0.5, 0.5)))
}

fn check_diffusion3d<T: Real>(seed: u64, run: Run3<T, [T; 7]>) {
    let mut rng = SplitMix64::new(seed);
    for halo in 1..=3 {
        for order in ORDERS {
            let shape = Shape3::new([13, 10, 7]).halo(halo).order(order);
            let f = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
            let c = coefficients::<T>(&mut rng);
            let grown = Loop3D::interior(&shape).grow([halo - 1; 3]).unwrap();
            for range in [Loop3D::interior(&shape), grown] {
                let ctx = format!("diffusion3d<{}> halo {halo} {order:?}", T::NAME);
                check(shape, range, |r, out| run(r, c, &f, out), |g| diffusion_ref(c, &f, g), &ctx);
            }
        }
    }
    // Different halos per axis, alignment off (no padding).
    let shape = Shape3::new([13, 10, 7]).halo_per_axis([1, 3, 2]).align(1).order(Order::Kij);
    let f = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
    let c = coefficients::<T>(&mut rng);
    let ctx = format!("diffusion3d<{}> halo [1, 3, 2] align 1", T::NAME);
    check(shape, Loop3D::interior(&shape), |r, out| run(r, c, &f, out), |g| diffusion_ref(c, &f, g), &ctx);
}

#[test]
fn diffusion3d_f32_matches_reference() {
    check_diffusion3d::<f32>(31, |r, c, f, out| r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], f, out)));
}

#[test]
fn diffusion3d_f64_matches_reference() {
    check_diffusion3d::<f64>(32, |r, c, f, out| {
        r.run(Diffusion7F64, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], f, out))
    });
}

type RunStar<T> = fn(&Loop3D, T, [&Field3<T>; 3], &mut Field3<T>) -> Result<(), LaunchError>;

fn check_star25<T: Real>(seed: u64, run: RunStar<T>) {
    let mut rng = SplitMix64::new(seed);
    let shapes = [
        Shape3::new([13, 10, 7]).halo(4),
        Shape3::new([13, 10, 7]).halo(4).order(Order::Kij),
        Shape3::new([9, 11, 6]).halo_per_axis([4, 5, 6]).order(Order::Kij),
    ];
    for shape in shapes {
        let u = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
        let u_prev = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
        let v2 = random::<T, 3>(shape, &mut rng, 0.5, 1.5);
        let c = T::lit(rng.uniform(0.0, 0.1));
        let ctx = format!("star25<{}> {shape:?}", T::NAME);
        check(
            shape,
            Loop3D::interior(&shape),
            |r, out| run(r, c, [&u, &u_prev, &v2], out),
            |g| star25_ref(c, &u, &u_prev, &v2, g),
            &ctx,
        );
    }
}

#[test]
fn star25_f32_matches_reference() {
    check_star25::<f32>(41, |r, c, [u, p, v], out| r.run(Star25, (c, u, p, v, out)));
}

#[test]
fn star25_f64_matches_reference() {
    check_star25::<f64>(42, |r, c, [u, p, v], out| r.run(Star25F64, (c, u, p, v, out)));
}

type RunTwo<T> = fn(&Loop2D, T, &Field2<T>, &Field2<T>, &mut Field2<T>, &mut Field2<T>) -> Result<(), LaunchError>;

fn check_two_outputs<T: Real>(seed: u64, run: RunTwo<T>) {
    let mut rng = SplitMix64::new(seed);
    for halo in 1..=3 {
        for order in ORDERS {
            let shape = Shape2::new([37, 5]).halo(halo).order(order);
            let a = random::<T, 2>(shape, &mut rng, -1.0, 1.0);
            let b = random::<T, 2>(shape, &mut rng, -1.0, 1.0);
            let thr = T::lit(1.0);
            let range = Loop2D::interior(&shape).grow([halo - 1, 0]).unwrap();
            let (mut mag, mut flag) = (poisoned::<T, 2>(shape), poisoned::<T, 2>(shape));
            let (mut want_mag, mut want_flag) = (mag.clone(), flag.clone());
            run(&range, thr, &a, &b, &mut mag, &mut flag).expect("launch");
            for_each_in_range(&range, &shape, |g| {
                let (m, h) = two_outputs_ref(thr, &a, &b, g);
                want_mag.set(g, m).expect("inside");
                want_flag.set(g, h).expect("inside");
            });
            let ctx = format!("two_outputs<{}> halo {halo} {order:?}", T::NAME);
            assert_bits_eq(&mag, &want_mag, &format!("{ctx}: mag"));
            assert_bits_eq(&flag, &want_flag, &format!("{ctx}: flag"));
            let taken = [T::lit(0.0), T::lit(1.0), T::lit(2.0)]
                .map(|h| want_flag.to_vec().iter().filter(|v| v.bits() == h.bits()).count());
            assert!(taken.iter().all(|&n| n > 0), "{ctx}: every branch should be taken, got {taken:?}");
        }
    }
}

#[test]
fn two_outputs_f32_matches_reference() {
    check_two_outputs::<f32>(51, |r, t, a, b, m, f| r.run(TwoOutputsF32, (t, a, b, m, f)));
}

#[test]
fn two_outputs_f64_matches_reference() {
    check_two_outputs::<f64>(52, |r, t, a, b, m, f| r.run(TwoOutputsF64, (t, a, b, m, f)));
}

type RunAcc<T> = fn(&Loop3D, [T; 2], &Field3<T>, &mut Field3<T>) -> Result<(), LaunchError>;

fn check_accumulate<T: Real>(seed: u64, run: RunAcc<T>) {
    let mut rng = SplitMix64::new(seed);
    for order in ORDERS {
        let shape = Shape3::new([13, 10, 7]).halo(1).order(order);
        let f = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
        // The output is read, so it starts from values, not poison; points outside the range
        // must keep them.
        let mut out = random::<T, 3>(shape, &mut rng, -1.0, 1.0);
        let old = out.clone();
        let mut want = out.clone();
        let ab = [T::lit(rng.uniform(-1.0, 1.0)), T::lit(rng.uniform(-2.0, 2.0))];
        let range = Loop3D::new(15, 1, 2, 12, 2, 1, 9, 0, 1);
        run(&range, ab, &f, &mut out).expect("launch");
        for_each_in_range(&range, &shape, |g| {
            let v = accumulate_ref(ab[0], ab[1], &f, nb(&old, g, [0, 0, 0]), g);
            want.set(g, v).expect("inside");
        });
        assert_bits_eq(&out, &want, &format!("accumulate<{}> {order:?}", T::NAME));
    }
}

#[test]
fn accumulate_f32_reads_its_output_at_offset_zero() {
    check_accumulate::<f32>(61, |r, [a, b], f, out| r.run(AccumulateF32, (a, b, f, out)));
}

#[test]
fn accumulate_f64_reads_its_output_at_offset_zero() {
    check_accumulate::<f64>(62, |r, [a, b], f, out| r.run(AccumulateF64, (a, b, f, out)));
}

#[test]
fn int_scalars_and_casts_match_reference() {
    let mut rng = SplitMix64::new(71);
    for order in ORDERS {
        for halo in 1..=2 {
            let shape = Shape3::new([13, 10, 7]).halo(halo).order(order);
            let f = random::<f32, 3>(shape, &mut rng, -1.0, 1.0);
            let cnt = Field3::from_fn(shape, |_| rng.int(-50, 50) as i32);
            let (n, k) = (rng.int(-20, 20) as i32, rng.int(0, 1000) as u32);
            let ctx = format!("int_scale halo {halo} {order:?} n {n} k {k}");
            check(
                shape,
                Loop3D::interior(&shape),
                |r, out| r.run(IntScale, (n, k, &f, &cnt, out)),
                |g| int_scale_ref(n, k, &f, &cnt, g),
                &ctx,
            );
        }
    }
}

#[test]
fn unrolled_constant_loops_match_reference() {
    let mut rng = SplitMix64::new(81);
    for halo in 1..=3 {
        let shape = Shape1::new([37]).halo(halo);
        let f = random::<f64, 1>(shape, &mut rng, -1.0, 1.0);
        let x = rng.uniform(-2.0, 2.0);
        let range = Loop1D::interior(&shape).grow([halo - 1]).unwrap();
        check(shape, range, |r, out| r.run(Horner, (x, &f, out)), |g| horner_ref(x, &f, g), "horner");
    }
}

// ---------------------------------------------------------------------------------------------
// Sub-ranges and empty ranges.

#[test]
fn sub_range_3d_writes_only_its_points() {
    let mut rng = SplitMix64::new(91);
    for order in ORDERS {
        let shape = Shape3::new([13, 10, 7]).halo(2).order(order);
        assert_eq!(shape.extent(), [17, 14, 11]);
        let f = random::<f32, 3>(shape, &mut rng, -1.0, 1.0);
        let (a, b) = (coefficients::<f32>(&mut rng), coefficients::<f32>(&mut rng));
        let run = |range: &Loop3D, c: [f32; 7], out: &mut Field3<f32>| {
            range.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, out))
        };
        let mut out = poisoned::<f32, 3>(shape);
        let mut want = out.clone();

        // First a sub-range with different margins on each side of each axis: everything outside
        // it, halo included, keeps its poison.
        let sub = Loop3D::new(17, 3, 5, 14, 2, 4, 11, 4, 2);
        assert_eq!((sub.begin(), sub.end()), ([3, 2, 4], [12, 10, 9]));
        run(&sub, a, &mut out).expect("sub-range launch");
        for_each_in_range(&sub, &shape, |g| want.set(g, diffusion_ref(a, &f, g)).expect("inside"));
        assert_bits_eq(&out, &want, &format!("sub-range {order:?}"));

        // Then another, overlapping one with other coefficients: the points of the first that it
        // does not cover keep the first launch's values.
        let other = Loop3D::from_bounds([17, 14, 11], [1, 5, 2], [9, 13, 6]).unwrap();
        run(&other, b, &mut out).expect("second launch");
        for_each_in_range(&other, &shape, |g| want.set(g, diffusion_ref(b, &f, g)).expect("inside"));
        assert_bits_eq(&out, &want, &format!("two overlapping sub-ranges {order:?}"));
        assert!(
            stencil_tests::range_contains(&sub, &shape, [9, 7, 6])
                && !stencil_tests::range_contains(&other, &shape, [9, 7, 6]),
            "the check above must cover a point written only by the first launch"
        );
    }
}

#[test]
fn sub_range_2d_and_1d_write_only_their_points() {
    let mut rng = SplitMix64::new(92);
    for order in ORDERS {
        let shape = Shape2::new([37, 5]).halo(2).order(order);
        let u = random::<f64, 2>(shape, &mut rng, -1.0, 1.0);
        let range = Loop2D::new(41, 2, 7, 9, 3, 1);
        check(shape, range, |r, out| r.run(Lap2dF64, (0.2, &u, out)), |g| lap2d_ref(0.2, &u, g), "lap2d sub-range");
    }
    let shape = Shape1::new([37]).halo(3);
    let u = random::<f32, 1>(shape, &mut rng, -1.0, 1.0);
    let range = Loop1D::new(43, 1, 9);
    check(
        shape,
        range,
        |r, out| r.run(Smooth1dF32, (0.3, &u, out)),
        |g| smooth1d_ref(0.3, &u, g),
        "smooth1d sub-range",
    );
}

#[test]
fn empty_ranges_are_a_no_op() {
    let mut rng = SplitMix64::new(93);
    let shape = Shape3::new([13, 10, 7]).halo(1);
    let f = random::<f32, 3>(shape, &mut rng, -1.0, 1.0);
    let c = coefficients::<f32>(&mut rng);
    let empties = [
        Loop3D::new(15, 8, 7, 12, 1, 1, 9, 1, 1),   // begin == end along x, mid-field
        Loop3D::new(15, 1, 1, 12, 12, 0, 9, 1, 1),  // begins at the end of y
        Loop3D::new(15, 0, 15, 12, 0, 12, 9, 0, 9), // empty along every axis
        Loop3D::new(15, 0, 0, 12, 0, 0, 9, 4, 5),   // whole x, y (beyond the reach) but empty z
    ];
    for range in empties {
        assert_eq!(range.points(), 0);
        let mut out = poisoned::<f32, 3>(shape);
        let before = out.clone();
        range.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut out)).expect("empty launch");
        assert_bits_eq(&out, &before, &format!("empty range {range:?}"));
    }
    let shape = Shape1::new([37]).halo(1);
    let u = random::<f64, 1>(shape, &mut rng, -1.0, 1.0);
    let mut out = poisoned::<f64, 1>(shape);
    let before = out.clone();
    Loop1D::new(39, 20, 19).run(Smooth1dF64, (0.1, &u, &mut out)).expect("empty 1D launch");
    assert_bits_eq(&out, &before, "empty 1D range");
}

#[test]
fn functors_carry_their_source_and_ir() {
    // The runtime rebuilds the IR from the embedded source; it must agree with the functor.
    use stencil_runtime::Stencil;
    let ir = <Star25 as Stencil<3>>::ir();
    assert_eq!((ir.name.as_str(), ir.dim, ir.params.len()), ("star25", 3, 5));
    let info = <Star25 as Stencil<3>>::INFO;
    let u = info.fields.iter().find(|f| f.name == "u").expect("field u");
    assert_eq!((u.lo, u.hi, u.writable), ([-4; 3], [4; 3], false));
    let horner = <Horner as Stencil<1>>::ir();
    assert_eq!(horner.dim, 1);
}

// An f32 literal must mean the f32 nearest to its decimal text, as in Rust. This one lies just
// above the midpoint between 1.0 and the next f32: Rust rounds it up, while rounding it first to
// f64 (which lands exactly on the midpoint) and then to f32 (ties to even) gives 1.0.
#[stencil]
fn f32_literal(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = f[idx] * 1.00000005960464477539062501;
}

#[test]
fn f32_literals_round_like_rust() {
    let shape = Shape1::new([5]);
    let f = Field1::filled(shape, 1.0f32);
    let range = Loop1D::interior(&shape);
    #[allow(clippy::excessive_precision)]
    let want = 1.0f32 * 1.00000005960464477539062501f32;
    assert_eq!(want, 1.0000001f32);
    check(shape, range, |r, out| r.run(F32Literal, (&f, out)), |_| want, "f32 literal");
}

#[test]
fn smooth1d_across_parallel_chunks() {
    // 1D ranges are split into chunks of 16384 points; make the range straddle two boundaries
    // and start and end off any alignment.
    let mut rng = SplitMix64::new(94);
    let shape = Shape1::new([2 * 16384 + 77]).halo(2);
    let u = random::<f32, 1>(shape, &mut rng, -1.0, 1.0);
    let range = Loop1D::interior(&shape).grow([1]).unwrap().shrink([0]);
    check(shape, range, |r, out| r.run(Smooth1dF32, (0.2, &u, out)), |g| smooth1d_ref(0.2, &u, g), "long 1D");
    let sub = Loop1D::new(2 * 16384 + 81, 5, 3);
    check(shape, sub, |r, out| r.run(Smooth1dF32, (0.2, &u, out)), |g| smooth1d_ref(0.2, &u, g), "long 1D sub-range");
}

// The right operand of `&&` is evaluated only when the left one is true, statements of a block
// operand included: here it guards an integer division by zero.
#[stencil]
fn guarded_div(idx: Idx1, f: &Field1<i32>, out: &mut Field1<i32>) {
    let d = f[idx];
    let big = d != 0 && {
        let q = 100 / d;
        q > 10
    };
    out[idx] = if big { 1 } else { 0 };
}

#[test]
fn short_circuit_guards_the_statements_of_a_block_operand() {
    let shape = Shape1::new([24]).halo(1);
    let f = Field1::from_fn(shape, |[i]| (i as i32 % 12) - 3); // includes zeros
    let mut out = Field1::filled(shape, i32::MIN);
    let range = Loop1D::interior(&shape);
    let launched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| range.run(GuardedDiv, (&f, &mut out))));
    assert!(launched.is_ok(), "the launch panicked: the block after `&&` ran although its guard was false");
    launched.unwrap().expect("launch");
    for_each_in_range(&range, &shape, |g| {
        let d = nb(&f, g, [0]);
        let want = if d != 0 && 100 / d > 10 { 1 } else { 0 };
        assert_eq!(out.get(g), Some(want), "at {g:?} (d = {d})");
    });
    assert_eq!(out.get([-1]), Some(i32::MIN), "halo untouched");
}

// ---------------------------------------------------------------------------------------------
// The other canonical stencils against their references (`stencil_tests::canonical`).

#[test]
fn canonical_branchy_matches_reference() {
    let mut rng = SplitMix64::new(81);
    for order in ORDERS {
        for flip in [false, true] {
            let shape = Shape3::new([13, 10, 7]).halo(1).order(order);
            let a = random::<f32, 3>(shape, &mut rng, -1.0, 1.0);
            let b = random::<f32, 3>(shape, &mut rng, -1.0, 1.0);
            let limit = 1.0f32;
            let range = Loop3D::interior(&shape);
            let (mut lo, mut hi) = (poisoned::<f32, 3>(shape), poisoned::<f32, 3>(shape));
            let (mut want_lo, mut want_hi) = (lo.clone(), hi.clone());
            range.run(Branchy, (limit, flip, &a, &b, &mut lo, &mut hi)).expect("launch");
            for_each_in_range(&range, &shape, |g| {
                let (l, h) = branchy_ref(limit, flip, &a, &b, g);
                want_lo.set(g, l).expect("inside");
                want_hi.set(g, h).expect("inside");
            });
            let ctx = format!("branchy {order:?} flip {flip}");
            assert_bits_eq(&lo, &want_lo, &format!("{ctx}: lo"));
            assert_bits_eq(&hi, &want_hi, &format!("{ctx}: hi"));
        }
    }
}

#[test]
fn canonical_diffusion_f64_matches_reference() {
    let mut rng = SplitMix64::new(82);
    for order in ORDERS {
        let shape = Shape3::new([13, 10, 7]).halo_per_axis([1, 1, 2]).order(order);
        let f = random::<f64, 3>(shape, &mut rng, -1.0, 1.0);
        let k = rng.uniform(0.0, 0.2);
        let ctx = format!("diffusion_f64 {order:?}");
        let range = Loop3D::interior(&shape);
        check(shape, range, |r, out| r.run(DiffusionF64, (k, &f, out)), |g| diffusion_f64_ref(k, &f, g), &ctx);
    }
}

#[test]
fn canonical_jacobi2d_matches_reference() {
    let mut rng = SplitMix64::new(83);
    for order in ORDERS {
        let shape = Shape2::new([37, 5]).halo(1).order(order);
        let u = random::<f32, 2>(shape, &mut rng, -1.0, 1.0);
        let rhs = random::<f32, 2>(shape, &mut rng, -1.0, 1.0);
        let w = rng.uniform(0.5, 1.0) as f32;
        let ctx = format!("jacobi2d {order:?}");
        let range = Loop2D::interior(&shape);
        check(shape, range, |r, out| r.run(Jacobi2d, (w, &u, &rhs, out)), |g| jacobi2d_ref(w, &u, &rhs, g), &ctx);
    }
}
