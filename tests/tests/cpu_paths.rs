//! The CPU nest under every instruction set level this machine runs (baseline, AVX2, AVX-512),
//! with and without streaming stores, and with tiles the model would not pick (one point, odd
//! sizes, tiles that do not divide the range), against the plain references: odd grid sizes so
//! every vector loop has a remainder, tiny grids, ranges that start off the aligned row start,
//! rows longer than the streaming buffer, outputs poisoned with NaN so a skipped or stray write
//! shows. Every combination must give the same bits.
//!
//! The shapes of `Order::Ijk` (stride 1 along axis 0) run the stride-1 build of the block function
//! (reads of a field that differ only along axis 0 are one row pointer with constant
//! displacements); the `Order::Kij` shape and its strides run the general build. The baseline
//! level (`STENCIL_CPU_ISA=scalar`: SSE2 on x86-64) is among the levels walked.
//!
//! The level and the tuning are process-wide settings, so one test walks all of them in turn.

use stencil_runtime::cpu::{set_isa, set_tuning, Isa, Streaming, Tuning};
use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::canonical::*;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, Real, SplitMix64};

#[stencil]
fn lap2d(idx: Idx2, c: f64, u: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = u[idx]
        + c * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()] - 4.0 * u[idx]);
}

#[stencil]
fn smooth1d(idx: Idx1, w: f32, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = (1.0 - 2.0 * w) * u[idx] + w * (u[idx.ix::<-1>()] + u[idx.ix::<1>()]);
}

// Reads its output at offset 0 (never streamed), with a branch.
#[stencil]
fn accumulate(idx: Idx3, a: f32, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] += a * f[idx.ix::<0, 0, 1>()];
    if out[idx] < 0.0 {
        out[idx] = -out[idx];
    }
}

/// Every (level, streaming, tile) combination, set in turn; `check` runs under each.
fn for_each_setting(mut check: impl FnMut(&str)) {
    let blocks = [[0, 0, 0], [1, 1, 1], [5, 3, 2], [16, 7, 3], [3, 100, 1]];
    let mut levels: Vec<Isa> = Isa::ALL.into_iter().map(|l| set_isa(Some(l))).collect();
    levels.dedup();
    for isa in levels {
        set_isa(Some(isa));
        for streaming in [Streaming::On, Streaming::Off] {
            for block in blocks {
                set_tuning(Tuning { block, streaming, ..Tuning::default() });
                check(&format!("{isa:?}, {streaming:?}, block {block:?}"));
            }
        }
    }
    set_isa(None);
    set_tuning(Tuning::default());
}

fn check<T: Real, const D: usize>(
    shape: Shape<D>,
    range: Loop<D>,
    run: impl FnOnce(&Loop<D>, &mut Field<T, D>) -> Result<(), LaunchError>,
    reference: impl Fn([isize; D]) -> T,
    context: &str,
) {
    let mut out = poisoned::<T, D>(shape);
    let mut want = out.clone();
    run(&range, &mut out).unwrap_or_else(|e| panic!("{context}: launch refused: {e}"));
    for_each_in_range(&range, &shape, |g| want.set(g, reference(g)).expect("inside"));
    assert_bits_eq(&out, &want, &format!("{context}, range {range:?}"));
}

#[test]
fn every_level_streaming_mode_and_tile_gives_the_reference_bits() {
    let mut rng = SplitMix64::new(1414);
    // 3D, f32 and f64: odd sizes, a tiny grid, a range shifted off the aligned start.
    let shapes3 = [
        Shape3::new([37, 11, 9]).halo(4),
        Shape3::new([3, 2, 5]).halo(4).order(Order::Kij),
        Shape3::new([21, 6, 7]).halo_per_axis([4, 5, 6]).align(1),
    ];
    let fields: Vec<_> = shapes3
        .iter()
        .map(|&s| {
            let c7: [f32; 7] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f32);
            let f = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
            let u = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let p = random::<f64, 3>(s, &mut rng, -1.0, 1.0);
            let v = random::<f64, 3>(s, &mut rng, 0.5, 1.5);
            let old = random::<f32, 3>(s, &mut rng, -1.0, 1.0);
            (s, c7, f, u, p, v, old)
        })
        .collect();
    let s2 = Shape2::new([2101, 5]).halo(1);
    let u2 = random::<f64, 2>(s2, &mut rng, -1.0, 1.0);
    let s1 = Shape1::new([3000]).halo(1);
    let u1 = random::<f32, 1>(s1, &mut rng, -1.0, 1.0);

    for_each_setting(|setting| {
        for (s, c, f, u, p, v, old) in &fields {
            let (s, c) = (*s, *c);
            let shifted = Loop3D::interior(&s).shrink([1, 0, 1]);
            for range in [Loop3D::interior(&s), shifted] {
                let ctx = format!("diffusion f32 {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], f, out)),
                    |g| diffusion_ref(c, f, g),
                    &ctx,
                );
                let ctx = format!("star25 f64 {s:?}, {setting}");
                check(
                    s,
                    range,
                    |r, out| r.run(Star25F64, (0.05, u, p, v, out)),
                    |g| star25_ref(0.05, u, p, v, g),
                    &ctx,
                );
                let mut out = old.clone();
                range.run(Accumulate, (0.7, f, &mut out)).expect("launch");
                let mut want = old.clone();
                for_each_in_range(&range, &s, |g| {
                    let mut o = nb(old, g, [0, 0, 0]) + 0.7 * nb(f, g, [0, 0, 1]);
                    if o < 0.0 {
                        o = -o;
                    }
                    want.set(g, o).expect("inside");
                });
                assert_bits_eq(&out, &want, &format!("accumulate {s:?}, {setting}"));
            }
        }
        let ctx = format!("lap2d f64 (rows longer than the streaming buffer), {setting}");
        let lap = |g: [isize; 2]| {
            let at = |o| nb(&u2, g, o);
            at([0, 0]) + 0.1 * (at([1, 0]) + at([-1, 0]) + at([0, 1]) + at([0, -1]) - 4.0 * at([0, 0]))
        };
        check(s2, Loop2D::interior(&s2), |r, out| r.run(Lap2d, (0.1, &u2, out)), lap, &ctx);
        let ctx = format!("smooth1d f32, {setting}");
        let smooth =
            |g: [isize; 1]| (1.0 - 2.0 * 0.3f32) * nb(&u1, g, [0]) + 0.3 * (nb(&u1, g, [-1]) + nb(&u1, g, [1]));
        check(s1, Loop1D::interior(&s1).shrink([5]), |r, out| r.run(Smooth1d, (0.3, &u1, out)), smooth, &ctx);
    });
}
