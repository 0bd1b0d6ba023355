//! [`Overlap::Auto`]: the overlap of each launch site measured, not guessed. A launch site is a
//! stencil and its range; where its launches need an exchange, the first few alternate between
//! no overlap and one-divided overlap, the later ones of them timed (every subdomain waited for
//! before and after), and from then on the site keeps the faster mode: over ranks, the mode
//! whose slowest rank was faster, so that every rank keeps the same one.
//!
//! Both modes give the same bits, so the trials change no result. A recorded step (a CUDA graph)
//! times nothing: it uses the site's mode if already chosen, else no overlap.

use std::collections::HashMap;
use std::time::Instant;

use super::super::binder::Overlap;
use super::super::World;
use crate::error::LaunchError;
use crate::executor::Executor;
use crate::range::Loop;

/// The two modes tried, in the order the trials alternate.
const MODES: [Overlap; 2] = [Overlap::None, Overlap::OneDivided];
/// Untimed launches per mode first (the first launch of a range prepares its kernels).
const WARM_UP: usize = 1;
/// Timed launches per mode; each mode keeps its fastest.
const TIMED: usize = 3;
/// One-divided must be faster than this fraction of no overlap's time to be kept: at a tie the
/// whole-range launch (fewer launches, no slabs) stays.
const MARGIN: f64 = 0.98;

/// A launch site: the stencil (its IR's address) and the range.
pub(super) type Site = (usize, Vec<i64>);

/// The site of `stencil` over `range`.
pub(super) fn site<const D: usize>(stencil: usize, range: &Loop<D>) -> Site {
    let bounds = range.begin().into_iter().map(|b| b as i64).chain(range.end().into_iter().map(|e| e as i64));
    (stencil, bounds.collect())
}

/// The trials of every launch site of a distributed executor.
#[derive(Default)]
pub(super) struct Trials {
    sites: HashMap<Site, Trial>,
}

/// One site's trials: launches so far, each mode's fastest timed launch, and the choice.
#[derive(Default)]
struct Trial {
    launches: usize,
    best: [f64; 2],
    chosen: Option<Overlap>,
}

impl Trials {
    /// The mode of the next launch at `site`, and whether to time it; `recording`: a recorded
    /// step, which is not timed.
    pub(super) fn next(&mut self, site: &Site, recording: bool) -> (Overlap, bool) {
        let trial =
            self.sites.entry(site.clone()).or_insert_with(|| Trial { best: [f64::INFINITY; 2], ..Default::default() });
        match trial.chosen {
            Some(mode) => (mode, false),
            None if recording => (Overlap::None, false),
            None => (MODES[trial.launches % 2], trial.launches >= 2 * WARM_UP),
        }
    }

    /// Notes a launch at `site` in `mode` (taking `seconds` when timed); after the last trial,
    /// chooses the site's mode, agreed over the ranks of `world`.
    pub(super) fn record(&mut self, site: &Site, mode: Overlap, seconds: Option<f64>, world: &World) {
        let Some(trial) = self.sites.get_mut(site) else { return };
        if trial.chosen.is_some() {
            return;
        }
        let k = MODES.iter().position(|&m| m == mode).unwrap_or(0);
        if let Some(s) = seconds {
            trial.best[k] = trial.best[k].min(s);
        }
        trial.launches += 1;
        if trial.launches == 2 * (WARM_UP + TIMED) {
            let [none, one] = trial.best.map(|s| world.max(s));
            trial.chosen = Some(if one < MARGIN * none { Overlap::OneDivided } else { Overlap::None });
            tracing::debug!(target: "stencil::distributed", ?site, none, one, chosen = ?trial.chosen, "overlap chosen");
        }
    }

    /// The modes chosen so far, per site (for tests and reports).
    pub(super) fn chosen(&self) -> Vec<Overlap> {
        self.sites.values().filter_map(|t| t.chosen).collect()
    }
}

/// Waits for every executor: the start of a timed launch.
pub(super) fn start<E: Executor>(execs: &[E]) -> Result<Instant, LaunchError> {
    execs.iter().try_for_each(|e| e.synchronize())?;
    Ok(Instant::now())
}

/// Waits for every executor: the seconds since `start`.
pub(super) fn stop<E: Executor>(execs: &[E], start: Instant) -> Result<f64, LaunchError> {
    execs.iter().try_for_each(|e| e.synchronize())?;
    Ok(start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the trials of one site with the time of each mode given; the choice.
    fn choose(none: f64, one: f64) -> (Vec<(Overlap, bool)>, Option<Overlap>) {
        let (mut trials, site, world) = (Trials::default(), (1, vec![0, 0, 4, 4]), World::single());
        let mut launches = Vec::new();
        while trials.chosen().is_empty() {
            let (mode, timed) = trials.next(&site, false);
            launches.push((mode, timed));
            let seconds = if mode == Overlap::None { none } else { one };
            trials.record(&site, mode, timed.then_some(seconds), &world);
        }
        (launches, trials.chosen().first().copied())
    }

    #[test]
    fn the_trials_alternate_time_after_the_warm_up_and_keep_the_faster_mode() {
        let (launches, chosen) = choose(2.0, 1.0);
        assert_eq!(launches.len(), 2 * (WARM_UP + TIMED));
        for (k, &(mode, timed)) in launches.iter().enumerate() {
            assert_eq!(mode, MODES[k % 2], "launch {k}");
            assert_eq!(timed, k >= 2 * WARM_UP, "launch {k}");
        }
        assert_eq!(chosen, Some(Overlap::OneDivided));
        assert_eq!(choose(1.0, 2.0).1, Some(Overlap::None));
        // A tie (within the margin) keeps the whole-range launch.
        assert_eq!(choose(1.0, 0.99).1, Some(Overlap::None));
    }

    #[test]
    fn a_chosen_site_keeps_its_mode_and_a_recorded_step_times_nothing() {
        let (mut trials, site, world) = (Trials::default(), (7, vec![1, 2]), World::single());
        assert_eq!(trials.next(&site, true), (Overlap::None, false), "recorded before any choice: no overlap");
        for k in 0..2 * (WARM_UP + TIMED) {
            let (mode, timed) = trials.next(&site, false);
            let seconds = if mode == Overlap::OneDivided { 1.0 } else { 3.0 };
            trials.record(&site, mode, timed.then_some(seconds), &world);
            assert_eq!(trials.chosen().is_empty(), k + 1 < 2 * (WARM_UP + TIMED));
        }
        for recording in [false, true] {
            assert_eq!(trials.next(&site, recording), (Overlap::OneDivided, false));
        }
        // Another range of the same stencil is another site, with trials of its own.
        assert_eq!(trials.next(&(7, vec![1, 3]), false), (Overlap::None, false));
    }
}
