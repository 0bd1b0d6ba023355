//! Small arrays and `#[stencil_fn]` helpers: a finite-volume Euler flux (MUSCL reconstruction
//! with minmod, Rusanov flux; 5 inputs, 5 outputs) against a plain loop that calls the same
//! helpers as ordinary Rust functions. Outputs are poisoned, the whole fields compared bit for
//! bit (the inlined helpers evaluate the same operations in the same order).

mod common;

use common::*;
use stencil_runtime::prelude::*;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, SplitMix64};

#[test]
fn euler_flux_matches_plain_rust() {
    let mut rng = SplitMix64::new(11);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([19, 6, 5]).halo_per_axis([2, 0, 0]).order(order);
        let [rho, mx, my, mz, e] = euler_state(shape, || rng.unit());
        let range = Loop3D::interior(&shape).shrink([1, 0, 0]).grow([0, 0, 0]).unwrap();
        let mut out: [Field3<f64>; 5] = std::array::from_fn(|_| poisoned(shape));
        let mut want = out.clone();
        let [f0, f1, f2, f3, f4] = &mut out;
        range.run(EulerFluxX, (1.4, &rho, &mx, &my, &mz, &e, f0, f1, f2, f3, f4)).unwrap();
        let fields = [&rho, &mx, &my, &mz, &e];
        for_each_in_range(&range, &shape, |g| {
            let q = |di: isize| fields.map(|f| nb(f, g, [di, 0, 0]));
            let (ql, qr) = muscl(q(-1), q(0), q(1), q(2));
            let f = rusanov(ql, qr, 1.4);
            for v in 0..5 {
                want[v].set(g, f[v]).unwrap();
            }
        });
        for v in 0..5 {
            assert_bits_eq(&out[v], &want[v], &format!("euler flux component {v}, {order:?}"));
        }
    }
}

#[test]
fn helpers_are_plain_functions() {
    assert_eq!(minmod(1.0, 2.0), 1.0);
    assert_eq!(minmod(-1.0, 2.0), 0.0);
    let q = [1.0, 0.0, 0.0, 0.0, 0.5];
    assert_eq!(pressure(q, 3.0), 1.0);
    let f = rusanov(q, q, 3.0);
    assert_eq!(f, [0.0, 1.0, 0.0, 0.0, 0.0]);
    // A generic helper is, as Rust, its f64 instantiation.
    let (a, b): (f64, f64) = (0.3, 0.1);
    assert_eq!(limited(a, b), b);
    assert_eq!(limited(-a, b), 0.0);
    assert_eq!(centred_limited(0.0, a, 1.0), a + 0.25 + a / 3.0);
}

/// A minmod-limited slope, generic over the element type: inlined as `f32` or `f64`, whichever
/// the calling stencil's fields are.
#[stencil_fn]
fn limited<T>(a: T, b: T) -> T {
    if a * b <= 0.0 {
        0.0
    } else if a.abs() < b.abs() {
        a
    } else {
        b
    }
}

/// A generic helper calling another, with a literal that takes the element type.
#[stencil_fn]
fn centred_limited<T>(l: T, c: T, r: T) -> T {
    c + 0.25 * (r - l) + limited(c - l, r - c) / 3.0
}

/// A helper written for f64 that calls a generic one: inside it, the generic helper is f64,
/// whatever the calling stencil's element type.
#[stencil_fn]
fn limited_f64(a: f64, b: f64) -> f64 {
    limited(a, b) * 2.0
}

#[stencil]
fn limit_through_f64(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = limited_f64((f[idx] - f[idx.ix::<-1, 0, 0>()]) as f64, (f[idx.ix::<1, 0, 0>()] - f[idx]) as f64) as f32;
}

#[stencil]
fn limit_generic<T>(idx: Idx3, f: &Field3<T>, out: &mut Field3<T>) {
    out[idx] = centred_limited(f[idx.ix::<-1, 0, 0>()], f[idx], f[idx.ix::<1, 0, 0>()]);
}

#[stencil]
fn limit_f32(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = centred_limited(f[idx.ix::<0, -1, 0>()], f[idx], f[idx.ix::<0, 1, 0>()]);
}

/// The helpers of [`limit_generic`] as plain Rust, per element type.
macro_rules! plain_limited {
    ($t:ty, $l:expr, $c:expr, $r:expr) => {{
        let (l, c, r): ($t, $t, $t) = ($l, $c, $r);
        let (a, b) = (c - l, r - c);
        let lim: $t = if a * b <= 0.0 {
            0.0
        } else if a.abs() < b.abs() {
            a
        } else {
            b
        };
        c + 0.25 * (r - l) + lim / 3.0
    }};
}

#[test]
fn generic_helpers_take_the_element_type_of_the_calling_stencil() {
    let mut rng = SplitMix64::new(29);
    let shape = Shape3::new([23, 7, 6]).halo(1);
    let range = Loop3D::interior(&shape);
    let f64s = Field3::<f64>::from_fn(shape, |_| rng.unit() - 0.5);
    let f32s = Field3::<f32>::from_fn(shape, |g| f64s.get(g).unwrap() as f32);

    let mut out: Field3<f64> = poisoned(shape);
    range.run(LimitGeneric::<f64>::new(), (&f64s, &mut out)).unwrap();
    let mut want = out.clone();
    for_each_in_range(&range, &shape, |g| {
        let v = plain_limited!(f64, nb(&f64s, g, [-1, 0, 0]), nb(&f64s, g, [0, 0, 0]), nb(&f64s, g, [1, 0, 0]));
        want.set(g, v).unwrap();
    });
    assert_bits_eq(&out, &want, "generic helper as f64");

    let mut out: Field3<f32> = poisoned(shape);
    range.run(LimitGeneric::<f32>::new(), (&f32s, &mut out)).unwrap();
    let mut want = out.clone();
    for_each_in_range(&range, &shape, |g| {
        let v = plain_limited!(f32, nb(&f32s, g, [-1, 0, 0]), nb(&f32s, g, [0, 0, 0]), nb(&f32s, g, [1, 0, 0]));
        want.set(g, v).unwrap();
    });
    assert_bits_eq(&out, &want, "generic helper as f32");

    // A plain stencil whose fields are all f32 instantiates the helpers as f32.
    let mut out: Field3<f32> = poisoned(shape);
    range.run(LimitF32, (&f32s, &mut out)).unwrap();
    let mut want = out.clone();
    for_each_in_range(&range, &shape, |g| {
        let v = plain_limited!(f32, nb(&f32s, g, [0, -1, 0]), nb(&f32s, g, [0, 0, 0]), nb(&f32s, g, [0, 1, 0]));
        want.set(g, v).unwrap();
    });
    assert_bits_eq(&out, &want, "generic helper in an f32 stencil");
    // An f32 stencil through an f64 helper: the generic helper inside runs in f64.
    let mut through: Field3<f32> = poisoned(shape);
    range.run(LimitThroughF64, (&f32s, &mut through)).unwrap();
    let mut want = through.clone();
    for_each_in_range(&range, &shape, |g| {
        let (l, c, r) = (nb(&f32s, g, [-1, 0, 0]), nb(&f32s, g, [0, 0, 0]), nb(&f32s, g, [1, 0, 0]));
        want.set(g, limited_f64((c - l) as f64, (r - c) as f64) as f32).unwrap();
    });
    assert_bits_eq(&through, &want, "a generic helper inside an f64 helper of an f32 stencil");
    // The f32 results are not the f64 ones rounded: the helper ran in f32.
    let mut differs = false;
    for_each_in_range(&range, &shape, |g| {
        let v64 = plain_limited!(f64, nb(&f64s, g, [0, -1, 0]), nb(&f64s, g, [0, 0, 0]), nb(&f64s, g, [0, 1, 0]));
        differs |= out.get(g).unwrap() != v64 as f32;
    });
    assert!(differs, "every f32 result equals the f64 one rounded: was the helper run in f64?");
}
