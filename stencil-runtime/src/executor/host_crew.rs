//! A pass of several steps whose threads keep their bands (`HostTiling::crew`): each thread
//! computes its own band of rows (the middle axis in 3D, the contiguous one in 2D) of every
//! step, and the threads meet once per stage, instead of a launch per slab and step.
//!
//! Every step of a stage follows the step before it as that one stood at the end of the last
//! stage, `reach` planes behind, so the slabs of one stage depend on each other in no way and a
//! stage's bands can run at once: step `j` reads only planes that step `j − 1` wrote in an
//! earlier stage, and overwrites (the slot of step `j − k`) only planes around which steps
//! `j − k + 1 .. j − 1` were done in an earlier stage. A thread takes its own band first (band
//! `b` is seat `b`'s), so the rows it reads were mostly written by itself a stage before and are
//! still in its L2; one that finds its bands done takes any left.

use crate::cpu::pool;
use crate::error::LaunchError;
use crate::range::Loop;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// One stage's slabs: `(step, from, to)`, the planes `from .. to` along the wavefront's axis.
pub(super) type Stage = Vec<(usize, usize, usize)>;

/// The stages of a pass of `count` steps over the planes `lo .. hi`: step 0 advances `planes`
/// per stage; step `j` up to `reach` planes behind where step `j − 1` stood at the end of the
/// stage before (all the way once that one is done).
pub(super) fn stages(lo: usize, hi: usize, reach: usize, count: usize, planes: usize) -> Vec<Stage> {
    let mut done = vec![lo; count];
    let mut stages = Vec::new();
    while count > 0 && done[count - 1] < hi {
        let before = done.clone();
        let mut stage = Stage::new();
        for j in 0..count {
            let to = match j {
                0 => hi.min(before[0] + planes.max(1)),
                _ if before[j - 1] >= hi => hi,
                _ => before[j - 1].saturating_sub(reach),
            };
            if to > before[j] {
                stage.push((j, before[j], to));
                done[j] = to;
            }
        }
        stages.push(stage);
    }
    stages
}

/// Planes per stage for a crew pass where `tiling.planes` is 0: what keeps a thread's part of
/// every step in flight in half its L2, `fields` fields of `row_bytes` per row of the band and
/// `rows` rows (the band and the reach along its axis on both sides): the `count` steps span
/// `count · (planes + reach)` planes and read `reach` more on each side. At least twice the
/// reach (and 1): a slab reads `reach` planes on each side again, and thinner slabs lost on a
/// 16-core Xeon whatever the L2 held.
pub(super) fn planes_for(l2: usize, row_bytes: usize, rows: usize, fields: usize, reach: usize, count: usize) -> usize {
    let per_plane = (row_bytes * rows * fields).max(1);
    let fit = (l2 / 2) / per_plane;
    (fit.saturating_sub(2 * reach) / count.max(1)).saturating_sub(reach).max(2 * reach).max(1)
}

/// Runs the stages of a pass over `range` with bands of `band_axis`: `step(j, slab)` computes
/// step `j` on the part of a band in a stage's slab, from whichever thread of the launch pool
/// takes the band (each under `pool::solo`, so its launches stay on it). The first error (or
/// panic) stops every thread at the next stage and is returned (raised) here.
pub(super) fn run<const D: usize>(
    range: &Loop<D>,
    axis: usize,
    band_axis: usize,
    stages: &[Stage],
    step: &(dyn Fn(usize, &Loop<D>) -> Result<(), LaunchError> + Sync),
) -> Result<(), LaunchError> {
    let threads = rayon::current_num_threads().max(1);
    let (begin, n) = (range.begin(), range.len_per_axis());
    let end: [usize; D] = std::array::from_fn(|a| begin[a] + n[a]);
    let bands = threads.min(n[band_axis]).max(1);
    let band_rows =
        |b: usize| (begin[band_axis] + b * n[band_axis] / bands, begin[band_axis] + (b + 1) * n[band_axis] / bands);
    // `next[b]`: the stage band `b` runs next (claimed by moving it on); `finished`: the tasks of
    // all stages done, so stage `s` may start once `s · bands` are.
    let next: Vec<AtomicUsize> = (0..bands).map(|_| AtomicUsize::new(0)).collect();
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    let task = |s: usize, b: usize| {
        let (from_b, to_b) = band_rows(b);
        for &(j, from, to) in &stages[s] {
            let (mut lo, mut hi) = (begin, end);
            (lo[axis], hi[axis]) = (from, to);
            (lo[band_axis], hi[band_axis]) = (from_b, to_b);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                step(j, &Loop::within(range.extent(), lo, hi))
            }));
            let failed = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(Failure::Error(e)),
                Err(payload) => Some(Failure::Panic(payload)),
            };
            if let Some(f) = failed {
                failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(f);
                stop.store(true, Ordering::Release);
                return;
            }
        }
    };
    let member = || {
        let _solo = pool::solo();
        let seat = pool::SEAT.get() % threads;
        for s in 0..stages.len() {
            // Waits for the stage before; yields now and then, for a member descheduled mid-task.
            let mut spins = 0u32;
            while finished.load(Ordering::Acquire) < s * bands {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256) {
                    std::thread::yield_now();
                }
            }
            if stop.load(Ordering::Acquire) {
                return;
            }
            for b in (seat..bands).step_by(threads).chain(0..bands) {
                if next[b].load(Ordering::Relaxed) == s
                    && next[b].compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok()
                {
                    task(s, b);
                    // Release: the band's writes are seen by whoever sees the count.
                    finished.fetch_add(1, Ordering::Release);
                }
            }
        }
    };
    let helpers = threads.min(bands).saturating_sub(1);
    if helpers == 0 || !(pool::spin::enabled() && pool::spin::run(helpers, &member)) {
        // rayon's workers (the pool is pinned, or another launch holds it): any number of members
        // finishes the pass, the caller alone if no worker comes.
        rayon::in_place_scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|_| member());
            }
            member();
        });
    }
    match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        None => Ok(()),
        Some(Failure::Error(e)) => Err(e),
        Some(Failure::Panic(payload)) => std::panic::resume_unwind(payload),
    }
}

/// What stopped a crew pass.
enum Failure {
    Error(LaunchError),
    Panic(Box<dyn std::any::Any + Send>),
}

#[cfg(test)]
mod tests {
    use super::stages;

    /// Replays a crew pass's stages on a 2D grid of `ny` rows (read with reach `rb`, in bands
    /// of `bands`) and `nz` planes (the wavefront's axis, reach `rz`), every slab of a stage as if
    /// all ran at once (reads see what earlier stages wrote, overwrites need the steps that read
    /// the overwritten level done around the point in earlier stages), for `k` fields rotating.
    fn order_is_safe(ny: usize, rb: usize, nz: usize, rz: usize, count: usize, planes: usize, k: usize) {
        let at = |y: usize, z: usize| y * nz + z;
        let mut written = vec![vec![false; ny * nz]; count];
        let around = |y: usize, z: usize| {
            let ys = y.saturating_sub(rb)..(y + rb + 1).min(ny);
            let zs = z.saturating_sub(rz)..(z + rz + 1).min(nz);
            ys.flat_map(move |y| zs.clone().map(move |z| (y, z)))
        };
        for stage in stages(0, nz, rz, count, planes) {
            let before = written.clone();
            for &(j, from, to) in &stage {
                for y in 0..ny {
                    for z in from..to {
                        for back in 1..k {
                            if j >= back {
                                for (qy, qz) in around(y, z) {
                                    assert!(
                                        before[j - back][at(qy, qz)],
                                        "step {j} read step {} at ({qy}, {qz}) not written in an earlier stage",
                                        j - back
                                    );
                                }
                            }
                        }
                        for later in (j + 1).saturating_sub(k)..j {
                            assert!(
                                around(y, z).all(|(qy, qz)| before[later][at(qy, qz)]),
                                "step {j} overwrote ({y}, {z}) where step {later} may still read in this stage"
                            );
                        }
                        assert!(!written[j][at(y, z)], "({y}, {z}) of step {j} computed twice");
                        written[j][at(y, z)] = true;
                    }
                }
            }
        }
        for (j, w) in written.iter().enumerate() {
            assert!(w.iter().all(|&x| x), "step {j} left points out");
        }
    }

    #[test]
    fn a_stage_reads_only_what_earlier_stages_wrote_and_overwrites_only_what_they_finished() {
        for nz in [1, 2, 5, 17, 40] {
            for rz in 0..=4 {
                for count in 1..=6 {
                    for planes in [1, 2, 3, 8, 100] {
                        for k in [2, 3] {
                            order_is_safe(3, 1, nz, rz, count, planes, k);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn stages_end_when_the_last_step_reaches_the_end() {
        assert!(stages(0, 10, 2, 0, 4).is_empty());
        // 3 steps, reach 1, 4 planes a stage over 10: step 0 in 3 stages, each later step one
        // stage behind.
        let s = stages(0, 10, 1, 3, 4);
        assert_eq!(s[0], vec![(0, 0, 4)]);
        assert_eq!(s[1], vec![(0, 4, 8), (1, 0, 3)]);
        assert_eq!(s[2], vec![(0, 8, 10), (1, 3, 7), (2, 0, 2)]);
        assert_eq!(s.len(), 5);
    }
}
