//! Property test of host launches over random shapes, halos, orders and ranges, with stencils of
//! different reaches: a launch succeeds exactly when a reference predicate says it should (range
//! not inverted, built for the fields' extent, and empty or within the fields once the reach is
//! added), refuses with the right variant otherwise, and when it runs it writes the reference
//! values on the range and touches no other point.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use stencil_runtime::prelude::*;
use stencil_runtime::{Loop, RangeError, Stencil};
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, SplitMix64};

#[stencil]
fn point(idx: Idx3, a: f64, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = a * f[idx] + 1.0;
}

#[stencil]
fn reach_x(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx.ix::<-3, 0, 0>()] - 0.5 * f[idx.ix::<1, 0, 0>()];
}

#[stencil]
fn reach_yz(idx: Idx3, f: &Field3<f64>, g: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx.ix::<0, 2, 0>()] * g[idx.ix::<0, 0, 3>()] + f[idx.ix::<0, -1, -2>()];
}

#[stencil]
fn reach_diag(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx.ix::<-1, -1, -1>()] + f[idx.ix::<2, 3, -3>()] * f[idx.ix::<0, 0, 1>()];
}

#[stencil]
fn reach_2d(idx: Idx2, f: &Field2<f64>, g: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = f[idx.ix::<-2, 3>()] + f[idx.ix::<1, -3>()] - g[idx.ix::<0, 1>()];
}

/// The inputs of one case: every stencil reads `f` and some read `g`.
struct Inputs<const D: usize> {
    f: Field<f64, D>,
    g: Field<f64, D>,
}

type Launch<const D: usize> = fn(&Loop<D>, &Inputs<D>, &mut Field<f64, D>) -> Result<(), LaunchError>;
type Reference<const D: usize> = fn(&Inputs<D>, [isize; D]) -> f64;

/// A stencil under test: its reach per field read, written out by hand from its body.
struct Probe<const D: usize> {
    name: &'static str,
    /// `(field, lo, hi)` per field parameter.
    reach: &'static [(&'static str, [i32; 3], [i32; 3])],
    launch: Launch<D>,
    reference: Reference<D>,
}

const PROBES_3D: [Probe<3>; 4] = [
    Probe {
        name: "point",
        reach: &[("f", [0; 3], [0; 3]), ("out", [0; 3], [0; 3])],
        launch: |r, i, out| r.run(Point, (0.75, &i.f, out)),
        reference: |i, g| 0.75 * nb(&i.f, g, [0, 0, 0]) + 1.0,
    },
    Probe {
        name: "reach_x",
        reach: &[("f", [-3, 0, 0], [1, 0, 0]), ("out", [0; 3], [0; 3])],
        launch: |r, i, out| r.run(ReachX, (&i.f, out)),
        reference: |i, g| nb(&i.f, g, [-3, 0, 0]) - 0.5 * nb(&i.f, g, [1, 0, 0]),
    },
    Probe {
        name: "reach_yz",
        reach: &[("f", [0, -1, -2], [0, 2, 0]), ("g", [0; 3], [0, 0, 3]), ("out", [0; 3], [0; 3])],
        launch: |r, i, out| r.run(ReachYz, (&i.f, &i.g, out)),
        reference: |i, g| nb(&i.f, g, [0, 2, 0]) * nb(&i.g, g, [0, 0, 3]) + nb(&i.f, g, [0, -1, -2]),
    },
    Probe {
        name: "reach_diag",
        reach: &[("f", [-1, -1, -3], [2, 3, 1]), ("out", [0; 3], [0; 3])],
        launch: |r, i, out| r.run(ReachDiag, (&i.f, out)),
        reference: |i, g| nb(&i.f, g, [-1, -1, -1]) + nb(&i.f, g, [2, 3, -3]) * nb(&i.f, g, [0, 0, 1]),
    },
];

const PROBE_2D: Probe<2> = Probe {
    name: "reach_2d",
    reach: &[("f", [-2, -3, 0], [1, 3, 0]), ("g", [0; 3], [0, 1, 0]), ("out", [0; 3], [0; 3])],
    launch: |r, i, out| r.run(Reach2d, (&i.f, &i.g, out)),
    reference: |i, g| nb(&i.f, g, [-2, 3]) + nb(&i.f, g, [1, -3]) - nb(&i.g, g, [0, 1]),
};

#[test]
fn reach_tables_match_the_macro_metadata() {
    fn infos<S: Stencil<D>, const D: usize>(_: S) -> Vec<(&'static str, [i32; 3], [i32; 3])> {
        S::INFO.fields.iter().map(|f| (f.name, f.lo, f.hi)).collect()
    }
    let got = [infos(Point), infos(ReachX), infos(ReachYz), infos(ReachDiag)];
    for (probe, got) in PROBES_3D.iter().zip(got) {
        assert_eq!(probe.reach, got.as_slice(), "{}", probe.name);
    }
    assert_eq!(PROBE_2D.reach, infos(Reach2d).as_slice());
}

/// What the launch must do, computed from the range, the shape and the reach alone.
#[derive(Debug, PartialEq)]
enum Expect {
    Run,
    Inverted {
        axis: usize,
    },
    Extent {
        axis: usize,
        range_extent: usize,
        field_extent: usize,
    },
    /// Every `(field, axis, offset)` that leaves the field; the error must name one of them.
    OutOfBounds(Vec<(&'static str, usize, i32)>),
}

fn predict<const D: usize>(range: &Loop<D>, shape: &Shape<D>, reach: &[(&'static str, [i32; 3], [i32; 3])]) -> Expect {
    let (n, begin) = (range.extent(), range.begin());
    let i1: [usize; D] = std::array::from_fn(|a| (n[a] as isize - range.end()[a]) as usize);
    if let Some(axis) = (0..D).find(|&a| begin[a] + i1[a] > n[a]) {
        return Expect::Inverted { axis };
    }
    let ext = shape.extent();
    if let Some(axis) = (0..D).find(|&a| n[a] != ext[a]) {
        return Expect::Extent { axis, range_extent: n[axis], field_extent: ext[axis] };
    }
    if (0..D).any(|a| begin[a] + i1[a] == n[a]) {
        return Expect::Run; // empty: nothing is read
    }
    let mut leaves = Vec::new();
    for &(field, lo, hi) in reach {
        for a in 0..D {
            let (first, last) = (begin[a] as i64, (n[a] - i1[a]) as i64 - 1);
            if first + (lo[a] as i64) < 0 {
                leaves.push((field, a, lo[a]));
            }
            if last + (hi[a] as i64) >= ext[a] as i64 {
                leaves.push((field, a, hi[a]));
            }
        }
    }
    if leaves.is_empty() {
        Expect::Run
    } else {
        Expect::OutOfBounds(leaves)
    }
}

/// Random numbers for one axis, turned into a shape and a range by [`axis_case`].
type AxisDraw = (usize, usize, u8, usize, usize, i8, i8);

fn axis_draw() -> impl Strategy<Value = AxisDraw> {
    (1usize..=12, 0usize..=4, 0u8..12, 0usize..32, 0usize..32, -2i8..=2, -2i8..=2)
}

/// `(interior, halo, (n, i0, i1))` for one axis: mostly ranges near the interior, also random
/// (possibly inverted) ones, empty ones, ones touching either end, and a few built for a wrong
/// extent. With `tame`, only ranges near the interior or at least 3 points in from both ends, so
/// that cases where the stencils of long reach run are common too.
fn axis_case(d: AxisDraw, tame: bool) -> (usize, usize, (usize, usize, usize)) {
    let (interior, halo, kind, a, b, d0, d1) = d;
    let kind = if tame { kind % 6 } else { kind };
    let e = interior + 2 * halo;
    let near = |d: i8| (halo as isize + d as isize).max(0) as usize;
    let range = match kind {
        0..=2 => (e, near(d0), near(d1)),
        // At least 3 points in from both ends: fits every probe's reach whatever the halo.
        3..=5 if 6 + a % 3 + b % 3 <= e => (e, 3 + a % 3, 3 + b % 3),
        3..=5 => (e, near(d0), near(d1)),
        6 => (e, a % (e + 2), b % (e + 2)),
        7 => {
            let k = a % (e + 1);
            (e, k, e - k)
        }
        8 => (e, 0, near(d1)),
        9 => (e, near(d0), 0),
        10 => (e, 0, 0),
        _ => ((e as isize + if a % 2 == 0 { 1 } else { -1 }).max(0) as usize, near(d0), near(d1)),
    };
    (interior, halo, range)
}

fn check_probe<const D: usize>(
    probe: &Probe<D>,
    shape: Shape<D>,
    range: Loop<D>,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut rng = SplitMix64::new(seed);
    let inputs = Inputs { f: random(shape, &mut rng, -1.0, 1.0), g: random(shape, &mut rng, -1.0, 1.0) };
    let mut out = poisoned::<f64, D>(shape);
    let mut want = out.clone();
    let expect = predict(&range, &shape, probe.reach);
    let got = (probe.launch)(&range, &inputs, &mut out);
    let ctx = format!("{} over {range:?} on {shape:?}: expected {expect:?}, got {got:?}", probe.name);
    match (&expect, &got) {
        (Expect::Run, Ok(())) => {
            for_each_in_range(&range, &shape, |g| want.set(g, (probe.reference)(&inputs, g)).expect("inside"));
        }
        (Expect::Inverted { axis }, Err(LaunchError::InvertedRange { stencil, axis: a, .. })) => {
            prop_assert_eq!((*stencil, a), (probe.name, axis), "{}", ctx);
        }
        (
            Expect::Extent { axis, range_extent, field_extent },
            Err(LaunchError::RangeExtent { axis: a, range_extent: r, field_extent: f, field, .. }),
        ) => {
            prop_assert_eq!((a, r, f), (axis, range_extent, field_extent), "{}", ctx);
            prop_assert_eq!(*field, probe.reach[0].0, "{}", ctx);
        }
        (
            Expect::OutOfBounds(leaves),
            Err(LaunchError::OutOfBounds { field, axis, offset, range: r, halo, extent, .. }),
        ) => {
            prop_assert!(leaves.contains(&(*field, *axis, *offset)), "{}", ctx);
            prop_assert_eq!(*r, (range.begin()[*axis], range.end()[*axis] as usize), "{}", ctx);
            prop_assert_eq!((*halo, *extent), (shape.halo_widths()[*axis], shape.extent()[*axis]), "{}", ctx);
        }
        _ => prop_assert!(false, "{}", ctx),
    }
    if let Err(e) = &got {
        let msg = e.to_string();
        prop_assert!(msg.contains(probe.name), "{}: message {:?}", ctx, msg);
    }
    // Run or refused, every point outside the range (everything, if refused) is untouched.
    assert_bits_eq(&out, &want, &ctx);
    Ok(())
}

fn config() -> Config {
    Config { cases: 64, rng_seed: RngSeed::Fixed(0x5eed_1a7c), failure_persistence: None, ..Config::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn launch_3d_succeeds_iff_predicted_and_matches_reference(
        axes in [axis_draw(), axis_draw(), axis_draw()],
        kij in any::<bool>(),
        tame in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let cases = axes.map(|d| axis_case(d, tame));
        let order = if kij { Order::Kij } else { Order::Ijk };
        let shape = Shape3::new(cases.map(|c| c.0)).halo_per_axis(cases.map(|c| c.1)).order(order);
        let range = Loop3D::from_parts(cases.map(|c| c.2 .0), cases.map(|c| c.2 .1), cases.map(|c| c.2 .2));
        for probe in &PROBES_3D {
            check_probe(probe, shape, range, seed)?;
        }
    }

    #[test]
    fn launch_2d_succeeds_iff_predicted_and_matches_reference(
        axes in [axis_draw(), axis_draw()],
        kij in any::<bool>(),
        tame in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let cases = axes.map(|d| axis_case(d, tame));
        let order = if kij { Order::Kij } else { Order::Ijk };
        let shape = Shape2::new(cases.map(|c| c.0)).halo_per_axis(cases.map(|c| c.1)).order(order);
        let range = Loop2D::from_parts(cases.map(|c| c.2 .0), cases.map(|c| c.2 .1), cases.map(|c| c.2 .2));
        check_probe(&PROBE_2D, shape, range, seed)?;
    }
}

/// The predicate itself, on hand-picked cases (so that a wrong predicate cannot make the property
/// vacuous).
/// Ranges built from bounds outside their extent are errors that say what fits, never clamped.
#[test]
fn ranges_beyond_the_extent_are_refused() {
    let s = Shape3::new([5, 5, 5]).halo(3);
    let e = Loop3D::interior(&s).grow([4, 0, 0]).unwrap_err();
    assert!(matches!(e, RangeError::Grow { axis: 0, below: 3, above: 3, extent: 11, .. }), "{e:?}");
    assert!(e.to_string().contains("along axis 0") && e.to_string().contains("grow by at most 3"), "{e}");
    let e = Loop3D::from_bounds([11; 3], [1, 1, 1], [3, 12, 3]).unwrap_err();
    assert_eq!(e, RangeError::Bounds { axis: 1, begin: 1, end: 12, extent: vec![11; 3] });
    assert!(e.to_string().contains("along axis 1 the bounds 1..12 do not lie in 0..11"), "{e}");
    let e = Loop3D::from_bounds([11; 3], [4, 1, 1], [3, 3, 3]).unwrap_err();
    assert!(e.to_string().contains("along axis 0"), "{e}");
    let lifted = LaunchError::from(e.clone());
    assert!(matches!(&lifted, LaunchError::Range(r) if r == &e), "{lifted:?}");
    assert_eq!(lifted.code(), "S0108");
    assert_eq!(Loop3D::from_bounds([11; 3], [3; 3], [8; 3]).unwrap(), Loop3D::interior(&s));
}

#[test]
fn predicate_on_known_cases() {
    let s = Shape3::new([5, 5, 5]).halo(3);
    let reach = PROBES_3D[1].reach; // x: -3 ..= 1
    assert_eq!(predict(&Loop3D::interior(&s), &s, reach), Expect::Run);
    assert_eq!(predict(&Loop3D::whole(&s), &s, reach), Expect::OutOfBounds(vec![("f", 0, -3), ("f", 0, 1)]));
    assert_eq!(predict(&Loop3D::interior(&s).grow([0, 3, 3]).unwrap(), &s, reach), Expect::Run);
    assert_eq!(
        predict(&Loop3D::interior(&s).grow([1, 0, 0]).unwrap(), &s, reach),
        Expect::OutOfBounds(vec![("f", 0, -3)])
    );
    assert_eq!(predict(&Loop3D::new(11, 3, 0, 11, 3, 3, 11, 3, 3), &s, reach), Expect::OutOfBounds(vec![("f", 0, 1)]));
    assert_eq!(predict(&Loop3D::new(11, 0, 11, 11, 0, 0, 11, 0, 0), &s, reach), Expect::Run);
    assert_eq!(predict(&Loop3D::new(11, 6, 6, 11, 0, 0, 11, 0, 0), &s, reach), Expect::Inverted { axis: 0 });
    assert_eq!(
        predict(&Loop3D::new(11, 3, 3, 12, 3, 3, 11, 3, 3), &s, reach),
        Expect::Extent { axis: 1, range_extent: 12, field_extent: 11 }
    );
}
