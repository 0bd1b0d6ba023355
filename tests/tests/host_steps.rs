//! Several time steps per pass on the host (temporal blocking, `Host::run_steps_with` and
//! `Host::run_leapfrog_with`) against the same steps run one by one, bit for bit, both fields
//! everywhere: stencils of symmetric, one-sided, diagonal and long reach, a reach of zero along
//! the wavefront, a leapfrog of three fields, 2D, f64, both element orders, the interior and a
//! sub-range (whose neighbours outside it differ between the fields, so a step that reads the
//! wrong field shows), every step count from 0 to 9 and passes of 1 to 5 steps over slabs of 1
//! to 7 planes and the cache's choice. Then the refusals.

mod common;

use common::*;
use stencil_runtime::prelude::*;
use stencil_runtime::{stencil, Element, HostTiling};

/// The wave equation's leapfrog with a reach of 3 along every axis and a coefficient field.
#[stencil]
fn wave(idx: Idx3, c: f64, u: &Field3<f64>, u_prev: &Field3<f64>, v2: &Field3<f64>, u_next: &mut Field3<f64>) {
    let mut lap = -6.0 * u[idx];
    lap += 0.7 * (u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()]);
    lap += 0.7 * (u[idx.ix::<0, -1, 0>()] + u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()]);
    lap += 0.2 * (u[idx.ix::<3, 0, 0>()] + u[idx.ix::<0, -3, 0>()] + u[idx.ix::<0, 0, 3>()] + u[idx.ix::<0, 0, -2>()]);
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
}

/// 2D, reach 2 along the outer axis.
#[stencil]
fn heat2d(idx: Idx2, c: f32, u: &Field2<f32>, out: &mut Field2<f32>) {
    out[idx] = u[idx]
        + c * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 2>()] + u[idx.ix::<0, -1>()] - 4.0 * u[idx]);
}

/// Reads the field it writes.
#[stencil]
fn accumulate(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = out[idx] + u[idx.ix::<0, 0, 1>()];
}

/// Writes a second field.
#[stencil]
fn two_out(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>, flux: &mut Field3<f32>) {
    out[idx] = u[idx.ix::<0, 0, 1>()];
    flux[idx] = u[idx];
}

/// Reduces.
#[stencil]
fn step_and_sum(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>, total: &mut Sum<f32>) {
    out[idx] = u[idx.ix::<0, 0, -1>()];
    total.fold(u[idx]);
}

/// Reads two fields of the pair's type.
#[stencil]
fn blend(idx: Idx3, u: &Field3<f32>, v: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = 0.5 * (u[idx.ix::<1, 0, 0>()] + v[idx.ix::<0, 0, -1>()]);
}

fn tilings() -> Vec<Option<HostTiling>> {
    let t = HostTiling::new;
    vec![
        None,
        Some(t(1)),
        Some(t(2)),
        Some(t(3).planes(1)),
        Some(t(4).planes(2)),
        Some(t(5).planes(7)),
        Some(t(3)),
        Some(t(2).planes(3)),
        // Bands of the middle axis: narrower than a band can be (widened to the steps' lean),
        // a few rows, more rows than the range has (one band), and sized from the caches.
        Some(t(3).planes(2).rows(1)),
        Some(t(2).planes(1).rows(3)),
        Some(t(4).rows(5)),
        Some(t(2).rows(2)),
        Some(t(2).planes(4).rows(64)),
    ]
}

/// Both fields' bits against single steps'.
fn same<T: Element, const D: usize>(label: &str, want: &[&Field<T, D>], got: &[&Field<T, D>], bits: fn(T) -> u64) {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let bad = w.as_slice().iter().zip(g.as_slice()).filter(|(a, b)| bits(**a) != bits(**b)).count();
        assert_eq!(bad, 0, "{label}: field {i} differs from single steps' at {bad} points");
    }
}

fn f32_bits(v: f32) -> u64 {
    v.to_bits() as u64
}

fn f64_bits(v: f64) -> u64 {
    v.to_bits()
}

/// Runs a pair's steps one by one and with every tiling, from the same random fields, for every
/// step count from 0 to 9.
#[allow(clippy::type_complexity)]
fn check_pair<T: Element, const D: usize>(
    what: &str,
    a0: &Field<T, D>,
    b0: &Field<T, D>,
    step: &dyn Fn(&Field<T, D>, &mut Field<T, D>),
    tiled: &dyn Fn(usize, Option<HostTiling>, &mut Field<T, D>, &mut Field<T, D>),
    bits: fn(T) -> u64,
) {
    for steps in 0..=9 {
        let (mut a, mut b) = (a0.clone(), b0.clone());
        for _ in 0..steps {
            step(&a, &mut b);
            std::mem::swap(&mut a, &mut b);
        }
        for t in tilings() {
            let (mut ta, mut tb) = (a0.clone(), b0.clone());
            tiled(steps, t, &mut ta, &mut tb);
            same(&format!("{what}, {steps} steps, {t:?}"), &[&a, &b], &[&ta, &tb], bits);
        }
    }
}

fn ranges(shape: &Shape3) -> [Loop3D; 2] {
    let n = shape.extent();
    [Loop3D::interior(shape), Loop3D::new(n[0], 4, 3, n[1], 3, 4, n[2], 4, 3)]
}

#[test]
fn pairs_equal_single_steps_for_every_count_tiling_order_and_range() {
    let mut rng = Rng(17);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([13, 9, 17]).halo(2).order(order);
        for (ri, range) in ranges(&shape).iter().enumerate() {
            let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
            let what = |s: &str| format!("{s} {order:?} range {ri}");
            check_pair(
                &what("heat7"),
                &a0,
                &b0,
                &|a, b| range.run(Heat7, (0.13, a, b)).unwrap(),
                &|n, t, a, b| Host.run_steps_with(range, Heat7, n, t, (a, b), &(), |a, b, _| (0.13, a, b)).unwrap(),
                f32_bits,
            );
            check_pair(
                &what("box27"),
                &a0,
                &b0,
                &|a, b| range.run(Box27, (a, b)).unwrap(),
                &|n, t, a, b| Host.run_steps_with(range, Box27, n, t, (a, b), &(), |a, b, _| (a, b)).unwrap(),
                f32_bits,
            );
            check_pair(
                &what("plane5"),
                &a0,
                &b0,
                &|a, b| range.run(Plane5, (0.2, a, b)).unwrap(),
                &|n, t, a, b| Host.run_steps_with(range, Plane5, n, t, (a, b), &(), |a, b, _| (0.2, a, b)).unwrap(),
                f32_bits,
            );
            let kappa = random(shape, &mut rng, |v| v);
            let (a0, b0) = (random(shape, &mut rng, |v| 3.0 * v), random(shape, &mut rng, |v| 3.0 * v));
            check_pair(
                &what("skew"),
                &a0,
                &b0,
                &|a, b| range.run(Skew, (0.05, &kappa, a, b)).unwrap(),
                &|n, t, a, b| {
                    Host.run_steps_with(range, Skew, n, t, (a, b), &kappa, |a, b, k| (0.05, k, a, b)).unwrap()
                },
                f64_bits,
            );
        }
    }
}

#[test]
fn a_2d_pair_equals_single_steps() {
    let mut rng = Rng(19);
    let shape = Shape2::new([21, 30]).halo(2);
    let sub = Loop2D::new(25, 2, 5, 34, 3, 2);
    for (ri, range) in [Loop2D::interior(&shape), sub].iter().enumerate() {
        let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
        check_pair(
            &format!("heat2d range {ri}"),
            &a0,
            &b0,
            &|a, b| range.run(Heat2d, (0.1, a, b)).unwrap(),
            &|n, t, a, b| Host.run_steps_with(range, Heat2d, n, t, (a, b), &(), |a, b, _| (0.1, a, b)).unwrap(),
            f32_bits,
        );
    }
}

#[test]
fn a_leapfrog_of_three_fields_equals_single_steps() {
    let mut rng = Rng(23);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([11, 16, 19]).halo(3).order(order);
        let v2 = random(shape, &mut rng, |v| 1.0 + v * v);
        for (ri, range) in ranges(&shape).iter().enumerate() {
            let f0: Vec<Field3<f64>> = (0..3).map(|_| random(shape, &mut rng, |v| v)).collect();
            for steps in 0..=9 {
                let (mut up, mut u, mut un) = (f0[0].clone(), f0[1].clone(), f0[2].clone());
                for _ in 0..steps {
                    range.run(Wave, (0.01, &u, &up, &v2, &mut un)).unwrap();
                    std::mem::swap(&mut up, &mut u);
                    std::mem::swap(&mut u, &mut un);
                }
                for t in tilings() {
                    let (mut tp, mut tu, mut tn) = (f0[0].clone(), f0[1].clone(), f0[2].clone());
                    Host.run_leapfrog_with(range, Wave, steps, t, (&mut tp, &mut tu, &mut tn), &v2, |u, up, un, v2| {
                        (0.01, u, up, v2, un)
                    })
                    .unwrap();
                    let label = format!("wave {order:?} range {ri}, {steps} steps, {t:?}");
                    same(&label, &[&up, &u, &un], &[&tp, &tu, &tn], f64_bits);
                }
            }
        }
    }
}

#[test]
fn stencils_and_fields_that_cannot_run_several_steps_per_pass_are_refused() {
    let mut rng = Rng(29);
    let shape = Shape3::new([8, 8, 8]).halo(1);
    let range = Loop3D::interior(&shape);
    let (mut a, mut b, c) = (
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| v as f32),
    );
    let refused = |e: LaunchError, words: &[&str]| {
        assert_eq!(e.code(), "S0109", "{e}");
        let text = e.to_string();
        for w in words {
            assert!(text.contains(w), "`{w}` missing from: {text}");
        }
    };
    let t = Some(HostTiling::new(3));
    let e =
        Host.run_steps_with(&range, Heat7, 4, Some(HostTiling::new(0)), (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    refused(e.unwrap_err(), &["heat7", "0 steps per pass"]);
    let e = Host.run_steps_with(&range, Accumulate, 4, t, (&mut a, &mut b), &(), |a, b, _| (a, b));
    refused(e.unwrap_err(), &["accumulate", "reads `out`, the field it writes", "tiling None"]);
    let e = Host.run_steps_with(&range, Blend, 4, t, (&mut a, &mut b), &(), |a, b, _| (a, a, b));
    refused(e.unwrap_err(), &["newest field each step reads", "[\"u\", \"v\"]", "exactly once"]);
    let e = Host.run_steps_with(&range, Blend, 4, t, (&mut a, &mut b), &c, |_, b, c| (c, c, b));
    refused(e.unwrap_err(), &["newest field each step reads", "no parameter"]);
    // A second written field or a reduction, passed as leaked borrows (the only way `args` can
    // hand out a `&mut` of its own).
    let e = Host.run_steps_with(&range, TwoOut, 4, t, (&mut a, &mut b), &(), |a, b, _| {
        (a, b, Box::leak(Box::new(Field3::<f32>::zeros(shape))))
    });
    refused(e.unwrap_err(), &["two_out", "`out`", "writes `flux`"]);
    let e = Host.run_steps_with(&range, StepAndSum, 4, t, (&mut a, &mut b), &(), |a, b, _| {
        (a, b, Box::leak(Box::new(Sum::new())))
    });
    refused(e.unwrap_err(), &["step_and_sum", "reduces into `total`", "tiling None"]);
    // An inverted range is refused as single steps refuse it, and an empty one swaps as they do.
    let inverted = Loop3D::new(10, 6, 6, 10, 1, 1, 10, 1, 1);
    let e = Host.run_steps_with(&inverted, Heat7, 3, t, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    let single = Host.run_steps_with(&inverted, Heat7, 3, None, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    assert_eq!(e.unwrap_err().code(), single.unwrap_err().code());
    let (a0, b0) = (a.clone(), b.clone());
    let empty = Loop3D::new(10, 5, 5, 10, 1, 1, 10, 1, 1);
    Host.run_steps_with(&empty, Heat7, 3, t, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b)).unwrap();
    assert_eq!((a.as_slice(), b.as_slice()), (b0.as_slice(), a0.as_slice()), "3 empty steps swap the pair once");
    // The same arguments run one step at a time without complaint.
    Host.run_steps_with(&range, Blend, 4, None, (&mut a, &mut b), &c, |a, b, c| (a, c, b)).unwrap();
    Host.run_steps_with(&range, Accumulate, 2, None, (&mut a, &mut b), &(), |a, b, _| (a, b)).unwrap();
    // A declared boundary must be filled after every step.
    Host.declare_boundary(&mut b, [Some(HaloFill::Periodic); 3]).unwrap();
    let e = Host.run_steps_with(&range, Heat7, 4, t, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    refused(e.unwrap_err(), &["declares a boundary", "3 steps per pass", "tiling None"]);
    Host.run_steps_with(&range, Heat7, 4, None, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b)).unwrap();
}
