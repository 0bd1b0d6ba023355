//! The column model on a GPU against the host (run on the device machine; builds only with
//! `--features cuda`): the diffusion sweeps give the host's bits (no transcendental function);
//! warm rain calls `exp`, `powf` and `sqrt`, whose CUDA and Rust versions may differ in the last
//! bit, so the state after the run agrees to 1e-12 relative and every column's water budget
//! closes on the GPU as on the host.
#![cfg(feature = "cuda")]

use stencil_examples::column::{column_water, moist_bubble, Column};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Executor, Host};

#[test]
fn the_column_model_on_the_gpu_matches_the_host() {
    let g = Gpu::new(0).expect("the GPU suite needs a CUDA device");
    let (n, dz, dt) = ([40, 33, 50], 100.0, 5.0);
    let initial = moist_bubble(n, dz);
    let (mut host, mut dev) =
        (Column::new(&Host, &initial, 20.0, dz).unwrap(), Column::new(&g, &initial, 20.0, dz).unwrap());
    host.diffuse(&Host, dt).unwrap();
    dev.diffuse(&g, dt).unwrap();
    for (name, a, b) in [("t", &host.state.t, &dev.state.t), ("qv", &host.state.qv, &dev.state.qv)] {
        let (a, b) = (a.to_vec(), g.download(b).unwrap().to_vec());
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "diffusion of {name}: not the host's bits");
    }
    for _ in 0..60 {
        host.step(&Host, dt).unwrap();
        dev.step(&g, dt).unwrap();
    }
    let down = dev.state.map(|f| g.download(f).unwrap());
    let mut worst = 0.0f64;
    for (a, b) in
        [(&host.state.t, &down.t), (&host.state.qv, &down.qv), (&host.state.qc, &down.qc), (&host.state.qr, &down.qr)]
    {
        let scale = a.to_vec().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (x, y) in a.to_vec().iter().zip(b.to_vec()) {
            worst = worst.max((x - y).abs() / scale);
        }
    }
    assert!(worst < 1e-12, "GPU and host states differ by {worst:e} of their scale");
    let total = |s| column_water(s, dz).into_iter().flatten().sum::<f64>();
    let (gpu_water, host_water) = (total(&down), total(&host.state));
    assert!((gpu_water - host_water).abs() <= 1e-12 * host_water, "water: GPU {gpu_water}, host {host_water}");
    assert!(down.qc.to_vec().iter().any(|v| *v > 0.0), "the bubble makes cloud on the GPU too");
}
