//! Several time steps per sweep on the GPU (temporal blocking; needs a GPU, `scripts/gpu-check
//! run` runs it): `run_steps` of a ping-pong pair against the same steps run one by one on the
//! host, bit for bit, for stencils of symmetric, one-sided and diagonal reach, over the
//! interior and a sub-range (whose neighbours outside it differ between the two fields, so a
//! step that reads the wrong field's boundary shows), both element orders, tilings of odd
//! steps, and every step count from 1 to 8. Then the refusals.

#![cfg(feature = "cuda")]

mod common;

use common::*;
use stencil_runtime::codegen::printer::cuda::TimeTiling;
use stencil_runtime::cuda::{DeviceField, Gpu};
use stencil_runtime::prelude::*;
use stencil_runtime::{stencil, Element, Loop};

/// Reads its input only through a point function (inlined before the kernel is printed).
#[stencil]
fn flux_heat(idx: Idx3, c: f32, u: &Field3<f32>, out: &mut Field3<f32>) {
    let g = |p: Idx3| u[p.ix::<1, 0, 0>()] - u[p];
    out[idx] = u[idx] + c * (g(idx) - g(idx.ix::<-1, 0, 0>())) + c * (u[idx.ix::<0, 0, 1>()] - u[idx]);
}

/// Reaches 3 points along c: with 2 points per thread a read two thread columns away.
#[stencil]
fn wide(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = 0.25 * (u[idx.ix::<-3, 0, 0>()] + u[idx.ix::<3, 0, 0>()])
        + 0.5 * u[idx]
        + 0.1 * (u[idx.ix::<0, 1, 0>()] - u[idx.ix::<0, -1, 0>()]);
}

/// Reads a second field of the pair's type at the same offsets: a stencil the tiling accepts
/// with either field as the pair's input, and whose arguments may miss the pair.
#[stencil]
fn blend(idx: Idx3, u: &Field3<f32>, v: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = 0.5 * (u[idx.ix::<1, 0, 0>()] + v[idx.ix::<-1, 0, 0>()]);
}

fn gpu() -> Gpu {
    Gpu::new(0).expect("a GPU")
}

/// The storage offsets of a range's points.
fn inside<const D: usize>(shape: &Shape<D>, range: &Loop<D>) -> Vec<bool> {
    let mut mask = vec![false; shape.len()];
    let (b, e) = (range.begin(), range.end());
    let mut p = b;
    'points: loop {
        mask[shape.offset(p)] = true;
        for a in 0..D {
            p[a] += 1;
            if (p[a] as isize) < e[a] {
                continue 'points;
            }
            p[a] = b[a];
        }
        break;
    }
    mask
}

fn differing<T: Element>(want: &[T], got: &[T], only: impl Fn(usize) -> bool, bits: impl Fn(T) -> u64) -> usize {
    want.iter().zip(got).enumerate().filter(|&(e, (a, b))| only(e) && bits(*a) != bits(*b)).count()
}

/// Runs `steps` steps of a pair on the host one by one and on the GPU with `tiling`, from the
/// same random fields, and compares: the result field everywhere, the other field outside the
/// range.
#[allow(clippy::too_many_arguments)]
fn check_pair<T: Element>(
    g: &Gpu,
    what: &str,
    shape: Shape3,
    range: &Loop3D,
    tiling: Option<TimeTiling>,
    steps: usize,
    a0: &Field3<T>,
    b0: &Field3<T>,
    host_step: impl Fn(&Field3<T>, &mut Field3<T>),
    gpu_steps: impl Fn(&Gpu, Option<TimeTiling>, usize, &mut DeviceField<T, 3>, &mut DeviceField<T, 3>),
    bits: impl Fn(T) -> u64 + Copy,
) {
    let (mut a, mut b) = (a0.clone(), b0.clone());
    for _ in 0..steps {
        host_step(&a, &mut b);
        std::mem::swap(&mut a, &mut b);
    }
    let (mut da, mut db) = (g.upload(a0).unwrap(), g.upload(b0).unwrap());
    gpu_steps(g, tiling, steps, &mut da, &mut db);
    let (ga, gb) = (da.download().unwrap(), db.download().unwrap());
    let mask = inside(&shape, range);
    let label = format!("{what}, {steps} steps, {}", tiling.map_or("default".into(), |t| t.label()));
    assert_eq!(
        differing(a.as_slice(), ga.as_slice(), |_| true, bits),
        0,
        "{label}: the result differs from the host's"
    );
    assert_eq!(
        differing(b.as_slice(), gb.as_slice(), |e| !mask[e], bits),
        0,
        "{label}: the other field changed outside the range"
    );
}

fn f32_bits(v: f32) -> u64 {
    v.to_bits() as u64
}

fn f64_bits(v: f64) -> u64 {
    v.to_bits()
}

fn tiling(label: &str) -> Option<TimeTiling> {
    Some(label.parse().unwrap())
}

#[test]
fn heat_equals_single_steps_for_every_count_tiling_order_and_range() {
    let g = gpu();
    let mut rng = Rng(11);
    let tilings = [
        None,
        tiling("steps3_32x32x8"),
        tiling("steps5_32x16x64"),
        tiling("steps3_16x8x5"),
        tiling("steps1_16x8x4"),
        tiling("steps3_8x16x7_v2"),
        tiling("steps5_8x16x64_v4"),
        tiling("steps1_4x4x3_v4"),
    ];
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([45, 23, 19]).halo(1).order(order);
        let sub = Loop3D::new(47, 3, 2, 25, 1, 5, 21, 2, 1);
        for (ri, range) in [Loop3D::interior(&shape), sub].iter().enumerate() {
            let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
            for t in tilings {
                for steps in 1..=8 {
                    check_pair(
                        &g,
                        &format!("heat7 {order:?} range {ri}"),
                        shape,
                        range,
                        t,
                        steps,
                        &a0,
                        &b0,
                        |a, b| range.run(Heat7, (0.13, a, b)).unwrap(),
                        |g, t, n, a, b| {
                            g.run_steps_with(range, Heat7, n, t, (a, b), &(), |a, b, _| (0.13, a, b)).unwrap()
                        },
                        f32_bits,
                    );
                }
            }
        }
    }
}

#[test]
fn one_sided_reach_and_a_coefficient_field_in_f64() {
    let g = gpu();
    let mut rng = Rng(12);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([41, 30, 27]).halo(2).order(order);
        let range = Loop3D::new(45, 4, 3, 34, 2, 5, 31, 3, 2);
        let (a0, b0) = (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v));
        let kappa = random(shape, &mut rng, |v| v + 0.3);
        let dk = g.upload(&kappa).unwrap();
        for t in [
            None,
            tiling("steps3_32x32x6"),
            tiling("steps5_64x16x16"),
            tiling("steps3_16x16x3"),
            tiling("steps3_8x16x5_v2"),
            tiling("steps5_16x32x64_v2"),
        ] {
            for steps in [1, 2, 3, 5, 6, 7] {
                check_pair(
                    &g,
                    &format!("skew {order:?}"),
                    shape,
                    &range,
                    t,
                    steps,
                    &a0,
                    &b0,
                    |a, b| range.run(Skew, (0.07, &kappa, a, b)).unwrap(),
                    |g, t, n, a, b| {
                        g.run_steps_with(&range, Skew, n, t, (a, b), &dk, |a, b, dk| (0.07, dk, a, b)).unwrap()
                    },
                    f64_bits,
                );
            }
        }
    }
}

#[test]
fn box_stencil_through_the_executor_trait() {
    let g = gpu();
    let mut rng = Rng(13);
    let shape = Shape3::new([70, 36, 33]).halo(1);
    let range = Loop3D::interior(&shape);
    let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
    for t in [
        None,
        tiling("steps3_32x32x16"),
        tiling("steps5_32x32x64"),
        tiling("steps3_16x16x16_v2"),
        tiling("steps3_8x16x9_v4"),
    ] {
        for steps in [3, 4, 9] {
            check_pair(
                &g,
                "box27",
                shape,
                &range,
                t,
                steps,
                &a0,
                &b0,
                |a, b| range.run(Box27, (a, b)).unwrap(),
                |g, t, n, a, b| match t {
                    None => g.run_steps(&range, Box27, n, (a, b), &(), |a, b, _| (a, b)).unwrap(),
                    Some(t) => g.run_steps_with(&range, Box27, n, Some(t), (a, b), &(), |a, b, _| (a, b)).unwrap(),
                },
                f32_bits,
            );
        }
    }
}

#[test]
fn point_functions_a_wide_reach_along_c_and_no_reach_along_o() {
    let g = gpu();
    let mut rng = Rng(15);
    let shape = Shape3::new([53, 29, 17]).halo(3);
    let range = Loop3D::new(59, 4, 3, 35, 3, 4, 23, 3, 3);
    let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
    let tilings = [
        None,
        tiling("steps3_32x16x8"),
        tiling("steps3_16x8x5_v2"),
        tiling("steps1_8x8x4_v4"),
        tiling("steps5_8x32x9_v4"),
    ];
    for t in tilings {
        for steps in [1, 3, 4, 7] {
            let (c, r) = (0.11, &range);
            check_pair(
                &g,
                "flux_heat",
                shape,
                r,
                t,
                steps,
                &a0,
                &b0,
                |a, b| r.run(FluxHeat, (c, a, b)).unwrap(),
                |g, t, n, a, b| g.run_steps_with(r, FluxHeat, n, t, (a, b), &(), |a, b, _| (c, a, b)).unwrap(),
                f32_bits,
            );
            check_pair(
                &g,
                "wide",
                shape,
                r,
                t,
                steps,
                &a0,
                &b0,
                |a, b| r.run(Wide, (a, b)).unwrap(),
                |g, t, n, a, b| g.run_steps_with(r, Wide, n, t, (a, b), &(), |a, b, _| (a, b)).unwrap(),
                f32_bits,
            );
            check_pair(
                &g,
                "plane5",
                shape,
                r,
                t,
                steps,
                &a0,
                &b0,
                |a, b| r.run(Plane5, (c, a, b)).unwrap(),
                |g, t, n, a, b| g.run_steps_with(r, Plane5, n, t, (a, b), &(), |a, b, _| (c, a, b)).unwrap(),
                f32_bits,
            );
        }
    }
}

#[test]
fn refusals_name_the_stencil_and_what_to_change() {
    let g = gpu();
    let shape = Shape3::new([20, 20, 20]).halo(1);
    let range = Loop3D::interior(&shape);
    let (mut a, mut b, m) = (g.alloc::<f32, 3>(shape).unwrap(), g.alloc(shape).unwrap(), g.alloc(shape).unwrap());

    let even =
        g.run_steps_with(&range, Heat7, 4, tiling("steps2_32x32x8"), (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    let e = even.unwrap_err();
    assert_eq!(e.code(), "S0109", "{e}");
    assert!(e.to_string().contains("use 1 or 3 steps"), "{e}");

    let wide =
        g.run_steps_with(&range, Heat7, 4, tiling("steps9_16x16x8"), (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    let e = wide.unwrap_err();
    assert!(e.to_string().contains("use fewer steps or a wider tile"), "{e}");
    assert_eq!(e.code(), "S0109", "{e}");

    // A second read-only field of the pair's type rides along unchanged (the printer's refusals
    // of stencils are tested without a GPU, in `cuda_kernels`).
    let mut rng = Rng(14);
    let (a0, b0, v) = (
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| v as f32),
    );
    let dv = g.upload(&v).unwrap();
    for t in [None, tiling("steps3_16x16x4")] {
        check_pair(
            &g,
            "blend",
            shape,
            &range,
            t,
            5,
            &a0,
            &b0,
            |a, b| range.run(Blend, (a, &v, b)).unwrap(),
            |g, t, n, a, b| g.run_steps_with(&range, Blend, n, t, (a, b), &dv, |a, b, v| (a, v, b)).unwrap(),
            f32_bits,
        );
    }

    // The arguments must use the pair: the first field as the input, the second as the output.
    let t3 = tiling("steps3_16x16x4");
    let missing = g.run_steps_with(&range, Heat7, 2, t3, (&mut a, &mut b), &m, |_a, b, m| (0.1, m, b));
    let e = missing.unwrap_err();
    assert_eq!(e.code(), "S0109", "{e}");
    assert!(e.to_string().contains("pass the first 0 time(s)"), "{e}");
    let twice = g.run_steps_with(&range, Blend, 2, t3, (&mut a, &mut b), &(), |a, b, _| (a, a, b));
    assert!(twice.unwrap_err().to_string().contains("pass the first 2 time(s)"));

    // A declared boundary is filled after every step, which a sweep of several steps cannot do.
    g.declare_boundary(&mut b, [Some(HaloFill::Periodic); 3]).unwrap();
    let bounded = g.run_steps_with(&range, Heat7, 3, t3, (&mut a, &mut b), &(), |a, b, _| (0.1, a, b));
    let e = bounded.unwrap_err();
    assert_eq!(e.code(), "S0109", "{e}");
    assert!(e.to_string().contains("declares a boundary") && e.to_string().contains("tiling None"), "{e}");
}
