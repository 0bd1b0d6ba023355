//! Autotuning on the GPU (needs a GPU; `scripts/gpu-check run` runs it): a launch without a
//! strategy times the candidates and keeps the fastest, on the launch's own arguments without
//! changing any value (a field read and written in place is updated exactly once), stores the
//! choice on disk, reads it back in a new process-like context, redoes a damaged record, and
//! respects the settings.

#![cfg(feature = "cuda")]

mod common;

use common::*;
use stencil_runtime::cuda::{DiskCache, Gpu};
use stencil_runtime::prelude::*;
use stencil_runtime::stencil;
use stencil_runtime::tuning::{Timing, TuneSettings};
use stencil_runtime::Strategy;

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-gpu-tuning-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn gpu_with(dir: &std::path::Path, settings: TuneSettings) -> Gpu {
    let g = Gpu::with_disk_cache(0, Some(DiskCache::new(dir))).expect("a GPU");
    g.set_tune_settings(settings);
    g
}

/// One in-place leapfrog step and one diffusion step on `g` (both tuned on first use); the
/// results must equal the host's bit for bit.
fn run_and_check(g: &Gpu, shape: Shape3, seed: u64) {
    let mut rng = Rng(seed);
    let u = random(shape, &mut rng, |v| v as f32);
    let prev = random(shape, &mut rng, |v| v as f32);
    let range = Loop3D::interior(&shape);

    let mut host_prev = prev.clone();
    range.run(Leapfrog7, (0.1, &u, &mut host_prev)).unwrap();
    let du = g.upload(&u).unwrap();
    let mut dprev = g.upload(&prev).unwrap();
    range.run_on(g, Leapfrog7, (0.1, &du, &mut dprev)).unwrap();
    assert_bits(&host_prev, &dprev.download().unwrap(), "in-place leapfrog, tuned");

    let mut host_out = Field3::filled(shape, f32::NAN);
    let c = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4);
    range.run(Diffusion, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &u, &mut host_out)).unwrap();
    let mut dout = g.upload(&Field3::filled(shape, f32::NAN)).unwrap();
    range.run_on(g, Diffusion, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &du, &mut dout)).unwrap();
    assert_bits(&host_out, &dout.download().unwrap(), "diffusion, tuned");
}

fn assert_bits(want: &Field3<f32>, got: &Field3<f32>, what: &str) {
    let differ = want.as_slice().iter().zip(got.as_slice()).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    assert_eq!(differ, 0, "{what}: {differ} values differ from the host's");
}

#[test]
fn tuning_picks_a_timed_candidate_stores_it_and_changes_no_value() {
    let dir = scratch_dir("store");
    let shape = Shape3::new([72, 40, 36]).halo(1);
    let g = gpu_with(&dir, TuneSettings::default());
    run_and_check(&g, shape, 1);
    let reports = g.tune_reports();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    for r in &reports {
        assert!(!r.from_disk, "{r:#?}");
        let timed: Vec<_> = r.record.times.iter().filter_map(|(s, t)| Some((*s, t.ms()?))).collect();
        let fastest = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
        assert_eq!(r.record.best, fastest, "{r:#?}");
        assert!(r.record.times[0].1.ms().is_some(), "the default is always timed: {r:#?}");
        assert!(timed.len() > 3, "a 2 s budget times several candidates at this size: {r:#?}");
        println!(
            "{} {}: best {} of {} timed, {:.0} ms",
            r.record.stencil,
            r.record.class,
            r.record.best,
            timed.len(),
            r.spent_ms
        );
    }
    // A repeat launch uses the choice; a new context reads it from disk.
    run_and_check(&g, shape, 2);
    assert_eq!(g.tune_reports().len(), 2);
    let again = gpu_with(&dir, TuneSettings::default());
    run_and_check(&again, shape, 3);
    let mut best: Vec<_> = reports.iter().map(|r| (r.record.stencil.clone(), r.record.best)).collect();
    let mut from_disk: Vec<_> =
        again.tune_reports().iter().map(|r| (r.record.stencil.clone(), r.record.best)).collect();
    best.sort_by_key(|b| b.0.clone());
    from_disk.sort_by_key(|b| b.0.clone());
    assert_eq!(best, from_disk);
    assert!(again.tune_reports().iter().all(|r| r.from_disk));

    // Damaged records are redone and rewritten.
    let tune_dir = dir.join("tune");
    let files: Vec<_> = std::fs::read_dir(&tune_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let mut bytes = std::fs::read(f).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x5a;
        std::fs::write(f, bytes).unwrap();
    }
    let third = gpu_with(&dir, TuneSettings::default());
    run_and_check(&third, shape, 4);
    assert!(third.tune_reports().iter().all(|r| !r.from_disk), "{:#?}", third.tune_reports());
    let fourth = gpu_with(&dir, TuneSettings::default());
    run_and_check(&fourth, shape, 5);
    assert!(fourth.tune_reports().iter().all(|r| r.from_disk));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stencil that updates `v` in place and sets `flag` only where the new value is large: the
/// timed launches run it many times, so if they updated `v` in place more than once, or wrote the
/// caller's `flag`, points the real launch leaves alone would be set.
#[stencil]
fn grow_and_flag(idx: Idx3, u: &Field3<f32>, v: &mut Field3<f32>, flag: &mut Field3<f32>) {
    let w = v[idx] * 2.0 + u[idx.ix::<1, 0, 0>()];
    v[idx] = w;
    if w > 4.0 {
        flag[idx] = 1.0;
    }
}

#[test]
fn timed_launches_touch_no_field_of_the_caller() {
    let shape = Shape3::new([72, 40, 36]).halo(1);
    let g = gpu_with(&scratch_dir("flag"), TuneSettings::default());
    let mut rng = Rng(11);
    let u = random(shape, &mut rng, |v| v as f32);
    let v = random(shape, &mut rng, |v| v as f32);
    let range = Loop3D::interior(&shape);
    let (mut host_v, mut host_flag) = (v.clone(), Field3::filled(shape, 0.0f32));
    range.run(GrowAndFlag, (&u, &mut host_v, &mut host_flag)).unwrap();
    let du = g.upload(&u).unwrap();
    let (mut dv, mut dflag) = (g.upload(&v).unwrap(), g.upload(&Field3::filled(shape, 0.0f32)).unwrap());
    range.run_on(&g, GrowAndFlag, (&du, &mut dv, &mut dflag)).unwrap();
    assert_eq!(g.tune_reports().len(), 1, "the launch was tuned");
    assert_bits(&host_v, &dv.download().unwrap(), "v, updated once");
    assert_bits(&host_flag, &dflag.download().unwrap(), "flag, set only where the real update is large");
}

#[test]
fn settings_bound_and_switch_off_tuning() {
    let dir = scratch_dir("settings");
    let shape = Shape3::new([64, 33, 40]).halo(1);
    // No budget: only the default is timed, and chosen.
    let g = gpu_with(&dir, TuneSettings { enabled: true, budget: std::time::Duration::ZERO });
    run_and_check(&g, shape, 6);
    let reports = g.tune_reports();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    for r in &reports {
        assert_eq!(r.record.best, r.record.times[0].0, "{r:#?}");
        assert!(r.record.times[1..].iter().all(|(_, t)| *t == Timing::NotTimed), "{r:#?}");
        assert!(!r.record.is_complete());
    }
    // A later context with time resumes the stored partial search: it times what is left, and
    // its record is complete.
    let resumed = gpu_with(&dir, TuneSettings::default());
    run_and_check(&resumed, shape, 9);
    let reports = resumed.tune_reports();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    for r in &reports {
        assert!(!r.from_disk && r.record.is_complete(), "{r:#?}");
        assert!(r.record.times.iter().filter(|(_, t)| t.ms().is_some()).count() > 3, "{r:#?}");
    }
    // Off: nothing is tuned. Small ranges and explicit strategies are never tuned.
    let off = gpu_with(&scratch_dir("off"), TuneSettings { enabled: false, ..TuneSettings::default() });
    run_and_check(&off, shape, 7);
    assert!(off.tune_reports().is_empty());
    let on = gpu_with(&scratch_dir("small"), TuneSettings::default());
    run_and_check(&on, Shape3::new([20, 20, 20]).halo(1), 8);
    assert!(on.tune_reports().is_empty(), "8000 points are below the tuning threshold");
    let u = on.upload(&Field3::filled(shape, 1.0f32)).unwrap();
    let mut prev = on.upload(&Field3::filled(shape, 1.0f32)).unwrap();
    let explicit = Strategy::PointPerThread { block: [32, 4, 2] };
    Loop3D::interior(&shape).with_strategy(explicit).run_on(&on, Leapfrog7, (0.1, &u, &mut prev)).unwrap();
    assert!(on.tune_reports().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Tuning stencils whose two-pass split has several first passes, with and without a point pass,
/// over halos no wider than their reach (a first pass computing a value where the body never
/// reads it would read past the fields: an illegal address, or under memcheck an error): every
/// two-pass candidate runs, and the tuned launch gives the host's bits.
#[test]
fn tuning_times_every_two_pass_split_and_changes_no_value() {
    use stencil_tests::canonical::{SplitBoxes, SplitBoxesSum};
    let dir = scratch_dir("split");
    let g = gpu_with(&dir, TuneSettings::default());
    let mut rng = Rng(7);
    let shape = Shape3::new([96, 80, 64]).halo(2);
    let range = Loop3D::interior(&shape);
    let u = random(shape, &mut rng, |v| v);
    let v = random(shape, &mut rng, |v| v);
    let (du, dv) = (g.upload(&u).unwrap(), g.upload(&v).unwrap());
    let bits = |f: &Field3<f64>| f.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let mut want = Field3::filled(shape, f64::NAN);
    range.run(SplitBoxes, (&u, &v, &mut want)).unwrap();
    let mut got = g.upload(&Field3::filled(shape, f64::NAN)).unwrap();
    range.run_on(&g, SplitBoxes, (&du, &dv, &mut got)).unwrap();
    assert!(bits(&want) == bits(&got.download().unwrap()), "split_boxes, tuned");
    let mut want = Field3::filled(shape, f64::NAN);
    range.run(SplitBoxesSum, (&u, &v, &mut want)).unwrap();
    let mut got = g.upload(&Field3::filled(shape, f64::NAN)).unwrap();
    range.run_on(&g, SplitBoxesSum, (&du, &dv, &mut got)).unwrap();
    assert!(bits(&want) == bits(&got.download().unwrap()), "split_boxes_sum, tuned");
    let reports = g.tune_reports();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    for r in &reports {
        let two: Vec<_> = r.record.times.iter().filter(|(s, _)| s.is_two_pass()).collect();
        assert!(!two.is_empty(), "two-pass candidates for {}: {r:#?}", r.record.stencil);
        assert!(two.iter().all(|(_, t)| !matches!(t, Timing::CannotRun)), "every two-pass candidate runs: {r:#?}");
        println!("{}: best {} ({} two-pass candidates)", r.record.stencil, r.record.best, two.len());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
