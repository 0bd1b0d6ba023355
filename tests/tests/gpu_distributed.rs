//! The distributed executor on GPU subdomains (builds with `--features cuda`; run on a machine
//! with GPUs: `scripts/gpu-check`): the model of `stencil_tests::distributed_check`, written once,
//! gives the single-domain host bits with its subdomains on every GPU of the process (subdomain
//! `i` on GPU `i % count`: several per GPU when there are more subdomains than GPUs), in both
//! overlap modes, and one subdomain on one GPU gives the plain GPU executor's bits.
#![cfg(feature = "cuda")]

use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Distributed, Domains};
use stencil_tests::distributed_check::{check, interior_bits, model, Case};
use stencil_tests::SplitMix64;

fn gpus(n: usize) -> Vec<Gpu> {
    let count = Gpu::count().expect("the GPU suite needs a CUDA device");
    assert!(count > 0, "the GPU suite needs a CUDA device");
    (0..n).map(|i| Gpu::new(i % count).unwrap()).collect()
}

#[test]
fn random_process_grids_on_the_gpus_give_the_single_domain_bits() {
    let mut rng = SplitMix64::new(2027);
    let mut compared = 0;
    for seed in 0..10 {
        let mut case = Case::random(&mut rng, seed);
        // Larger grids than the host test: several thread blocks per part.
        case.global = case.global.map(|n| n + 40);
        let d = case.decomposition();
        compared += check(Domains::new(d, gpus(d.len())).unwrap(), &case, 3).unwrap();
    }
    eprintln!("{} GPU(s): {compared} points bit-equal to one host domain", Gpu::count().unwrap());
}

#[test]
fn one_subdomain_on_one_gpu_gives_the_plain_gpu_bits() {
    let mut rng = SplitMix64::new(7);
    let mut case = Case::random(&mut rng, 3);
    case.global = [70, 50, 30];
    case.grid = [1, 1, 1];
    let d = case.decomposition();
    let gpu = Gpu::new(0).unwrap();
    let one = model(&gpu, &case, 4).unwrap();
    let many = model(&Distributed::new(Domains::new(d, vec![gpu.clone()]).unwrap()), &case, 4).unwrap();
    assert_eq!(interior_bits(&one.u), interior_bits(&many.u));
    assert_eq!(one.peaks, many.peaks);
}
