//! The diffusion model on a GPU equals the host bit for bit: the same generic
//! [`run`](stencil_examples::diffusion::run) (plain steps first, then recorded pairs replayed as
//! a CUDA graph) on `Gpu` and on `Host`, in both precisions and element orders. Needs a GPU: `--features cuda`; without one it prints why and passes.
#![cfg(feature = "cuda")]

use stencil_examples::checkpoint::Plan;
use stencil_examples::diffusion::{run, Real, Setup};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Field3, Host, Order};

fn gpu() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            eprintln!("skipping: no GPU ({e})");
            None
        }
    }
}

fn bits<T: Real>(f: &Field3<T>) -> Vec<u64> {
    f.as_slice().iter().map(|&v| Into::<f64>::into(v).to_bits()).collect()
}

fn check<T: Real>(gpu: &Gpu, order: Order) {
    for steps in [1, 6, 33] {
        let setup = Setup { order, n: [37, 29, 23], ..Setup::cube(37, steps) };
        let (host, _) = run::<Host, T>(&Host, &setup, &Plan::none(), |_| {}).expect("host run");
        let (device, _) = run::<Gpu, T>(gpu, &setup, &Plan::none(), |_| {}).expect("GPU run");
        assert!(bits(&device) == bits(&host), "{} {order:?}, {steps} steps: the GPU differs from the host", T::NAME);
        eprintln!("{} {order:?}, {steps} steps: bit-equal to the host", T::NAME);
    }
}

#[test]
fn gpu_equals_host_f32() {
    let Some(gpu) = gpu() else { return };
    check::<f32>(&gpu, Order::Ijk);
    check::<f32>(&gpu, Order::Kij);
}

#[test]
fn gpu_equals_host_f64() {
    let Some(gpu) = gpu() else { return };
    check::<f64>(&gpu, Order::Ijk);
    check::<f64>(&gpu, Order::Kij);
}
