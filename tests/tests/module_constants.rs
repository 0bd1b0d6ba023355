//! Constants of the stencil's module (`RD`, `P0`) read in a stencil body: each is a scalar
//! parameter of the IR that the functor sets from the constant itself, so the caller passes only
//! the declared arguments. Checked against plain loops with the constants written out, for f64,
//! f32 (the constant's type taken from its use), an integer constant, a generic stencil
//! (`RD as T`) and a helper, on the host, and on a GPU with `--features cuda`.

use stencil_runtime::codegen::ir::{ParamKind, ScalarType};
use stencil_runtime::prelude::*;
use stencil_tests::{assert_bits_eq, poisoned, random, SplitMix64};

const RD: f64 = 287.04;
const KAPPA: f64 = 0.2857;
const HALF: f32 = 0.5;
const TWO: i32 = 2;

/// A helper that reads a module constant: it becomes a parameter of every stencil calling it.
#[stencil_fn]
fn ideal_gas(p: f64, t: f64) -> f64 {
    p / (RD * t)
}

#[stencil]
fn density(idx: Idx3, p: &Field3<f64>, t: &Field3<f64>, rho: &mut Field3<f64>) {
    let slope = KAPPA * (p[idx.ix::<1, 0, 0>()] - p[idx.ix::<-1, 0, 0>()]);
    rho[idx] = ideal_gas(p[idx], t[idx]) + slope * (RD / 1000.0);
}

/// A point function (the CPU nest computes it once per point, apart from the body) that reads
/// a constant.
#[stencil]
fn face_flux(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let fx = |p: Idx3| KAPPA * (u[p.ix::<1, 0, 0>()] - u[p]);
    out[idx] = u[idx] + RD * (fx(idx) - fx(idx.ix::<-1, 0, 0>()));
}

#[stencil]
fn halved(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = HALF * (u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()]) + ((TWO * 3) as f32);
}

#[stencil]
fn scaled<T>(idx: Idx3, u: &Field3<T>, out: &mut Field3<T>) {
    out[idx] = u[idx] * (RD as T) + (KAPPA as T);
}

/// The interior points of `shape` (global coordinates).
fn interior(shape: &Shape3) -> Vec<[isize; 3]> {
    let [nx, ny, nz] = shape.interior().map(|n| n as isize);
    (0..nz).flat_map(|k| (0..ny).flat_map(move |j| (0..nx).map(move |i| [i, j, k]))).collect()
}

fn reference_density(p: &Field3<f64>, t: &Field3<f64>, rho: &mut Field3<f64>) {
    for [i, j, k] in interior(p.shape()) {
        let at = |f: &Field3<f64>, di: isize| f.get([i + di, j, k]).unwrap();
        let slope = 0.2857 * (at(p, 1) - at(p, -1));
        rho.set([i, j, k], at(p, 0) / (287.04 * at(t, 0)) + slope * (287.04 / 1000.0)).unwrap();
    }
}

#[test]
fn module_constants_are_parameters_the_functor_sets() {
    let ir = <Density as Stencil<3>>::ir();
    let names: Vec<_> = ir.params.iter().map(|p| (p.name.as_str(), p.kind)).collect();
    assert!(names.contains(&("const_rd", ParamKind::Scalar(ScalarType::F64))), "{names:?}");
    assert!(names.contains(&("const_kappa", ParamKind::Scalar(ScalarType::F64))), "{names:?}");
    assert_eq!(ir.params.len(), 5, "three fields and two constants, each once: {names:?}");
    let ir = <Halved as Stencil<3>>::ir();
    let kinds: Vec<_> = ir.params[2..].iter().map(|p| (p.name.as_str(), p.kind)).collect();
    assert_eq!(
        kinds,
        [("const_half", ParamKind::Scalar(ScalarType::F32)), ("const_two", ParamKind::Scalar(ScalarType::I32))],
        "each constant takes the type its use gives it"
    );
}

#[test]
fn a_stencil_reading_module_constants_equals_the_constants_written_out() {
    let mut rng = SplitMix64::new(0xc0);
    let shape = Shape3::new([13, 7, 5]).halo(1);
    let p: Field3<f64> = random(shape, &mut rng, 5.0e4, 1.0e5);
    let t: Field3<f64> = random(shape, &mut rng, 200.0, 300.0);
    let (mut got, mut want) = (poisoned(shape), poisoned(shape));
    Loop3D::interior(&shape).run(Density, (&p, &t, &mut got)).unwrap();
    reference_density(&p, &t, &mut want);
    assert_bits_eq(&got, &want, "density");

    let u: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
    let (mut got, mut want) = (poisoned(shape), poisoned(shape));
    Loop3D::interior(&shape).run(Halved, (&u, &mut got)).unwrap();
    for [i, j, k] in interior(&shape) {
        let v = 0.5f32 * (u.get([i, j, k + 1]).unwrap() + u.get([i, j, k - 1]).unwrap()) + 6.0;
        want.set([i, j, k], v).unwrap();
    }
    assert_bits_eq(&got, &want, "halved");
}

#[test]
fn a_point_function_reads_a_constant() {
    let mut rng = SplitMix64::new(11);
    let shape = Shape3::new([9, 6, 5]).halo(1);
    let u: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
    let (mut got, mut want) = (poisoned(shape), poisoned(shape));
    Loop3D::interior(&shape).run(FaceFlux, (&u, &mut got)).unwrap();
    for [i, j, k] in interior(&shape) {
        let at = |di: isize| u.get([i + di, j, k]).unwrap();
        let fx = |di: isize| 0.2857 * (at(di + 1) - at(di));
        want.set([i, j, k], at(0) + 287.04 * (fx(0) - fx(-1))).unwrap();
    }
    assert_bits_eq(&got, &want, "face_flux");
}

#[test]
fn a_generic_stencil_reads_a_constant_through_a_cast() {
    let mut rng = SplitMix64::new(7);
    let shape = Shape3::new([6, 5, 4]).halo(1);
    let u: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
    let (mut got, mut want) = (poisoned(shape), poisoned(shape));
    Loop3D::interior(&shape).run(Scaled::<f32>::new(), (&u, &mut got)).unwrap();
    for g in interior(&shape) {
        want.set(g, u.get(g).unwrap() * (287.04f64 as f32) + (0.2857f64 as f32)).unwrap();
    }
    assert_bits_eq(&got, &want, "scaled f32");
    let ir = <Scaled<f32> as Stencil<3>>::ir();
    assert_eq!(ir.params[2].kind, ParamKind::Scalar(ScalarType::F64), "read as f64, then cast");
}

/// On host subdomains (each part's launch unpacks the arguments again) the constants give the
/// single domain's bits.
#[test]
fn on_subdomains_the_constants_give_the_single_domain_bits() {
    use stencil_runtime::{Decomposition, Distributed};
    let mut rng = SplitMix64::new(0x5d);
    let shape = Shape3::new([12, 10, 8]).halo(1);
    let p: Field3<f64> = random(shape, &mut rng, 5.0e4, 1.0e5);
    let t: Field3<f64> = random(shape, &mut rng, 200.0, 300.0);
    let mut single = poisoned(shape);
    Loop3D::interior(&shape).run(Density, (&p, &t, &mut single)).unwrap();
    let exec = Distributed::host(Decomposition::new([12, 10, 8], [2, 2, 1], [false; 3], [1; 3]).unwrap()).unwrap();
    let (dp, dt) = (exec.upload(&p).unwrap(), exec.upload(&t).unwrap());
    let mut rho = exec.upload(&poisoned::<f64, 3>(shape)).unwrap();
    exec.run(&Loop3D::interior(&shape), Density, (&dp, &dt, &mut rho)).unwrap();
    let parts = exec.download(&rho).unwrap();
    for [i, j, k] in interior(&shape) {
        let (a, b) = (parts.get([i, j, k]).unwrap(), single.get([i, j, k]).unwrap());
        assert_eq!(a.to_bits(), b.to_bits(), "({i}, {j}, {k})");
    }
}

#[cfg(feature = "cuda")]
#[test]
fn on_a_gpu_the_constants_give_the_host_bits() {
    use stencil_runtime::cuda::Gpu;
    let gpu = Gpu::new(0).expect("a CUDA device");
    let mut rng = SplitMix64::new(0x9e);
    let shape = Shape3::new([37, 11, 9]).halo(1);
    let range = Loop3D::interior(&shape);
    let p: Field3<f64> = random(shape, &mut rng, 5.0e4, 1.0e5);
    let t: Field3<f64> = random(shape, &mut rng, 200.0, 300.0);
    let mut host = poisoned(shape);
    range.run(Density, (&p, &t, &mut host)).unwrap();
    let (dp, dt) = (gpu.upload(&p).unwrap(), gpu.upload(&t).unwrap());
    let mut rho = gpu.upload(&poisoned::<f64, 3>(shape)).unwrap();
    gpu.run(&range, Density, (&dp, &dt, &mut rho)).unwrap();
    assert_bits_eq(&gpu.download(&rho).unwrap(), &host, "density on the GPU");

    let u: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
    let mut host = poisoned(shape);
    range.run(Halved, (&u, &mut host)).unwrap();
    let du = gpu.upload(&u).unwrap();
    let mut out = gpu.upload(&poisoned::<f32, 3>(shape)).unwrap();
    gpu.run(&range, Halved, (&du, &mut out)).unwrap();
    assert_bits_eq(&gpu.download(&out).unwrap(), &host, "halved on the GPU");

    let v: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
    let mut host = poisoned(shape);
    range.run(FaceFlux, (&v, &mut host)).unwrap();
    let dv = gpu.upload(&v).unwrap();
    let mut out = gpu.upload(&poisoned::<f64, 3>(shape)).unwrap();
    gpu.run(&range, FaceFlux, (&dv, &mut out)).unwrap();
    assert_bits_eq(&gpu.download(&out).unwrap(), &host, "face_flux on the GPU");
}
