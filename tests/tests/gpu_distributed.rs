//! The distributed executor on GPU subdomains (builds with `--features cuda`; run on a machine
//! with GPUs: `scripts/gpu-check`): the model of `stencil_tests::distributed_check`, written once,
//! gives the single-domain host bits with its subdomains on every GPU of the process (subdomain
//! `i` on GPU `i % count`: several per GPU when there are more subdomains than GPUs), in both
//! overlap modes, and one subdomain on one GPU gives the plain GPU executor's bits.
#![cfg(feature = "cuda")]

mod common;

use stencil_runtime::cuda::Gpu;
use stencil_runtime::{Decomposition, Distributed, Domains};
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

/// A boundary declared once: on one GPU (filled by the fill kernel after every launch that writes
/// the field) and on GPU subdomains, the host's bits at every probe (halos included) and in the
/// result; and the same as fills before each step.
#[test]
fn a_declared_boundary_on_the_gpus_gives_the_host_bits() {
    let mut rng = SplitMix64::new(11);
    let gpu = Gpu::new(0).unwrap();
    for seed in 0..4 {
        let mut case = Case::random(&mut rng, seed);
        case.global = case.global.map(|n| n + 20);
        case.declare = true;
        let host = model(&stencil_runtime::Host, &case, 3).unwrap();
        let one = model(&gpu, &case, 3).unwrap();
        assert!(one.probes == host.probes, "{case:?}: one GPU's probes differ from the host's");
        assert_eq!(interior_bits(&one.u), interior_bits(&host.u), "{case:?}");
        let d = case.decomposition();
        check(Domains::new(d, gpus(d.len())).unwrap(), &case, 3).unwrap();
        case.declare = false;
        let asked = model(&gpu, &case, 3).unwrap();
        assert!(asked.probes == one.probes, "{case:?}: declared and asked fills differ on a GPU");
    }
}

/// A 7-point smoothing step, the step the recordings below replay.
#[stencil_runtime::stencil]
fn smooth(idx: stencil_runtime::Idx3, c: f64, f: &stencil_runtime::Field3<f64>, g: &mut stencil_runtime::Field3<f64>) {
    g[idx] = f[idx]
        + c * (f[idx.ix::<1, 0, 0>()]
            + f[idx.ix::<-1, 0, 0>()]
            + f[idx.ix::<0, 1, 0>()]
            + f[idx.ix::<0, -1, 0>()]
            + f[idx.ix::<0, 0, 1>()]
            + f[idx.ix::<0, 0, -1>()]
            - 6.0 * f[idx]);
}

/// `steps` smoothing steps `f → g → f …` on `exec`: the first `warm` run directly, the rest as
/// replays of a recording of `per` steps (`per` = 2 swaps the buffers back; 1 does not). Returns
/// the last field written and whether the executor recorded the step.
fn smoothed<E: stencil_runtime::Executor>(
    exec: &E,
    f0: &stencil_runtime::Field3<f64>,
    warm: usize,
    per: usize,
    replays: usize,
) -> (stencil_runtime::Field3<f64>, bool) {
    use stencil_runtime::{Loop3D, Recorded};
    let range = Loop3D::interior(f0.shape()).shrink([1; 3]);
    let step = move |e: &E, a: &E::Field<f64, 3>, b: &mut E::Field<f64, 3>| e.run(&range, Smooth, (0.1, a, b));
    let mut fields = [exec.upload(f0).unwrap(), exec.upload(f0).unwrap()];
    for _ in 0..warm {
        let [a, b] = &mut fields;
        step(exec, a, b).unwrap();
        fields.swap(0, 1);
    }
    let recorded = {
        let mut r = Recorded::new(exec, &mut fields, move |e, [a, b]: &mut [E::Field<f64, 3>; 2]| {
            step(e, a, b)?;
            if per == 2 {
                step(e, b, a)?;
            }
            Ok(())
        })
        .unwrap();
        for _ in 0..replays {
            r.replay().unwrap();
        }
        r.is_recorded()
    };
    let last = if per == 2 { &fields[0] } else { &fields[1] };
    (exec.download(last).unwrap(), recorded)
}

#[test]
fn a_recorded_pair_of_steps_over_gpu_subdomains_replays_the_host_bits() {
    use stencil_runtime::{Decomposition, Field3, Host, Overlap, Shape3};
    let mut rng = SplitMix64::new(11);
    let shape = Shape3::new([48, 40, 36]).halo(1);
    let f0 = Field3::from_fn(shape, |_| rng.unit());
    let (warm, replays) = (2, 5);
    let (reference, _) = smoothed(&Host, &f0, warm + 2 * replays, 2, 0);
    let several = Gpu::count().unwrap() > 1;
    let reference_of = |steps| smoothed(&Host, &f0, steps, 2, 0).0;
    {
        // Recording over several GPUs is on only when asked for (STENCIL_RECORD=1); the
        // replays are right either way.
        std::env::remove_var("STENCIL_RECORD");
        let d = Decomposition::new(shape.interior(), [2, 2, 1], [false; 3], [1; 3]).unwrap();
        let exec = Distributed::new(Domains::new(d, gpus(d.len())).unwrap());
        let (out, recorded) = smoothed(&exec, &f0, 2, 2, 3);
        assert_eq!(recorded, !several, "recorded over several GPUs without being asked");
        assert_eq!(interior_bits(&out), interior_bits(&reference_of(8)));
        std::env::set_var("STENCIL_RECORD", "1");
    }
    for overlap in [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided, Overlap::Auto] {
        let d = Decomposition::new(shape.interior(), [2, 2, 1], [false; 3], [1; 3]).unwrap();
        let exec = Distributed::new(Domains::new(d, gpus(d.len())).unwrap()).with_overlap(overlap).unwrap();
        let (out, recorded) = smoothed(&exec, &f0, warm, 2, replays);
        assert!(recorded, "{overlap:?}: the pair of steps is one graph over the GPUs");
        assert_eq!(interior_bits(&out), interior_bits(&reference), "{overlap:?}: replays against the host");
        // One step (f → g) leaves f's and g's halo tracking changed (f exchanged, g written): not
        // recordable as a replayable step; it runs each time, with the same bits. Two-divided,
        // the writer exchanges g itself (the pairs taught it that g is read next), and f was so
        // exchanged by its writer: the tracking is unchanged, the step is recorded, and replays
        // are right.
        let (one, recorded) = smoothed(&exec, &f0, warm, 1, 3);
        let (reference, _) = smoothed(&Host, &f0, warm + 1, 2, 0);
        assert_eq!(recorded, overlap == Overlap::TwoDivided, "{overlap:?}: one unswapped step recorded");
        assert_eq!(interior_bits(&one), interior_bits(&reference), "{overlap:?}: unrecorded steps against the host");
    }
    eprintln!("recorded steps over {} GPU(s): the host bits", Gpu::count().unwrap());
}

/// Values added at points over GPU parts give the single host domain's bits.
#[test]
fn values_added_at_points_land_in_the_gpu_parts_that_own_them() {
    for (seed, grid) in [[2, 2, 2], [1, 1, 2], [4, 1, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [true, false, false], [2, 2, 2]).unwrap();
        common::check_add_at(&Distributed::new(Domains::new(d, gpus(d.len())).unwrap()), seed as u64);
    }
}

/// Reads issued without waiting over GPU parts (each part's copies on its own stream, placed
/// into the global ranges at `wait`) hold the values of their time.
#[test]
fn reads_issued_later_gather_the_values_of_their_time_from_gpu_parts() {
    for (seed, grid) in [[2, 2, 2], [1, 1, 2], [4, 1, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [false; 3], [2, 2, 2]).unwrap();
        common::check_reads_later(&Distributed::new(Domains::new(d, gpus(d.len())).unwrap()), seed as u64);
    }
}

/// Reductions issued without waiting over GPU parts (each part's results copied on its own
/// stream) fold, part by part, what a launch folds.
#[test]
fn reductions_issued_later_fold_what_a_launch_folds_over_gpu_parts() {
    for (seed, grid) in [[2, 2, 2], [1, 1, 2], [4, 1, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [false; 3], [2, 2, 2]).unwrap();
        common::check_reduce_later(&Distributed::new(Domains::new(d, gpus(d.len())).unwrap()), seed as u64);
    }
}

/// A fork of three handles on GPU subdomains: launches that need an exchange run on the parts'
/// own streams, the one whose halos another handle's exchange brought up to date runs on its
/// side streams after that exchange. The host's bits on one GPU and on GPU subdomains, in every
/// overlap mode, with and without a host thread per subdomain.
#[test]
fn a_fork_of_handles_on_the_gpus_gives_the_single_domain_bits() {
    use stencil_runtime::Overlap;
    use stencil_tests::distributed_check::forked;
    let global = [96, 80, 40];
    // The busy launches multiply by 1: the host's reference runs none.
    let one = forked(&stencil_runtime::Host, global, 0, 9, 4).unwrap();
    assert!(forked(&Gpu::new(0).unwrap(), global, 8, 9, 4).unwrap() == one, "one GPU differs from the host");
    for grid in [[1, 1, 1], [2, 1, 1], [2, 2, 1], [1, 2, 2]] {
        let d = Decomposition::new(global, grid, [true; 3], [2; 3]).unwrap();
        let domains = Domains::new(d, gpus(d.len())).unwrap();
        for domains in [domains.clone(), domains.with_host_threads().unwrap()] {
            for overlap in [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided] {
                let exec = Distributed::new(domains.clone()).with_overlap(overlap).unwrap();
                let many = forked(&exec, global, 8, 9, 4).unwrap();
                let threads = domains.host_threads();
                assert!(many == one, "grid {grid:?}, {overlap:?}, host threads {threads}: differs from the host");
            }
        }
    }
}

/// The wait of a handle for another handle's exchange, where skipping it shows: before its
/// exchange, handle 0 keeps the GPU busy (20 launches over 38 million points, about 3 ms, which
/// outlast the host's issue of the launches after them), so handle 2, reading the exchanged
/// halo, would read it first. One subdomain against the plain GPU executor (no busy launches).
/// With the wait skipped (a planted bug) it failed three runs of three on an H200.
#[test]
fn a_handle_waits_for_the_exchange_another_handle_issued() {
    use stencil_tests::distributed_check::forked;
    let global = [384, 384, 256];
    let gpu = Gpu::new(0).unwrap();
    let one = forked(&gpu, global, 0, 3, 2).unwrap();
    let d = Decomposition::new(global, [1, 1, 1], [true; 3], [2; 3]).unwrap();
    let exec = Distributed::new(Domains::new(d, vec![gpu]).unwrap());
    assert!(forked(&exec, global, 20, 3, 2).unwrap() == one, "the forked run differs from one GPU's");
}
