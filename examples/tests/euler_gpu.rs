//! The Euler model on a GPU equals the CPU: a blast-like state in a box with mixed boundaries
//! (periodic x, reflective y, outflow z; odd sizes) after some SSP-RK3 steps of a fixed time
//! step, for the fused and the split stages, both Riemann solvers and several strategies.
//! The GPU and the host run the same generic code. Relative L2 below 1e-10 is asserted; bit
//! equality is expected (kernels are built with --fmad=false) and printed. Needs `--features
//! cuda`; skipped with a message where there is no GPU.
#![cfg(feature = "cuda")]

use stencil_examples::euler::{Boundary, Conserved, Euler, Riemann, Scheme, State};
use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Executor, Field3, Host, Strategy};

const STEPS: usize = 12;

fn model() -> Euler {
    let mut e = Euler::cube(24, 1.0);
    e.n = [27, 22, 19];
    e.h = [1.0 / 27.0, 1.0 / 22.0, 1.0 / 19.0];
    e.boundaries = [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow];
    e
}

fn initial(e: &Euler) -> Conserved<Field3<f64>> {
    e.from_primitive(|[x, y, z]| {
        let r2 = (x - 0.4).powi(2) + (y - 0.55).powi(2) + (z - 0.5).powi(2);
        let p = if r2 < 0.04 { 5.0 } else { 0.5 };
        [1.0 + 0.2 * (6.0 * x).sin() * (5.0 * z).cos(), 0.3, -0.1 * y, 0.2 * z, p]
    })
}

/// `sqrt(Σ (a−b)²) / sqrt(Σ b²)` over all five fields (interior), and whether every bit agrees.
fn compare(e: &Euler, gpu: &Conserved<Field3<f64>>, cpu: &Conserved<Field3<f64>>) -> (f64, bool) {
    let (mut num, mut den, mut same) = (0.0, 0.0, true);
    let mut g = Vec::new();
    e.for_each_cell(gpu, |_, q| g.push(q));
    let mut i = 0;
    e.for_each_cell(cpu, |_, q| {
        for v in 0..5 {
            num += (g[i][v] - q[v]).powi(2);
            den += q[v] * q[v];
            same &= g[i][v].to_bits() == q[v].to_bits();
        }
        i += 1;
    });
    ((num / den).sqrt(), same)
}

/// The GPU, or `None` (and a message) where there is none: the comparison is then skipped.
fn gpu() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            eprintln!("skipped: no GPU ({e})");
            None
        }
    }
}

/// `STEPS` steps of `dt` from `q0` on `exec` with the same generic code; the final host state.
fn run<E: Executor>(exec: &E, e: &Euler, q0: &Conserved<Field3<f64>>, dt: f64) -> Conserved<Field3<f64>> {
    let mut s = State::new(exec, e, q0).unwrap();
    for _ in 0..STEPS {
        e.step(exec, &mut s, dt).unwrap();
    }
    s.download(exec).unwrap()
}

#[test]
fn gpu_equals_cpu_fused_and_split_under_strategies() {
    let Some(gpu) = gpu() else { return };
    let base = model();
    let q0 = initial(&base);
    let dt = base.dt(&Host, &State::new(&Host, &base, &q0).unwrap()).unwrap();
    let strategies = [
        None,
        Some(Strategy::PointPerThread { block: [32, 4, 2] }),
        Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 }),
        Some(Strategy::ZMarch { block_x: 16, block_y: 3, points_per_thread: 5 }),
    ];
    for riemann in [Riemann::Hllc, Riemann::Rusanov] {
        for scheme in [Scheme::Fused, Scheme::Split] {
            let cpu = run(&Host, &Euler { riemann, scheme, ..base }, &q0, dt);
            for strategy in strategies {
                let e = Euler { riemann, scheme, strategy, ..base };
                let (rel, same) = compare(&e, &run(&gpu, &e, &q0, dt), &cpu);
                eprintln!("{riemann:?} {scheme:?} {strategy:?}: {STEPS} steps, rel L2 GPU vs CPU {rel:.3e}, bitwise equal: {same}");
                assert!(rel < 1e-10, "{riemann:?} {scheme:?} {strategy:?}: rel L2 {rel}");
            }
        }
    }
}

#[test]
fn gpu_cfl_time_step_equals_the_host_one() {
    let Some(gpu) = gpu() else { return };
    let e = model();
    let q0 = initial(&e);
    let host = e.dt(&Host, &State::new(&Host, &e, &q0).unwrap()).unwrap();
    let dev = e.dt(&gpu, &State::new(&gpu, &e, &q0).unwrap()).unwrap();
    eprintln!("CFL time step: host {host:e}, GPU {dev:e}");
    assert_eq!(host.to_bits(), dev.to_bits());
}

/// A run whose CFL step is lagged by one step (its reduction collected while the step runs,
/// `Executor::reduce_later`) gives the host's bits, on one GPU and on GPU parts, and the
/// lagged step is the host's `dt` of the state before.
#[test]
fn lagged_cfl_steps_on_gpus_give_the_host_bits() {
    use stencil_examples::checkpoint::Plan;
    use stencil_runtime::Distributed;
    let Some(gpu) = gpu() else { return };
    let mut e = model();
    e.dt_lagged = true;
    let q0 = initial(&e);
    let s = State::new(&gpu, &e, &q0).unwrap();
    let mut rate = stencil_runtime::Max::<f64>::new();
    e.rate_later(&gpu, &s).unwrap().fold_into(&mut [&mut rate]).unwrap();
    assert_eq!((e.cfl / rate.get()).to_bits(), e.dt(&Host, &State::new(&Host, &e, &q0).unwrap()).unwrap().to_bits());
    let t_end = 0.02;
    let (cpu, steps, _) = e.run(&Host, &q0, t_end, 1, &Plan::none(), |_, _| {}).unwrap();
    assert!(steps > 5, "{steps} steps");
    let (on_gpu, gpu_steps, _) = e.run(&gpu, &q0, t_end, 1, &Plan::none(), |_, _| {}).unwrap();
    let d = e.decompose(4, Some([2, 2, 1])).unwrap();
    let parts = Distributed::new(stencil_runtime::Domains::new(d, vec![gpu.clone(); 4]).unwrap());
    let (on_parts, parts_steps, _) = e.run(&parts, &q0, t_end, 1, &Plan::none(), |_, _| {}).unwrap();
    assert_eq!((gpu_steps, parts_steps), (steps, steps));
    for (what, got) in [("one GPU", &on_gpu), ("four GPU parts", &on_parts)] {
        let (l2, same) = compare(&e, got, &cpu);
        eprintln!("lagged CFL steps, {what}: relative L2 {l2:e}, bit-equal: {same}");
        assert!(same, "{what}: relative L2 {l2:e}");
    }
}

/// Each step sized on the GPU (`dt_on_device`: the rate and the clock reduced into held scalars
/// on the device, every step after the second replayed from one of two recorded CUDA graphs)
/// gives the host's own-state bits (`dt_every` 1), on one GPU and on four GPU parts (which run
/// the steps as issued unless `STENCIL_RECORD=1`).
#[test]
fn step_sizes_on_the_gpu_give_the_host_bits_of_each_steps_own_state() {
    use stencil_examples::checkpoint::Plan;
    use stencil_runtime::Distributed;
    let Some(gpu) = gpu() else { return };
    let mut e = model();
    let q0 = initial(&e);
    let t_end = 0.02;
    let mut times = Vec::new();
    let (cpu, steps, _) = e.run(&Host, &q0, t_end, 1, &Plan::none(), |_, t| times.push(t.to_bits())).unwrap();
    assert!(steps > 5, "{steps} steps");
    e.dt_on_device = true;
    let mut gpu_times = Vec::new();
    let (on_gpu, gpu_steps, _) = e.run(&gpu, &q0, t_end, 1, &Plan::none(), |_, t| gpu_times.push(t.to_bits())).unwrap();
    let d = e.decompose(4, Some([2, 2, 1])).unwrap();
    let parts = Distributed::new(stencil_runtime::Domains::new(d, vec![gpu.clone(); 4]).unwrap());
    let (on_parts, parts_steps, _) = e.run(&parts, &q0, t_end, 1, &Plan::none(), |_, _| {}).unwrap();
    assert_eq!((gpu_steps, parts_steps), (steps, steps));
    assert_eq!(gpu_times, times, "the times after each step");
    for (what, got) in [("one GPU", &on_gpu), ("four GPU parts", &on_parts)] {
        let (l2, same) = compare(&e, got, &cpu);
        eprintln!("CFL steps sized on the GPU, {what}: relative L2 {l2:e}, bit-equal: {same}");
        assert!(same, "{what}: relative L2 {l2:e}");
    }
}
