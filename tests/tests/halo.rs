//! `fill_halo` against an independent reference: for random fields (1D to 3D, both element
//! orders, random halo widths), every halo point of the axis holds the value the boundary
//! condition prescribes (periodic image by `rem_euclid`, nearest interior point by clamping,
//! reflection about the face), every other point is untouched.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use stencil_runtime::prelude::*;
use stencil_runtime::{Field, HaloError, HaloFill};
use stencil_tests::{random, SplitMix64};

const FILLS: [HaloFill; 4] = [HaloFill::Periodic, HaloFill::ZeroGradient, HaloFill::Mirror, HaloFill::MirrorNegated];

/// Where the value of global coordinate `g` (outside `0..n`) comes from, and its sign.
fn expected_source(fill: HaloFill, g: isize, n: isize) -> (isize, f64) {
    let reflect = if g < 0 { -g - 1 } else { 2 * n - 1 - g };
    match fill {
        HaloFill::Periodic => (g.rem_euclid(n), 1.0),
        HaloFill::ZeroGradient => (g.clamp(0, n - 1), 1.0),
        HaloFill::Mirror => (reflect, 1.0),
        HaloFill::MirrorNegated => (reflect, -1.0),
    }
}

fn check<const D: usize>(n: [usize; D], halo: [usize; D], kij: bool, axis: usize, fill: HaloFill, seed: u64) {
    let order = if kij { Order::Kij } else { Order::Ijk };
    let shape = Shape::new(n).halo_per_axis(halo).order(order);
    let before: Field<f64, D> = random(shape, &mut SplitMix64::new(seed), -1.0, 1.0);
    let mut after = before.clone();
    let result = after.fill_halo(axis, fill);
    if fill != HaloFill::ZeroGradient && n[axis] < halo[axis] {
        assert!(matches!(result, Err(HaloError::InteriorThinnerThanHalo { .. })), "{result:?}");
        return;
    }
    result.unwrap();
    let mut g = [0isize; D];
    let total: usize = shape.extent().iter().product();
    for linear in 0..total {
        let mut rest = linear;
        for a in 0..D {
            let e = shape.extent()[a];
            g[a] = (rest % e) as isize - halo[a] as isize;
            rest /= e;
        }
        let ga = g[axis];
        let want = if ga < 0 || ga >= n[axis] as isize {
            let (src, sign) = expected_source(fill, ga, n[axis] as isize);
            let mut s = g;
            s[axis] = src;
            sign * before.get(s).unwrap()
        } else {
            before.get(g).unwrap()
        };
        let got = after.get(g).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "{fill:?} axis {axis} at {g:?} of {n:?} halo {halo:?}");
    }
}

proptest! {
    #![proptest_config(Config { cases: 128, rng_seed: RngSeed::Fixed(0x4a10), failure_persistence: None, ..Config::default() })]

    #[test]
    fn halo_fill_3d(n in [1usize..7, 1usize..7, 1usize..7], h in [0usize..4, 0usize..4, 0usize..4],
                    kij in any::<bool>(), axis in 0usize..3, fill in 0usize..4, seed in any::<u64>()) {
        check(n, h, kij, axis, FILLS[fill], seed);
    }

    #[test]
    fn halo_fill_2d(n in [1usize..9, 1usize..9], h in [0usize..4, 0usize..4],
                    kij in any::<bool>(), axis in 0usize..2, fill in 0usize..4, seed in any::<u64>()) {
        check(n, h, kij, axis, FILLS[fill], seed);
    }

    #[test]
    fn halo_fill_1d(n in 1usize..9, h in 0usize..5, fill in 0usize..4, seed in any::<u64>()) {
        check([n], [h], false, 0, FILLS[fill], seed);
    }
}

#[test]
fn a_missing_axis_is_an_error() {
    let mut f = Field2::<f32>::zeros(Shape2::new([4, 4]).halo(1));
    let e = f.fill_halo(2, HaloFill::Periodic).unwrap_err();
    assert!(e.to_string().contains("axis 2 does not exist in a 2D field"), "{e}");
}
