//! Stencils generic over their element type (`fn heat<T>`): one definition, compiled for `f32`
//! and `f64`, each instantiation the same bits as the stencil written out for that type, with
//! `T` in field types, scalars, typed locals, casts and `T::` paths; a generic column sweep too.

use stencil_runtime::codegen::ir::{ParamKind, ScalarType};
use stencil_runtime::prelude::*;
use stencil_tests::{assert_bits_eq, poisoned, random, Real, SplitMix64};

#[stencil]
fn heat<T>(idx: Idx3, c: T, f: &Field3<T>, out: &mut Field3<T>) {
    let centre: T = f[idx];
    let sum = f[idx.ix(1, 0, 0)]
        + f[idx.ix(-1, 0, 0)]
        + f[idx.ix(0, 1, 0)]
        + f[idx.ix(0, -1, 0)]
        + f[idx.ix(0, 0, 1)]
        + f[idx.ix(0, 0, -1)];
    let damp = T::sqrt(centre.abs()) / (2 as T);
    out[idx] = centre + c * (sum - 6.0 * centre) - 1.0e-3 * damp;
}

#[stencil]
fn heat_f32(idx: Idx3, c: f32, f: &Field3<f32>, out: &mut Field3<f32>) {
    let centre: f32 = f[idx];
    let sum = f[idx.ix(1, 0, 0)]
        + f[idx.ix(-1, 0, 0)]
        + f[idx.ix(0, 1, 0)]
        + f[idx.ix(0, -1, 0)]
        + f[idx.ix(0, 0, 1)]
        + f[idx.ix(0, 0, -1)];
    let damp = f32::sqrt(centre.abs()) / (2 as f32);
    out[idx] = centre + c * (sum - 6.0 * centre) - 1.0e-3 * damp;
}

#[stencil]
fn heat_f64(idx: Idx3, c: f64, f: &Field3<f64>, out: &mut Field3<f64>) {
    let centre: f64 = f[idx];
    let sum = f[idx.ix(1, 0, 0)]
        + f[idx.ix(-1, 0, 0)]
        + f[idx.ix(0, 1, 0)]
        + f[idx.ix(0, -1, 0)]
        + f[idx.ix(0, 0, 1)]
        + f[idx.ix(0, 0, -1)];
    let damp = f64::sqrt(centre.abs()) / (2 as f64);
    out[idx] = centre + c * (sum - 6.0 * centre) - 1.0e-3 * damp;
}

/// A generic column sweep with a carried local.
#[stencil(sweep = forward)]
fn running<T>(idx: Idx3, q: &Field3<T>, total: &mut Field3<T>) {
    #[carry]
    let mut acc: T = 0.0;
    acc += q[idx];
    total[idx] = acc;
}

fn check<T: Real, S: Stencil<3>, W: Stencil<3>>(
    generic: S,
    written: W,
    run: impl Fn(S, W, &Field3<T>, &mut Field3<T>, &mut Field3<T>),
) {
    let mut rng = SplitMix64::new(0x6e6e);
    let shape = Shape3::new([19, 11, 7]).halo(1);
    let f: Field3<T> = random(shape, &mut rng, 0.0, 2.0);
    let (mut a, mut b) = (poisoned(shape), poisoned(shape));
    run(generic, written, &f, &mut a, &mut b);
    assert_bits_eq(&a, &b, std::any::type_name::<S>());
}

#[test]
fn each_instantiation_is_the_stencil_written_for_its_type() {
    let range = |f: &Field3<f32>| Loop3D::interior(f.shape());
    check::<f32, _, _>(Heat::<f32>::new(), HeatF32, |g, w, f, a, b| {
        range(f).run(g, (0.1f32, f, a)).unwrap();
        range(f).run(w, (0.1f32, f, b)).unwrap();
    });
    check::<f64, _, _>(Heat::<f64>::new(), HeatF64, |g, w, f, a, b| {
        Loop3D::interior(f.shape()).run(g, (0.1f64, f, a)).unwrap();
        Loop3D::interior(f.shape()).run(w, (0.1f64, f, b)).unwrap();
    });
    // The IR of each instantiation names its type; the two differ only in it.
    let (ir32, ir64) = (<Heat<f32> as Stencil<3>>::ir(), <Heat<f64> as Stencil<3>>::ir());
    assert_eq!(ir32.params[0].kind, ParamKind::Scalar(ScalarType::F32));
    assert_eq!(ir64.params[0].kind, ParamKind::Scalar(ScalarType::F64));
    assert_eq!(<Heat<f64> as Stencil<3>>::IR, <HeatF64 as Stencil<3>>::IR.replace("heat_f64", "heat"));
}

#[test]
fn a_generic_sweep_runs_for_both_types() {
    fn sums<T: Real>(rng: &mut SplitMix64, run: impl Fn(&Field3<T>, &mut Field3<T>)) {
        let shape = Shape3::new([5, 4, 9]).halo(1);
        let q: Field3<T> = random(shape, rng, -1.0, 1.0);
        let mut total = poisoned(shape);
        run(&q, &mut total);
        for i in 0..5 {
            for j in 0..4 {
                let mut acc = T::lit(0.0);
                for k in 0..9 {
                    acc = acc + q.get([i, j, k]).unwrap();
                    assert_eq!(total.get([i, j, k]).unwrap().bits(), acc.bits(), "({i},{j},{k})");
                }
            }
        }
    }
    let mut rng = SplitMix64::new(3);
    sums::<f32>(&mut rng, |q, t| Loop3D::interior(q.shape()).run(Running::<f32>::new(), (q, t)).unwrap());
    sums::<f64>(&mut rng, |q, t| Loop3D::interior(q.shape()).run(Running::<f64>::new(), (q, t)).unwrap());
}

/// On a GPU an instantiation is the stencil written for its type: the same kernel source.
#[test]
fn an_instantiation_prints_the_cuda_of_the_stencil_written_for_its_type() {
    use stencil_runtime::{cuda_kernel, Strategy};
    let shape = Shape3::new([64, 16, 16]).halo(1);
    let range = Loop3D::interior(&shape);
    let strategy = Strategy::default_for(<HeatF64 as Stencil<3>>::ir());
    let generic = cuda_kernel::<Heat<f64>, 3>(strategy, &shape, &range).unwrap();
    let written = cuda_kernel::<HeatF64, 3>(strategy, &shape, &range).unwrap();
    assert_eq!(generic.source, written.source.replace("heat_f64", "heat"));
    let generic = cuda_kernel::<Heat<f32>, 3>(strategy, &shape, &range).unwrap();
    let written = cuda_kernel::<HeatF32, 3>(strategy, &shape, &range).unwrap();
    assert_eq!(generic.source, written.source.replace("heat_f32", "heat"));
}
