//! Reductions on a GPU against the host (run on the device machine; builds only with
//! `--features cuda`): the same stencils over random inputs, odd sizes, both element orders,
//! sub-ranges and 1D to 3D. Minima and maxima and every written field must be the host's bits
//! (kernels compile with `--fmad=false`); sums differ only by the order of the additions, within
//! the bound that order allows; every GPU run of a launch gives the same bits.
#![cfg(feature = "cuda")]

use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::Record;
use stencil_runtime::{Decomposition, Domains, Loop};
use stencil_tests::reducing::{ScaleAndNorm, Stats3dF32, Stats3dF64};
use stencil_tests::{poisoned, random, Real, SplitMix64};

fn gpu() -> Gpu {
    Gpu::new(0).expect("the GPU suite needs a CUDA device")
}

#[stencil]
fn total1d(idx: Idx1, u: &Field1<f32>, total: &mut Sum<f32>, peak: &mut Max<f32>) {
    total.fold(u[idx]);
    peak.fold(u[idx]);
}

/// Two sums of the same `n` values in different orders differ by at most `2 (n - 1) ε Σ|x|`.
fn sum_tolerance(n: usize, abs_sum: f64, eps: f64) -> f64 {
    2.0 * (n.max(2) - 1) as f64 * eps * abs_sum
}

fn abs_sum<T: Real + Into<f64>, const D: usize>(u: &Field<T, D>, range: &Loop<D>) -> f64 {
    u.read_range(range).unwrap().into_iter().map(|v| v.into().abs()).sum()
}

macro_rules! stats3d_case {
    ($test:ident, $stencil:ident, $t:ident) => {
        #[test]
        fn $test() {
            let g = gpu();
            let mut rng = SplitMix64::new(0x6e0_0016);
            let cases = [
                ([67, 19, 11], Order::Ijk, [0, 0, 0]),
                ([20, 33, 9], Order::Kij, [0, 0, 0]),
                ([301, 13, 17], Order::Ijk, [3, 1, 2]),
                ([1, 5, 300], Order::Ijk, [0, 0, 0]),
                ([1024, 64, 33], Order::Ijk, [0, 0, 0]),
            ];
            for (n, order, shrink) in cases {
                let shape = Shape3::new(n).halo(1).order(order);
                let u: Field3<$t> = random(shape, &mut rng, -3.0, 5.0);
                let range = Loop3D::interior(&shape).shrink(shrink);
                let (mut ct, mut cl, mut cj) = (Sum::new(), Min::new(), Max::new());
                range.run($stencil, (&u, &mut ct, &mut cl, &mut cj)).unwrap();
                let du = g.upload(&u).unwrap();
                let mut runs = Vec::new();
                for _ in 0..3 {
                    let (mut gt, mut gl, mut gj) = (Sum::new(), Min::new(), Max::new());
                    g.run(&range, $stencil, (&du, &mut gt, &mut gl, &mut gj)).unwrap();
                    runs.push([gt.get().to_bits(), gl.get().to_bits(), gj.get().to_bits()]);
                }
                let ctx = format!("{n:?} {order:?} shrink {shrink:?}");
                assert!(runs.iter().all(|r| *r == runs[0]), "{ctx}: GPU runs differ: {runs:?}");
                let [gt, gl, gj] = runs[0].map(|b| $t::from_bits(b as _));
                assert_eq!(gl.to_bits(), cl.get().to_bits(), "{ctx}: min");
                assert_eq!(gj.to_bits(), cj.get().to_bits(), "{ctx}: max");
                let tol = sum_tolerance(range.points(), abs_sum(&u, &range), $t::EPSILON as f64);
                let diff = (gt as f64 - ct.get() as f64).abs();
                assert!(diff <= tol, "{ctx}: GPU sum {gt} vs host {} (tolerance {tol:e})", ct.get());
                println!("{ctx}: sum host {} GPU {gt} (|diff| {diff:e}, bound {tol:e}); min, max equal", ct.get());
            }
        }
    };
}
stats3d_case!(stats3d_f32_gpu_equals_host, Stats3dF32, f32);
stats3d_case!(stats3d_f64_gpu_equals_host, Stats3dF64, f64);

/// Unaligned (lane by lane) and aligned ranges (16-byte vector loads; a row of one whole chunk
/// and a partial one).
#[test]
fn writes_and_reduces_like_the_host() {
    let g = gpu();
    let mut rng = SplitMix64::new(5);
    for (n, shrink) in [([1001, 77], [1, 2]), ([2053, 9], [0, 0])] {
        let shape = Shape2::new(n).halo(2);
        let u: Field2<f32> = random(shape, &mut rng, -1.0, 1.0);
        let range = Loop2D::interior(&shape).shrink(shrink);
        let mut out = poisoned::<f32, 2>(shape);
        let (mut sq, mut pos) = (Sum::new(), Max::new());
        range.run(ScaleAndNorm, (1.5, &u, &mut out, &mut sq, &mut pos)).unwrap();
        let (du, mut dout) = (g.upload(&u).unwrap(), g.upload(&poisoned::<f32, 2>(shape)).unwrap());
        let (mut gsq, mut gpos) = (Sum::new(), Max::new());
        g.run(&range, ScaleAndNorm, (1.5, &du, &mut dout, &mut gsq, &mut gpos)).unwrap();
        let got = dout.download().unwrap();
        let same = got.to_vec().iter().zip(out.to_vec()).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{n:?}: the written field");
        assert_eq!(gpos.get().to_bits(), pos.get().to_bits(), "{n:?}");
        let tol = sum_tolerance(range.points(), sq.get(), f64::EPSILON);
        assert!((gsq.get() - sq.get()).abs() <= tol, "{n:?}: {} vs {}", gsq.get(), sq.get());
    }
}

#[test]
fn one_dimensional_range_of_many_blocks() {
    let g = gpu();
    let mut rng = SplitMix64::new(17);
    let shape = Shape1::new([3_000_017]).halo(1);
    let u: Field1<f32> = random(shape, &mut rng, 0.0, 1.0);
    for shrink in [0, 7] {
        let range = Loop1D::interior(&shape).shrink([shrink]);
        let (mut t, mut p) = (Sum::new(), Max::new());
        range.run(Total1d, (&u, &mut t, &mut p)).unwrap();
        let du = g.upload(&u).unwrap();
        let (mut gt, mut gp) = (Sum::new(), Max::new());
        g.run(&range, Total1d, (&du, &mut gt, &mut gp)).unwrap();
        assert_eq!(gp.get(), p.get());
        let tol = sum_tolerance(range.points(), abs_sum(&u, &range), f32::EPSILON as f64);
        assert!(((gt.get() - t.get()) as f64).abs() <= tol, "shrink {shrink}: {} vs {}", gt.get(), t.get());
    }
}

#[test]
fn empty_range_folds_nothing_and_recording_is_refused() {
    let g = gpu();
    let shape = Shape3::new([16, 8, 8]).halo(1);
    let du = g.upload(&Field3::<f64>::filled(shape, 2.0)).unwrap();
    let empty = Loop3D::from_bounds(shape.extent(), [1, 1, 1], [17, 9, 1]).unwrap();
    let (mut t, mut l, mut j) = (Sum::new(), Min::new(), Max::new());
    g.run(&empty, Stats3dF64, (&du, &mut t, &mut l, &mut j)).unwrap();
    assert_eq!((t.get(), l.get(), j.get()), (0.0, f64::INFINITY, f64::NEG_INFINITY));
    let range = Loop3D::interior(&shape);
    let refused = g.record(&mut |g: &Gpu| g.run(&range, Stats3dF64, (&du, &mut t, &mut l, &mut j)));
    let e = refused.err().expect("a reducing launch cannot be recorded");
    assert!(e.to_string().contains("stats3d_f64"), "{e}");
    // The stream is usable afterwards: a constant field, so every backward difference is 0.
    g.run(&range, Stats3dF64, (&du, &mut t, &mut l, &mut j)).unwrap();
    assert_eq!((t.get(), l.get(), j.get()), (2.0 * 16.0 * 8.0 * 8.0, 2.0, 0.0));
}

/// GPU subdomains: a reduction per subdomain, then the global reduction over them.
#[test]
fn composes_with_gpu_subdomains() {
    let mut rng = SplitMix64::new(77);
    let global = [45, 30, 21];
    let whole = Shape3::new(global).halo(1);
    let u: Field3<f64> = random(whole, &mut rng, -2.0, 3.0);
    let (mut t, mut l, mut j) = (Sum::new(), Min::new(), Max::new());
    Loop3D::interior(&whole).run(Stats3dF64, (&u, &mut t, &mut l, &mut j)).unwrap();
    let d = Decomposition::auto(global, 3, [false; 3], [1; 3]).unwrap();
    let domains = Domains::new(d, vec![gpu(); d.len()]).unwrap();
    let (mut sums, mut maxs) = (Vec::new(), Vec::new());
    for i in domains.local_range() {
        let part = domains.exec(i).upload(&d.subdomain(i).part_of(&u)).unwrap();
        let (mut pt, mut pl, mut pj) = (Sum::new(), Min::new(), Max::new());
        domains.exec(i).run(&Loop3D::interior(part.shape()), Stats3dF64, (&part, &mut pt, &mut pl, &mut pj)).unwrap();
        sums.push(pt.get());
        maxs.push(pj.get());
    }
    assert_eq!(domains.max(maxs).to_bits(), j.get().to_bits());
    let tol = sum_tolerance(whole.points(), abs_sum(&u, &Loop3D::interior(&whole)), f64::EPSILON);
    assert!((domains.sum(sums) - t.get()).abs() <= tol);
}
