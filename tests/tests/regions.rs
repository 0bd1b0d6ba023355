//! Property test of `Loop::split_boundary`: for random ranges (any begin and end inside any
//! extent) and random per-axis widths (zero included), the split succeeds exactly when the slabs
//! of every axis fit; then the inner region and the `2·D` slabs tile the range (every point
//! covered once, nothing outside), each slab lies in its own band of its axis, and a stencil run
//! region by region writes the same field as one launch over the whole range.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use stencil_runtime::prelude::*;
use stencil_runtime::{Loop, RegionError};
use stencil_tests::{assert_bits_eq, poisoned, random, SplitMix64};

#[stencil]
fn star(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 0.5 * f[idx] + f[idx.ix::<-1, 0, 0>()] - f[idx.ix::<0, 1, 0>()] * f[idx.ix::<0, 0, -1>()];
}

fn config() -> Config {
    Config { cases: 256, rng_seed: RngSeed::Fixed(0x5eed_0002), failure_persistence: None, ..Config::default() }
}

/// One axis of a case: extent, range begin, range end (`begin <= end <= n`), low and high width.
fn axis() -> impl Strategy<Value = (usize, usize, usize, usize, usize)> {
    (1usize..14, 0usize..14, 0usize..14, 0usize..8, 0usize..8).prop_map(|(n, a, b, lo, hi)| {
        let (begin, end) = (a.min(b) % (n + 1), a.max(b).min(n));
        (n, begin.min(end), end, lo, hi)
    })
}

/// Checks a split of `range` (extent `n`, bounds `begin..end`) with `widths` in `D` dimensions.
fn check<const D: usize>(
    n: [usize; D],
    begin: [usize; D],
    end: [usize; D],
    widths: BoundaryWidths<D>,
) -> Result<(), TestCaseError> {
    let range = Loop::from_bounds(n, begin, end).expect("the strategy draws begin <= end <= n");
    let fits = (0..D).all(|a| widths.lo[a] + widths.hi[a] <= end[a] - begin[a]);
    let regions = match range.split_boundary(widths) {
        Ok(r) => r,
        Err(e) => {
            prop_assert!(!fits, "refused a split that fits: {e}");
            prop_assert!(matches!(e, RegionError::WidthsExceedRange { .. }), "{e}");
            return Ok(());
        }
    };
    prop_assert!(fits, "accepted slabs wider than the range: {range:?} {widths:?}");
    let total: usize = n.iter().product();
    let flat = |p: [usize; D]| (0..D).rev().fold(0, |acc, a| acc * n[a] + p[a]);
    let mut count = vec![0u8; total];
    let mut visit = |r: &Loop<D>, check_point: &mut dyn FnMut([usize; D]) -> Result<(), TestCaseError>| {
        prop_assert_eq!(r.extent(), n);
        let (b, len) = (r.begin(), r.len_per_axis());
        for linear in 0..r.points() {
            let mut rest = linear;
            let p: [usize; D] = std::array::from_fn(|a| {
                let c = b[a] + rest % len[a];
                rest /= len[a];
                c
            });
            count[flat(p)] += 1;
            check_point(p)?;
        }
        Ok(())
    };
    let inner_band = |a: usize, c: usize| c >= begin[a] + widths.lo[a] && c < end[a] - widths.hi[a];
    visit(&regions.inner, &mut |p| {
        prop_assert!((0..D).all(|a| inner_band(a, p[a])), "inner point {p:?} lies in a slab");
        Ok(())
    })?;
    for (side, slab) in regions.boundary() {
        let a = side.axis;
        visit(&slab, &mut |p| {
            let in_band = if side.high { p[a] >= end[a] - widths.hi[a] } else { p[a] < begin[a] + widths.lo[a] };
            prop_assert!(in_band, "{} slab point {p:?} outside its band", side.name::<D>());
            Ok(())
        })?;
        let width = if side.high { widths.hi[a] } else { widths.lo[a] };
        prop_assert!(width > 0 || slab.points() == 0, "zero-width {} slab is not empty", side.name::<D>());
    }
    let mut p = [0usize; D];
    for (i, &covered) in count.iter().enumerate() {
        let mut rest = i;
        for a in 0..D {
            p[a] = rest % n[a];
            rest /= n[a];
        }
        let inside = (0..D).all(|a| p[a] >= begin[a] && p[a] < end[a]);
        prop_assert_eq!(covered, inside as u8, "point {:?} covered {} times", p, covered);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn regions_tile_the_range_3d(axes in [axis(), axis(), axis()]) {
        check(axes.map(|a| a.0), axes.map(|a| a.1), axes.map(|a| a.2),
              BoundaryWidths { lo: axes.map(|a| a.3), hi: axes.map(|a| a.4) })?;
    }

    #[test]
    fn regions_tile_the_range_2d(axes in [axis(), axis()]) {
        check(axes.map(|a| a.0), axes.map(|a| a.1), axes.map(|a| a.2),
              BoundaryWidths { lo: axes.map(|a| a.3), hi: axes.map(|a| a.4) })?;
    }

    #[test]
    fn regions_tile_the_range_1d(a in axis()) {
        check([a.0], [a.1], [a.2], BoundaryWidths { lo: [a.3], hi: [a.4] })?;
    }

    #[test]
    fn launching_every_region_equals_one_launch(
        ext in [4usize..12, 4usize..12, 4usize..12],
        w in [0usize..4, 0usize..4, 0usize..4, 0usize..4, 0usize..4, 0usize..4],
        seed in any::<u64>(),
    ) {
        let shape = Shape3::new(ext).halo(1);
        let widths = BoundaryWidths { lo: [w[0], w[1], w[2]], hi: [w[3], w[4], w[5]] };
        let interior = Loop3D::interior(&shape);
        prop_assume!((0..3).all(|a| widths.lo[a] + widths.hi[a] <= ext[a]));
        let f = random::<f64, 3>(shape, &mut SplitMix64::new(seed), -1.0, 1.0);
        let mut whole = poisoned::<f64, 3>(shape);
        interior.run(Star, (&f, &mut whole)).unwrap();
        let mut pieces = poisoned::<f64, 3>(shape);
        for region in interior.split_boundary(widths).unwrap().all() {
            region.run(Star, (&f, &mut pieces)).unwrap();
        }
        assert_bits_eq(&pieces, &whole, &format!("{widths:?} on {ext:?}"));
    }
}
