//! Column sweeps on a GPU against the host (run on the device machine; builds only with
//! `--features cuda`): the shared sweeps over random inputs, both element orders, sub-ranges,
//! odd sizes, 2D and 3D, forward and backward, carried locals and reads of passed levels; every
//! point the host's bits (the kernels compile with `--fmad=false` and these sweeps call no
//! transcendental function), and nothing outside the range written.
#![cfg(feature = "cuda")]

use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::Strategy;
use stencil_tests::sweeping::{
    LevelsLeft, RunningDown, RunningUp, Substitute, ThomasBackward, ThomasForward, ThomasForwardCarried,
};
use stencil_tests::{assert_bits_eq, poisoned, random, SplitMix64};

fn gpu() -> Gpu {
    Gpu::new(0).expect("the GPU suite needs a CUDA device")
}

const CASES: [([usize; 3], Order, [usize; 3]); 5] = [
    ([13, 7, 24], Order::Ijk, [0, 0, 0]),
    ([9, 11, 17], Order::Kij, [0, 0, 0]),
    ([301, 6, 30], Order::Ijk, [2, 1, 3]),
    ([70, 65, 1], Order::Ijk, [0, 0, 0]),
    ([33, 40, 129], Order::Kij, [1, 0, 4]),
];

#[test]
fn thomas_sweeps_on_the_gpu_are_the_host_bits() {
    let g = gpu();
    let mut rng = SplitMix64::new(0x6e0_5eeb);
    for (n, order, shrink) in CASES {
        let shape = Shape3::new(n).halo(1).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let a: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let b: Field3<f64> = random(shape, &mut rng, 2.5, 4.0);
        let c: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let d: Field3<f64> = random(shape, &mut rng, -5.0, 5.0);
        let (mut cp, mut dp, mut x) = (poisoned(shape), poisoned(shape), poisoned(shape));
        range.run(ThomasForward, (&a, &b, &c, &d, &mut cp, &mut dp)).unwrap();
        range.run(ThomasBackward, (&cp, &dp, &mut x)).unwrap();
        let up = |f: &Field3<f64>| g.upload(f).unwrap();
        let (da, db, dc, dd) = (up(&a), up(&b), up(&c), up(&d));
        let p = poisoned::<f64, 3>(shape);
        for strategy in [None, Some(Strategy::PointPerThread { block: [32, 4, 2] })] {
            let (mut gcp, mut gdp, mut gx, mut gx2) = (up(&p), up(&p), up(&p), up(&p));
            g.run_with(&range, ThomasForward, strategy, (&da, &db, &dc, &dd, &mut gcp, &mut gdp)).unwrap();
            g.run_with(&range, ThomasBackward, strategy, (&gcp, &gdp, &mut gx)).unwrap();
            g.run_with(&range, Substitute, strategy, (&gcp, &gdp, &mut gx2)).unwrap();
            let ctx = format!("{n:?} {order:?} shrink {shrink:?} {strategy:?}");
            assert_bits_eq(&gcp.download().unwrap(), &cp, &format!("{ctx}: cp"));
            assert_bits_eq(&gdp.download().unwrap(), &dp, &format!("{ctx}: dp"));
            assert_bits_eq(&gx.download().unwrap(), &x, &format!("{ctx}: x"));
            let mut x2 = poisoned(shape);
            range.run(Substitute, (&cp, &dp, &mut x2)).unwrap();
            assert_bits_eq(&gx2.download().unwrap(), &x2, &format!("{ctx}: carried substitution"));
            let (mut ccp, mut cdp) = (up(&p), up(&p));
            g.run(&range, ThomasForwardCarried, (&da, &db, &dc, &dd, &mut ccp, &mut cdp)).unwrap();
            assert_bits_eq(&ccp.download().unwrap(), &cp, &format!("{ctx}: carried cp"));
        }
    }
}

#[test]
fn running_sums_and_a_2d_sweep_on_the_gpu_are_the_host_bits() {
    let g = gpu();
    let mut rng = SplitMix64::new(0x6e0_0217);
    for (n, order, shrink) in CASES {
        let shape = Shape3::new(n).halo(1).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let q: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
        let (mut up, mut down) = (poisoned(shape), poisoned(shape));
        range.run(RunningUp, (&q, &mut up)).unwrap();
        range.run(RunningDown, (&q, &mut down)).unwrap();
        let dq = g.upload(&q).unwrap();
        let (mut gup, mut gdown) = (g.upload(&poisoned(shape)).unwrap(), g.upload(&poisoned(shape)).unwrap());
        g.run(&range, RunningUp, (&dq, &mut gup)).unwrap();
        g.run(&range, RunningDown, (&dq, &mut gdown)).unwrap();
        let ctx = format!("{n:?} {order:?} shrink {shrink:?}");
        assert_bits_eq(&gup.download().unwrap(), &up, &format!("{ctx}: up"));
        assert_bits_eq(&gdown.download().unwrap(), &down, &format!("{ctx}: down"));
    }
    for (n, order) in [([11, 9], Order::Ijk), ([300, 17], Order::Kij), ([1, 50], Order::Ijk)] {
        let shape = Shape2::new(n).halo(1).order(order);
        let range = Loop2D::interior(&shape);
        let q: Field2<f64> = random(shape, &mut rng, 0.0, 0.5);
        let (mut out, mut seen) = (poisoned(shape), Field2::filled(shape, -7i32));
        range.run(LevelsLeft, (&q, &mut out, &mut seen)).unwrap();
        let dq = g.upload(&q).unwrap();
        let (mut gout, mut gseen) =
            (g.upload(&poisoned(shape)).unwrap(), g.upload(&Field2::filled(shape, -7i32)).unwrap());
        g.run(&range, LevelsLeft, (&dq, &mut gout, &mut gseen)).unwrap();
        assert_bits_eq(&gout.download().unwrap(), &out, &format!("2D {n:?} {order:?}"));
        assert_eq!(gseen.download().unwrap().to_vec(), seen.to_vec(), "2D {n:?} {order:?}: carried count");
    }
}
