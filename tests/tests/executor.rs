//! The host executor through the generic `Executor` interface (CI has no GPU; the GPU side of the
//! same checks is `gpu_executor.rs`): a step written once against `Executor`, recorded steps,
//! multi-field halo fills, and the errors of copies and halo fills.

mod common;

use common::*;
use stencil_runtime::prelude::*;
use stencil_runtime::{FieldError, FieldStorage, RangeError};

/// A diffusion step pair with periodic halos, written once for any executor.
fn step_pair<E: Executor>(
    exec: &E,
    range: &Loop3D,
    (f, g): &mut (E::Field<f32, 3>, E::Field<f32, 3>),
) -> Result<(), LaunchError> {
    let periodic = [Some(HaloFill::Periodic); 3];
    exec.fill_halos(&mut [(&mut *f, periodic)])?;
    exec.run(range, Diffusion, (0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.19, &*f, &mut *g))?;
    exec.fill_halos(&mut [(&mut *g, periodic)])?;
    exec.run(range, Diffusion, (0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.19, &*g, &mut *f))
}

/// The same two steps as plain loops over the interior with periodic wrap (the reference).
fn reference_pair(start: &Field3<f32>) -> Field3<f32> {
    let shape = *start.shape();
    let n = shape.interior().map(|v| v as isize);
    let step = |f: &Field3<f32>| {
        Field3::from_fn(shape, |g| {
            let inside = (0..3).all(|a| g[a] >= 0 && g[a] < n[a]);
            if !inside {
                return 0.0;
            }
            let at = |d: [isize; 3]| f.get(std::array::from_fn(|a| (g[a] + d[a]).rem_euclid(n[a]))).unwrap();
            0.19 * at([0, 0, 0])
                + 0.11 * at([1, 0, 0])
                + 0.12 * at([-1, 0, 0])
                + 0.13 * at([0, 1, 0])
                + 0.14 * at([0, -1, 0])
                + 0.15 * at([0, 0, 1])
                + 0.16 * at([0, 0, -1])
        })
    };
    step(&step(start))
}

fn interior_values(f: &Field3<f32>) -> Vec<u32> {
    let n = f.shape().interior();
    let mut v = Vec::new();
    for k in 0..n[2] as isize {
        for j in 0..n[1] as isize {
            for i in 0..n[0] as isize {
                v.push(f.get([i, j, k]).unwrap().to_bits());
            }
        }
    }
    v
}

#[test]
fn a_generic_step_on_the_host_matches_plain_loops_and_replays_as_recorded() {
    let shape = Shape3::new([13, 7, 9]).halo(1).order(Order::Kij);
    let start = random(shape, &mut Rng(5), |v| v as f32);
    let range = Loop3D::interior(&shape);
    let mut state = (Host.upload(&start).unwrap(), Host.alloc(shape).unwrap());
    step_pair(&Host, &range, &mut state).unwrap();
    assert_eq!(interior_values(&state.0), interior_values(&reference_pair(&start)));

    let after_one = state.0.clone();
    let mut rec = Recorded::new(&Host, &mut state, |e, s| step_pair(e, &range, s)).unwrap();
    assert!(!rec.is_recorded(), "the host records nothing: replay runs the step");
    assert_eq!(rec.state().0.to_vec(), after_one.to_vec(), "recording does not run the step");
    rec.replay().unwrap();
    assert_eq!(interior_values(&rec.state().0), interior_values(&reference_pair(&after_one)));
}

#[test]
fn multi_field_halo_fills_equal_per_axis_fills_and_misuse_is_an_error() {
    let mut rng = Rng(9);
    let shape = Shape3::new([6, 5, 4]).halo_per_axis([2, 1, 3]);
    let mut a = random(shape, &mut rng, |v| v);
    let mut b = random(shape, &mut rng, |v| v);
    let (mut a_ref, mut b_ref) = (a.clone(), b.clone());
    let fills_a = [Some(HaloFill::Periodic), None, Some(HaloFill::MirrorNegated)];
    let fills_b = [Some(HaloFill::ZeroGradient), Some(HaloFill::Mirror), Some(HaloFill::Periodic)];
    Host.fill_halos(&mut [(&mut a, fills_a), (&mut b, fills_b)]).unwrap();
    for (f, fills) in [(&mut a_ref, fills_a), (&mut b_ref, fills_b)] {
        for (axis, fill) in fills.iter().enumerate() {
            if let Some(fill) = fill {
                f.fill_halo(axis, *fill).unwrap();
            }
        }
    }
    assert_eq!((a.to_vec(), b.to_vec()), (a_ref.to_vec(), b_ref.to_vec()));

    let e = Host.fill_halo(&mut a, 3, HaloFill::Periodic).unwrap_err();
    assert!(matches!(e, LaunchError::Halo(_)), "{e}");
    let thin = Shape3::new([1, 5, 4]).halo(2);
    let mut t = Field3::<f64>::zeros(thin);
    let e = Host.fill_halos(&mut [(&mut t, [Some(HaloFill::Periodic), None, None])]).unwrap_err();
    assert!(e.to_string().contains("axis 0") || e.to_string().contains("x"), "{e}");

    let mut other = Field3::<f64>::zeros(Shape3::new([6, 5, 4]).halo(1));
    let e = Host.copy(&mut other, &a).unwrap_err();
    assert!(matches!(e, LaunchError::CopyShape { .. }), "{e}");
    assert_eq!(FieldStorage::home(&a), 0, "host fields live on the host");
}

#[test]
fn box_reads_and_writes_stay_inside_their_fields_or_say_why() {
    let shape = Shape3::new([6, 5, 4]).halo(1).order(Order::Kij);
    let f = random(shape, &mut Rng(13), |v| v);
    // A box read and written back lands point for point (the order is the field's layout order).
    let values = f.read_box([1, 2, 0], [3, 2, 4]).unwrap();
    assert_eq!(values.len(), 24);
    let mut g = Field3::<f64>::zeros(shape);
    g.write_box([1, 2, 0], [3, 2, 4], &values).unwrap();
    for p in shape.storage_points() {
        let at = shape.to_global(p);
        let inside = (1..4).contains(&p[0]) && (2..4).contains(&p[1]) && p[2] < 4;
        assert_eq!(g.get(at), if inside { f.get(at) } else { Some(0.0) }, "point {at:?}");
    }
    let e = f.read_box([5, 0, 0], [4, 1, 1]).unwrap_err();
    assert!(
        matches!(&e, FieldError::Range(RangeError::BoxOutside { call: "read_box", axis: 0, at, len, .. })
            if at == &[5, 0, 0] && len == &[4, 1, 1]),
        "{e:?}"
    );
    assert!(e.to_string().contains("leaves the field") && e.to_string().contains("axis 0"), "{e}");
    let e = g.write_box([0, 0, 0], [2, 2, 2], &values).unwrap_err();
    assert!(e.to_string().contains("24 values but the shape has 8 points"), "{e}");
}

/// A host field larger than the memory is an error that says how many bytes it needs (and what
/// is available), never an abort of the process.
#[test]
fn host_fields_too_large_for_memory_are_errors() {
    use stencil_runtime::FieldError;
    let huge = Shape3::new([1 << 14, 1 << 14, 1 << 14]); // 2^42 points: 32 TiB of f64
    let e = Field3::<f64>::try_zeros(huge).unwrap_err();
    assert!(matches!(e, FieldError::OutOfMemory { bytes, .. } if bytes >= 1 << 45), "{e:?}");
    assert!(e.to_string().contains("needs 32768.") && e.to_string().contains("[S0215]"), "{e}");
    let e = Host.alloc::<f64, 3>(huge).unwrap_err();
    assert_eq!(e.code(), "S0215", "{e}");
    // More elements than the address space holds bytes for.
    let e = Field3::<f64>::try_zeros(Shape3::new([1 << 21, 1 << 21, 1 << 21])).unwrap_err();
    assert!(matches!(e, FieldError::OutOfMemory { .. }), "{e:?}");
}

/// `steps` diffusion steps of a ping-pong pair, written once for any executor.
fn diffuse<E: Executor>(exec: &E, range: &Loop3D, steps: usize, pair: (&mut E::Field<f32, 3>, &mut E::Field<f32, 3>)) {
    exec.run_steps(range, Diffusion, steps, pair, &(), |f, g, _| (0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.19, f, g))
        .unwrap();
}

#[test]
fn run_steps_on_the_host_is_single_steps_with_a_swap_after_each() {
    let shape = Shape3::new([9, 7, 6]).halo(1);
    let range = Loop3D::interior(&shape);
    let mut rng = Rng(5);
    let (a0, b0) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
    for steps in 0..5 {
        // Plain loops: each step reads the last result and writes into the other field, whose
        // halo keeps its own values.
        let (mut want, mut other) = (a0.clone(), b0.clone());
        let n = shape.interior().map(|v| v as isize);
        for _ in 0..steps {
            let mut next = other.clone();
            for k in 0..n[2] {
                for j in 0..n[1] {
                    for i in 0..n[0] {
                        let at = |d: [isize; 3]| want.get([i + d[0], j + d[1], k + d[2]]).unwrap();
                        let v = 0.19 * at([0, 0, 0])
                            + 0.11 * at([1, 0, 0])
                            + 0.12 * at([-1, 0, 0])
                            + 0.13 * at([0, 1, 0])
                            + 0.14 * at([0, -1, 0])
                            + 0.15 * at([0, 0, 1])
                            + 0.16 * at([0, 0, -1]);
                        next.set([i, j, k], v).unwrap();
                    }
                }
            }
            other = std::mem::replace(&mut want, next);
        }
        let (mut a, mut b) = (a0.clone(), b0.clone());
        diffuse(&Host, &range, steps, (&mut a, &mut b));
        let bits = |f: &Field3<f32>| f.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&want), "{steps} steps: the result");
        assert_eq!(bits(&b), bits(&other), "{steps} steps: the field before the result");
    }
}

#[test]
fn reads_issued_later_hold_the_values_of_their_time_on_the_host() {
    check_reads_later(&Host, 5);
}

#[test]
fn reductions_issued_later_fold_what_a_launch_folds_on_the_host() {
    check_reduce_later(&Host, 6);
}

/// Values added at many points in one operation give the bits of a launch per point (repeats
/// in order), fill a declared boundary again, and are refused for a point in the halo or a
/// count of values other than the points'.
#[test]
fn values_added_at_points_match_a_launch_per_point_on_the_host() {
    for seed in 0..3 {
        check_add_at(&Host, seed);
    }
}

/// `SparsePoints::inject` adds each point's amount times its node weights, as a launch per node
/// of `spread` does (a point between nodes, a point on a node, a node two points share), bit
/// for bit; another number of amounts than points, and `add_at` with no points, add nothing.
#[test]
fn injected_amounts_equal_a_launch_per_spread_node() {
    use stencil_runtime::SparsePoints;
    let shape = Shape3::new([9, 8, 7]).halo(2);
    let interior = Loop3D::interior(&shape);
    let points = SparsePoints::new(&interior, [1.0; 3], &[[1.5, 2.25, 3.0], [4.0, 4.0, 4.0], [1.0, 2.0, 3.0]]).unwrap();
    let amounts = [0.3, -1.7, 2.9];
    let start = random(shape, &mut Rng(11), |v| v);
    let (mut by_inject, mut by_launch) = (start.clone(), start.clone());
    points.inject(&Host, &mut by_inject, &amounts).unwrap();
    for (p, &a) in amounts.iter().enumerate() {
        for (node, amount) in points.spread(p, a) {
            Host.run(&node, AddAmount::<f64>::new(), (amount, &mut by_launch)).unwrap();
        }
    }
    let bits = |f: &Field<f64, 3>| f.to_vec().into_iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(&by_inject), bits(&by_launch));
    assert_ne!(bits(&by_inject), bits(&start), "something was added");
    let e = points.inject(&Host, &mut by_inject, &amounts[..2]).unwrap_err().to_string();
    assert!(e.contains("3 points but 2 values"), "{e}");
    Host.add_at::<f64, 3>(&mut by_inject, &[], &[]).unwrap();
    assert_eq!(bits(&by_inject), bits(&by_launch), "a refused inject and an empty add_at add nothing");
}
