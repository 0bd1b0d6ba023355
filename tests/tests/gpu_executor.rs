//! The GPU executor against the host executor (run on the device machine: `scripts/gpu-check`;
//! builds only with `--features cuda`): halo fills of many fields and axes in one kernel, steps
//! recorded as CUDA graphs, the launch table, and fields of another executor refused. Inputs are
//! random, results are compared bit for bit, halos and outputs are poisoned before each run.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{Domains, Element, Field};

fn gpu() -> Gpu {
    Gpu::new(0).expect("the GPU suite needs a CUDA device")
}

/// Bit-exact comparison of every storage point (halo and padding included).
fn assert_bits<T: Element, const D: usize>(what: &str, a: &Field<T, D>, b: &Field<T, D>, bits: impl Fn(T) -> u64) {
    let (a, b) = (a.to_vec(), b.to_vec());
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| bits(*x) != bits(*y)) {
        let n = a.iter().zip(&b).filter(|(x, y)| bits(**x) != bits(**y)).count();
        panic!("{what}: {n} of {} values differ; first at {i}: host {:?} gpu {:?}", a.len(), a[i], b[i]);
    }
}

const FILLS: [Option<HaloFill>; 5] = [
    None,
    Some(HaloFill::Periodic),
    Some(HaloFill::ZeroGradient),
    Some(HaloFill::Mirror),
    Some(HaloFill::MirrorNegated),
];

/// Random fields with NaN-poisoned halos, random fills per axis, host vs GPU in one call each.
fn fill_halos_match<T: Element, const D: usize>(
    rng: &mut Rng,
    cast: impl Fn(f64) -> T + Copy,
    bits: impl Fn(T) -> u64 + Copy,
    count: usize,
) {
    let g = gpu();
    let mut host_fields = Vec::new();
    let mut fills = Vec::new();
    for f in 0..count {
        let interior: [usize; D] = std::array::from_fn(|_| 3 + (rng.next().abs() * 9.0) as usize);
        let halo: [usize; D] = std::array::from_fn(|a| (f + a + (rng.next().abs() * 3.0) as usize) % 4);
        let halo = std::array::from_fn(|a| halo[a].min(interior[a]));
        let order = if D == 3 && f % 2 == 1 { Order::Kij } else { Order::Ijk };
        let shape = Shape::new(interior).halo_per_axis(halo).order(order);
        let mut field = random(shape, rng, cast);
        for p in shape.storage_points() {
            let global = shape.to_global(p);
            if (0..D).any(|a| global[a] < 0 || global[a] >= interior[a] as isize) {
                field.set(global, cast(f64::NAN)).unwrap();
            }
        }
        host_fields.push(field);
        fills.push(std::array::from_fn::<_, D, _>(|_| [0, 1].map(|_| FILLS[(rng.next().abs() * 5.0) as usize % 5])));
    }
    let mut dev: Vec<_> = host_fields.iter().map(|f| g.upload(f).unwrap()).collect();
    let mut jobs: Vec<_> = host_fields.iter_mut().zip(&fills).map(|(f, fl)| (f, *fl)).collect();
    Host.fill_halo_sides(&mut jobs).unwrap();
    let mut djobs: Vec<_> = dev.iter_mut().zip(&fills).map(|(f, fl)| (f, *fl)).collect();
    g.fill_halo_sides(&mut djobs).unwrap();
    for (i, (h, d)) in host_fields.iter().zip(&dev).enumerate() {
        assert_bits(
            &format!("{D}D field {i} of {count}, fills {:?}, {}", fills[i], h.shape().describe()),
            h,
            &d.download().unwrap(),
            bits,
        );
    }
}

#[test]
fn halo_fills_of_many_fields_and_axes_in_one_kernel_match_the_host() {
    let mut rng = Rng(7);
    fill_halos_match::<f32, 3>(&mut rng, |v| v as f32, |v| v.to_bits() as u64, 5);
    fill_halos_match::<f64, 3>(&mut rng, |v| v, f64::to_bits, 3);
    fill_halos_match::<f64, 2>(&mut rng, |v| v, f64::to_bits, 4);
    fill_halos_match::<f32, 1>(&mut rng, |v| v as f32, |v| v.to_bits() as u64, 2);
    fill_halos_match::<i32, 3>(&mut rng, |v| (v * 1e6) as i32, |v| v as u32 as u64, 3);
    // More fields than one launch takes: filled in several launches.
    fill_halos_match::<f32, 3>(&mut rng, |v| v as f32, |v| v.to_bits() as u64, 37);
}

/// A diffusion step pair with periodic halos: the step that the recording replays.
fn step_pair<E: Executor>(
    exec: &E,
    range: &Loop3D,
    (f, g): &mut (E::Field<f32, 3>, E::Field<f32, 3>),
) -> Result<(), LaunchError> {
    let c = (0.11f32, 0.12, 0.13, 0.14, 0.15, 0.16, 0.19);
    let periodic = [Some(HaloFill::Periodic); 3];
    exec.fill_halos(&mut [(&mut *f, periodic)])?;
    exec.run(range, Diffusion, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &*f, &mut *g))?;
    exec.fill_halos(&mut [(&mut *g, periodic)])?;
    exec.run(range, Diffusion, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &*g, &mut *f))
}

/// Runs one checked step pair, records a second and replays it `replays` times.
fn recorded_run<E: Executor>(exec: &E, start: &Field3<f32>, replays: usize) -> (Field3<f32>, bool) {
    let range = Loop3D::interior(start.shape());
    let mut state = (exec.upload(start).unwrap(), exec.alloc(*start.shape()).unwrap());
    step_pair(exec, &range, &mut state).unwrap();
    let mut rec = Recorded::new(exec, &mut state, |e, s| step_pair(e, &range, s)).unwrap();
    for _ in 0..replays {
        rec.replay().unwrap();
    }
    let recorded = rec.is_recorded();
    (exec.download(&rec.state().0).unwrap(), recorded)
}

#[test]
fn a_recorded_step_replays_to_the_same_bits_as_the_host() {
    let g = gpu();
    let mut rng = Rng(11);
    let shape = Shape3::new([33, 17, 12]).halo(1).order(Order::Kij);
    let start = random(shape, &mut rng, |v| v as f32);
    let (host, host_recorded) = recorded_run(&Host, &start, 7);
    let (dev, dev_recorded) = recorded_run(&g, &start, 7);
    assert!(!host_recorded && dev_recorded, "host records nothing, the GPU records a graph");
    assert_bits("8 step pairs, recorded on the GPU vs run on the host", &host, &dev, |v| v.to_bits() as u64);
    assert_ne!(host.to_vec(), start.to_vec(), "the steps changed the field");
}

#[test]
fn a_recorded_step_that_reads_back_is_refused_with_the_reason() {
    let g = gpu();
    let shape = Shape3::new([8, 8, 8]).halo(1);
    let mut f = g.alloc::<f32, 3>(shape).unwrap();
    let e = Recorded::new(&g, &mut f, |e, f| e.download(f).map(|_| ())).err().expect("a download in a recording fails");
    assert!(e.to_string().contains("keep downloads"), "{e}");
    // The handle still works afterwards.
    let host = Field3::filled(shape, 2.5f32);
    f.copy_from_host(&host).unwrap();
    assert_eq!(g.download(&f).unwrap().to_vec(), host.to_vec());
}

#[test]
fn repeat_launches_reuse_the_prepared_kernel_and_foreign_fields_are_refused() {
    let g = gpu();
    let shape = Shape3::new([20, 9, 7]).halo(1);
    let range = Loop3D::interior(&shape);
    let f = g.upload(&random(shape, &mut Rng(3), |v| v as f32)).unwrap();
    let mut out = g.alloc::<f32, 3>(shape).unwrap();
    let before = g.prepared_kernels();
    g.run(&range, Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut out)).unwrap();
    let after_first = g.prepared_kernels();
    for _ in 0..50 {
        g.run(&range, Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut out)).unwrap();
    }
    assert_eq!((after_first, g.prepared_kernels()), (before + 1, before + 1));

    let other = Gpu::new(0).unwrap();
    let e = range.run_on(&other, Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut out)).unwrap_err();
    assert!(matches!(e, LaunchError::WrongDevice { field: "f", .. }), "{e}");
}

#[test]
fn halo_exchange_between_gpu_subdomains_fills_every_face_edge_and_corner() {
    let count = Gpu::count().unwrap();
    // Subdomain i on device i % count, each with a handle (stream) of its own: on one GPU the
    // copies still cross streams, on several they are peer copies.
    let gpus: Vec<Gpu> = (0..8).map(|i| Gpu::new(i % count).unwrap()).collect();
    let at = |i: usize| gpus[i % gpus.len()].clone();
    use stencil_tests::exchange_check::{check_domains, Case};
    let case = Case::walled;
    let cases = [
        case([20, 9, 7], [2, 1, 1], [false, false, false], [1, 1, 1], [1, 0, 1], Order::Ijk, 0),
        case([13, 11, 10], [2, 2, 2], [true, false, true], [2, 1, 3], [1, 1, 2], Order::Ijk, 1),
        case([9, 12, 17], [1, 2, 3], [true, true, true], [1, 2, 2], [1, 2, 2], Order::Kij, 2),
        case([40, 6, 5], [4, 1, 1], [true, false, false], [4, 1, 1], [3, 1, 1], Order::Kij, 3),
        // Rows of 512 bytes and more (cuts across the outer axes): field-to-field copies by the
        // copy engine, where the others take the kernel (seeds 4 and 5 copy field to field).
        case([150, 5, 12], [1, 1, 2], [false, false, true], [2, 1, 2], [1, 1, 2], Order::Ijk, 4),
        case([6, 8, 140], [2, 2, 1], [true, false, true], [1, 2, 3], [1, 1, 2], Order::Kij, 5),
    ];
    let mut checked = 0;
    for c in cases {
        let d = c.decomposition().unwrap();
        let domains = Domains::new(d, (0..d.len()).map(at).collect()).unwrap();
        checked += check_domains(&domains, &c).unwrap();
    }
    let c2 = Case {
        global: [30, 8],
        grid: [3, 2],
        periodic: [false, true],
        halo: [2, 3],
        depth: [2, 1],
        walls: [HaloFill::Mirror, HaloFill::ZeroGradient],
        order: Order::Ijk,
        seed: 9,
    };
    let c3 = Case { global: [200, 8], grid: [1, 2], seed: 8, ..c2 };
    for c in [c2, c3] {
        let d = c.decomposition().unwrap();
        checked += check_domains(&Domains::new(d, (0..d.len()).map(at).collect()).unwrap(), &c).unwrap();
    }
    println!("{checked} halo points checked on {count} GPU(s)");
}

/// A read issued without waiting copies into pinned memory on the stream: its values are those
/// before the later copy that overwrites the field, in whichever order reads are waited for.
#[test]
fn reads_issued_later_hold_the_values_of_their_time_on_the_gpu() {
    let gpu = gpu();
    for seed in 0..3 {
        check_reads_later(&gpu, seed);
    }
}

/// Values added at many points in one launch per 240 (the last chunk's points repeat earlier
/// ones) give the bits of a launch per point on the host, in f64 and f32.
#[test]
fn values_added_at_points_on_the_gpu_match_a_launch_per_point() {
    let gpu = gpu();
    for seed in 0..3 {
        check_add_at(&gpu, seed);
    }
}

/// A reduction issued without waiting copies its results into pinned memory on the stream:
/// folded later, they are what a launch folds, for the values before a later copy.
#[test]
fn reductions_issued_later_fold_what_a_launch_folds_on_the_gpu() {
    let gpu = gpu();
    for seed in 0..3 {
        check_reduce_later(&gpu, seed);
    }
}

/// A copy saved into again (`save_into`) is page-locked and queued without waiting: the values
/// it holds are those of its time, not those of the work queued after it (the field is
/// overwritten with NaN at once), whether a GPU restores it (queued too) or the host does (which
/// waits); dropping a copy with a save in flight waits for it.
#[test]
fn saves_into_page_locked_copies_hold_the_values_of_their_time() {
    // A small field, and one of more than 2 MiB (whose host copies start inside their page).
    for extent in [[37, 20, 11], [131, 64, 37]] {
        saves_into_page_locked_copies(extent);
    }
}

fn saves_into_page_locked_copies(extent: [usize; 3]) {
    use stencil_runtime::Executor;
    let gpu = gpu();
    let shape = Shape3::new(extent).halo(2);
    let mut rng = stencil_tests::SplitMix64::new(0x5a7e);
    let poison = gpu.upload(&Field3::filled(shape, f64::NAN)).expect("upload");
    let mut field = gpu.upload(&stencil_tests::random::<f64, _>(shape, &mut rng, -1.0, 1.0)).expect("upload");
    let mut saved = Executor::save(&gpu, &field).expect("first save");
    let bits = |f: &Field3<f64>| f.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for round in 0..4 {
        let values = stencil_tests::random::<f64, _>(shape, &mut rng, -1.0, 1.0);
        let staged = gpu.upload(&values).expect("upload");
        Executor::copy(&gpu, &mut field, &staged).expect("copy");
        gpu.save_into(&field, &mut saved).expect("save_into");
        Executor::copy(&gpu, &mut field, &poison).expect("poison");
        let mut back = gpu.upload(&Field3::filled(shape, -7.0)).expect("upload");
        gpu.restore(&mut back, &saved).expect("restore on the GPU");
        Executor::copy(&gpu, &mut field, &poison).expect("poison again");
        assert_eq!(bits(&back.download().expect("download")), bits(&values), "round {round}: the GPU's restore");
        let mut host = Field3::filled(shape, -7.0);
        Host.restore(&mut host, &saved).expect("restore on the host");
        assert_eq!(bits(&host), bits(&values), "round {round}: the host's restore");
    }
    // Another handle (its own stream) saves into the same copy: the first handle's lock is
    // released (after its copies) and the memory locked again for the second.
    let other = Gpu::new(0).expect("a second handle");
    let values = stencil_tests::random::<f64, _>(shape, &mut rng, -1.0, 1.0);
    let mut on_other = other.upload(&values).expect("upload");
    other.save_into(&on_other, &mut saved).expect("save_into from another handle");
    Executor::copy(&other, &mut on_other, &other.upload(&Field3::filled(shape, f64::NAN)).expect("upload"))
        .expect("poison");
    let mut host = Field3::filled(shape, -7.0);
    Host.restore(&mut host, &saved).expect("restore on the host");
    assert_eq!(bits(&host), bits(&values), "saved by another handle");
    // A save in flight when the copy is dropped: the drop waits for it before freeing.
    gpu.save_into(&field, &mut saved).expect("save_into");
    drop(saved);
    gpu.synchronize().expect("no fault");
}

/// Held scalars on a GPU and on GPU subdomains (`stencil_tests::held_check`): read by kernels as
/// their values after each `set_held`, written by reductions on the device (two at once), a
/// one-point clock reading and writing one of them, and a recorded step (a CUDA graph on one
/// GPU) replayed with the values held at each replay.
#[test]
fn held_scalars_on_the_gpu_give_the_bits_of_their_values() {
    use stencil_runtime::{Decomposition, Distributed};
    use stencil_tests::held_check::check_held;
    let g = gpu();
    for seed in 0..3 {
        check_held(&g, seed);
    }
    let count = Gpu::count().unwrap();
    for (seed, grid) in [[2, 1, 1], [1, 2, 2]].into_iter().enumerate() {
        let d = Decomposition::new([12, 10, 8], grid, [false; 3], [1; 3]).unwrap();
        let gpus = (0..d.len()).map(|i| Gpu::new(i % count).unwrap()).collect();
        check_held(&Distributed::new(Domains::new(d, gpus).unwrap()), 10 + seed as u64);
    }
}
