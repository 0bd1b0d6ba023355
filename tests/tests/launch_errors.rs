//! Every way a host launch is refused: the `LaunchError` variant and its fields, a message that
//! names the field (or axis) and says what to change, and an output left exactly as it was.

use stencil_runtime::prelude::*;
use stencil_runtime::Stencil;
use stencil_tests::{assert_bits_eq, poisoned, random, SplitMix64};

/// Reads `f` two points away along every axis, and `g` three points up along z.
#[stencil]
fn reach2(idx: Idx3, f: &Field3<f32>, g: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx.ix::<-2, 0, 0>()]
        + f[idx.ix::<2, 0, 0>()]
        + f[idx.ix::<0, -2, 0>()]
        + f[idx.ix::<0, 2, 0>()]
        + f[idx.ix::<0, 0, -2>()]
        + f[idx.ix::<0, 0, 2>()]
        + g[idx.ix::<0, 0, 3>()];
}

#[stencil]
fn blur2d(idx: Idx2, f: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = 0.25 * (f[idx.ix::<1, 0>()] + f[idx.ix::<-1, 0>()] + f[idx.ix::<0, 1>()] + f[idx.ix::<0, -1>()]);
}

/// Reads three points to the right.
#[stencil]
fn ahead3(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = f[idx.ix::<3>()] - f[idx];
}

const N: [usize; 3] = [13, 10, 7];

struct Fields {
    f: Field3<f32>,
    g: Field3<f32>,
    out: Field3<f32>,
}

fn fields(f: Shape3, g: Shape3, out: Shape3) -> Fields {
    let mut rng = SplitMix64::new(7);
    Fields { f: random(f, &mut rng, -1.0, 1.0), g: random(g, &mut rng, -1.0, 1.0), out: poisoned(out) }
}

/// Launches `reach2` over `range` and returns its error, after checking that the output was
/// left exactly as it was (all poison).
#[track_caller]
fn refused(range: Loop3D, mut fs: Fields) -> LaunchError {
    let before = fs.out.clone();
    let err = range.run(Reach2, (&fs.f, &fs.g, &mut fs.out)).expect_err("the launch should be refused");
    assert_bits_eq(&fs.out, &before, &format!("output after the refused launch ({err:?})"));
    err
}

#[track_caller]
fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "message lacks {part:?}:\n{message}");
    }
}

#[test]
fn metadata_records_the_reach_of_each_field() {
    let info = <Reach2 as Stencil<3>>::INFO;
    assert_eq!(info.name, "reach2");
    let summary: Vec<_> = info.fields.iter().map(|f| (f.name, f.lo, f.hi, f.writable)).collect();
    assert_eq!(
        summary,
        [("f", [-2, -2, -2], [2, 2, 2], false), ("g", [0, 0, 0], [0, 0, 3], false), ("out", [0; 3], [0; 3], true)]
    );
}

#[test]
fn inverted_range() {
    let s = Shape3::new(N).halo(2);
    // Along y: i0 + i1 = 8 + 7 > 14.
    let range = Loop3D::new(17, 2, 2, 14, 8, 7, 11, 2, 2);
    let err = refused(range, fields(s, s, s));
    assert_eq!(err, LaunchError::InvertedRange { stencil: "reach2", range: format!("{range:?}"), axis: 1 });
    let msg = err.to_string();
    assert_mentions(&msg, &["`reach2`", "8..7 of 14", "inverted along y (j)", "use i0 + i1 <= n"]);
}

#[test]
fn inverted_range_is_reported_before_anything_else() {
    // Wrong extent and an inverted x: the inversion is what the user must fix first.
    let s = Shape3::new(N).halo(2);
    let range = Loop3D::new(5, 4, 4, 14, 2, 2, 11, 2, 2);
    assert!(matches!(refused(range, fields(s, s, s)), LaunchError::InvertedRange { axis: 0, .. }));
}

#[test]
fn range_built_for_another_extent() {
    let s = Shape3::new(N).halo(2);
    let range = Loop3D::interior(&Shape3::new(N).halo(3)); // n = 19 along x, the fields have 17
    let err = refused(range, fields(s, s, s));
    assert_eq!(
        err,
        LaunchError::RangeExtent {
            stencil: "reach2",
            range: format!("{range:?}"),
            axis: 0,
            range_extent: 19,
            field: "f",
            field_extent: 17,
        }
    );
    let msg = err.to_string();
    assert_mentions(&msg, &["`reach2`", "n = 19 along x (i)", "field `f` has extent 17", "Loop3D::interior("]);
}

#[test]
fn range_built_for_another_extent_on_a_later_axis() {
    let s = Shape3::new(N).halo(2);
    let range = Loop3D::new(17, 2, 2, 14, 2, 2, 12, 2, 2); // z: 12 instead of 11
    let err = refused(range, fields(s, s, s));
    assert!(
        matches!(err, LaunchError::RangeExtent { axis: 2, range_extent: 12, field_extent: 11, field: "f", .. }),
        "{err:?}"
    );
    assert_mentions(&err.to_string(), &["along z (k)"]);
}

#[test]
fn range_extent_message_suggests_the_range_type_of_the_stencil() {
    // A 2D launch should be told to build a `Loop2D`, not a `Loop3D`.
    let s = Shape2::new([8, 6]).halo(1);
    let f = Field2::zeros(s);
    let mut out = poisoned::<f64, 2>(s);
    let before = out.clone();
    let range = Loop2D::interior(&Shape2::new([9, 6]).halo(1));
    let err = range.run(Blur2d, (&f, &mut out)).expect_err("wrong extent");
    assert_bits_eq(&out, &before, "output after the refused launch");
    assert!(matches!(err, LaunchError::RangeExtent { axis: 0, range_extent: 11, field_extent: 10, .. }), "{err:?}");
    let msg = err.to_string();
    assert_mentions(&msg, &["field `f`", "Loop2D::interior("]);
}

fn shape_mismatch(f: Shape3, g: Shape3, out: Shape3, expect_field: &'static str, differing: Shape3) {
    let range = Loop3D::interior(&f).shrink([1, 1, 1]);
    let err = refused(range, fields(f, g, out));
    assert_eq!(
        err,
        LaunchError::ShapeMismatch {
            stencil: "reach2",
            first: "f",
            first_shape: f.describe(),
            field: expect_field,
            shape: differing.describe(),
        }
    );
    let msg = err.to_string();
    let (first, other) = (format!("`f` is {}", f.describe()), format!("`{expect_field}` is {}", differing.describe()));
    assert_mentions(&msg, &["`reach2`", &first, &other, "allocate them from the same `Shape`"]);
}

#[test]
fn shape_mismatch_in_halo() {
    let s = Shape3::new(N).halo(2);
    let wider = Shape3::new(N).halo(3);
    shape_mismatch(s, wider, s, "g", wider);
}

#[test]
fn shape_mismatch_in_order() {
    let s = Shape3::new(N).halo(2);
    let kij = s.order(Order::Kij);
    shape_mismatch(s, s, kij, "out", kij);
}

#[test]
fn shape_mismatch_in_size() {
    let s = Shape3::new(N).halo(2);
    let taller = Shape3::new([13, 10, 8]).halo(2);
    shape_mismatch(s, s, taller, "out", taller);
}

#[test]
fn shape_mismatch_in_alignment() {
    let s = Shape3::new(N).halo(2);
    let packed = s.align(1);
    shape_mismatch(s, packed, s, "g", packed);
}

/// `(i0, i1)` per axis for fields of halo 1 (extent 15 x 12 x 9): 2 points in from each side fit
/// a reach of 2, one point in (the interior) does not.
fn range_halo1(margins: [(usize, usize); 3]) -> Loop3D {
    let [(a0, a1), (b0, b1), (c0, c1)] = margins;
    Loop3D::new(15, a0, a1, 12, b0, b1, 9, c0, c1)
}

struct Oob {
    margins: [(usize, usize); 3],
    axis: usize,
    offset: i32,
    range: (usize, usize),
    fix: &'static str,
    /// The halo the help asks for: the reach, plus the points of the range inside the halo.
    halo_needed: usize,
}

#[test]
fn out_of_bounds_on_each_side_of_each_axis() {
    let s = Shape3::new(N).halo(1);
    let ext = s.extent();
    assert_eq!(ext, [15, 12, 9]);
    let fit = (2, 2);
    let cases = [
        Oob {
            margins: [(1, 1), fit, fit],
            axis: 0,
            offset: -2,
            range: (1, 14),
            fix: "start the range at 2 or later",
            halo_needed: 2,
        },
        Oob {
            margins: [(2, 1), fit, fit],
            axis: 0,
            offset: 2,
            range: (2, 14),
            fix: "end it at 13 or earlier",
            halo_needed: 2,
        },
        Oob {
            margins: [fit, (1, 2), fit],
            axis: 1,
            offset: -2,
            range: (1, 10),
            fix: "start the range at 2 or later",
            halo_needed: 2,
        },
        Oob {
            margins: [fit, (2, 1), fit],
            axis: 1,
            offset: 2,
            range: (2, 11),
            fix: "end it at 10 or earlier",
            halo_needed: 2,
        },
        Oob {
            margins: [fit, fit, (0, 3)],
            axis: 2,
            offset: -2,
            range: (0, 6),
            fix: "start the range at 2 or later",
            halo_needed: 3,
        },
        Oob {
            margins: [fit, fit, (3, 1)],
            axis: 2,
            offset: 2,
            range: (3, 8),
            fix: "end it at 7 or earlier",
            halo_needed: 2,
        },
    ];
    let axes = ["x (i)", "y (j)", "z (k)"];
    for c in cases {
        let err = refused(range_halo1(c.margins), fields(s, s, s));
        let expected = LaunchError::OutOfBounds {
            stencil: "reach2",
            field: "f",
            axis: c.axis,
            offset: c.offset,
            range: c.range,
            halo: 1,
            extent: ext[c.axis],
        };
        assert_eq!(err, expected);
        let msg = err.to_string();
        let along = format!("along {}", axes[c.axis]);
        assert_mentions(
            &msg,
            &[
                "`reach2`",
                "field `f`",
                &format!("offset {}", c.offset),
                &along,
                &format!("over the range {}..{}", c.range.0, c.range.1),
                "has halo 1",
                &format!("give `f` a halo of at least {}", c.halo_needed),
                "`Shape::halo`",
                c.fix,
            ],
        );
    }
}

#[test]
fn out_of_bounds_names_the_field_that_leaves() {
    // Halo 2: `f` (reach 2) fits the interior, `g` (z + 3) does not.
    let s = Shape3::new(N).halo(2);
    let err = refused(Loop3D::interior(&s), fields(s, s, s));
    assert_eq!(
        err,
        LaunchError::OutOfBounds {
            stencil: "reach2",
            field: "g",
            axis: 2,
            offset: 3,
            range: (2, 9),
            halo: 2,
            extent: 11
        }
    );
    assert_mentions(
        &err.to_string(),
        &["field `g`", "give `g` a halo of at least 3 along z (k)", "end it at 8 or earlier"],
    );
    // With halo 3 everything fits.
    let s = Shape3::new(N).halo(3);
    let mut fs = fields(s, s, s);
    Loop3D::interior(&s).run(Reach2, (&fs.f, &fs.g, &mut fs.out)).expect("halo 3 fits");
}

#[test]
fn out_of_bounds_in_2d() {
    let s = Shape2::new([8, 6]).halo(1).order(Order::Kij);
    let f = Field2::zeros(s);
    let mut out = poisoned::<f64, 2>(s);
    let before = out.clone();
    let err = Loop2D::whole(&s).run(Blur2d, (&f, &mut out)).expect_err("whole range, reach 1");
    assert_bits_eq(&out, &before, "output after the refused launch");
    assert_eq!(
        err,
        LaunchError::OutOfBounds {
            stencil: "blur2d",
            field: "f",
            axis: 0,
            offset: -1,
            range: (0, 10),
            halo: 1,
            extent: 10
        }
    );
    assert_mentions(
        &err.to_string(),
        &[
            "give `f` a halo of at least 2 along x (i) (the range runs 1 point into the halo)",
            "start the range at 1 or later",
        ],
    );
}

#[test]
fn out_of_bounds_message_when_the_reach_exceeds_the_extent() {
    // A 2-point field without halo read 3 points ahead: no range end can fit, and formatting the
    // error must not underflow `extent - offset`.
    let s = Shape1::new([2]);
    let f = Field1::zeros(s);
    let mut out = poisoned::<f32, 1>(s);
    let before = out.clone();
    let err = Loop1D::whole(&s).run(Ahead3, (&f, &mut out)).expect_err("reach 3 in a 2-point field");
    assert_bits_eq(&out, &before, "output after the refused launch");
    assert_eq!(
        err,
        LaunchError::OutOfBounds {
            stencil: "ahead3",
            field: "f",
            axis: 0,
            offset: 3,
            range: (0, 2),
            halo: 0,
            extent: 2
        }
    );
    let msg = std::panic::catch_unwind(|| err.to_string())
        .unwrap_or_else(|_| panic!("formatting {err:?} panicked (extent - offset underflows in launch.rs)"));
    assert_mentions(&msg, &["field `f`", "give `f` a halo of at least 3"]);
}

#[test]
fn errors_are_std_errors() {
    let s = Shape3::new(N).halo(1);
    let err: Box<dyn std::error::Error> = Box::new(refused(Loop3D::interior(&s), fields(s, s, s)));
    assert!(err.to_string().starts_with("stencil `reach2`: "), "{err}");
}
