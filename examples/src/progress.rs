//! The examples' progress bars.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `steps` steps, with the time elapsed and the time left.
pub fn steps(steps: usize) -> ProgressBar {
    ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {elapsed_precise} elapsed, eta {eta}")
            .expect("a valid template"),
    )
}

/// A bar over a run's model time in thousandths, with a message (the time and the step); hidden
/// unless `visible` (e.g. on ranks other than 0).
pub fn time(visible: bool) -> ProgressBar {
    let style = ProgressStyle::with_template("{bar:40} {msg}, {elapsed_precise} elapsed, eta {eta}");
    shown_if(visible, ProgressBar::new(1000).with_style(style.expect("a valid template")))
}

/// `bar`, hidden unless `visible` (e.g. on ranks other than 0, so that a run over ranks draws one).
pub fn shown_if(visible: bool, bar: ProgressBar) -> ProgressBar {
    if !visible {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}

/// A run's progress bar and the clock of its time loop. The first `warm_up` steps reported are
/// not timed (they compile, and on a GPU tune, the kernels; a run of no more steps times its
/// last one). Report each step with [`Timed::tick`] once its work is done (e.g. after a read of
/// its results, which waits for it): a timed step's time is the time since the step before.
pub struct Timed {
    /// The bar: its position and message are the caller's to set.
    pub bar: ProgressBar,
    warm_up: usize,
    created: std::time::Instant,
    ticks: std::cell::RefCell<Vec<(usize, std::time::Instant)>>,
}

/// The steps a [`Timed`] run timed and how long they took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// The first and the last step timed.
    pub steps: (usize, usize),
    /// How many steps were timed.
    pub count: usize,
    /// Their seconds.
    pub seconds: f64,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "steps {}..{} in {:.2} s", self.steps.0, self.steps.1, self.seconds)
    }
}

impl Timing {
    /// The rate of work done, given the work of one step (e.g. the points it updates).
    pub fn per_second(&self, work_per_step: f64) -> f64 {
        work_per_step * self.count as f64 / self.seconds
    }
}

impl Timed {
    /// The clock of a run whose first `warm_up` steps are not timed, with its bar.
    pub fn new(bar: ProgressBar, warm_up: usize) -> Self {
        Timed { bar, warm_up, created: std::time::Instant::now(), ticks: Default::default() }
    }

    /// Notes that step `step` is done.
    pub fn tick(&self, step: usize) {
        self.ticks.borrow_mut().push((step, std::time::Instant::now()));
    }

    /// Notes that step `step` is done, moving a [`steps`] bar to it.
    pub fn tick_to(&self, step: usize) {
        self.bar.set_position(step as u64);
        self.tick(step);
    }

    /// Notes that step `step` is done at model time `t`, moving a [`time`] bar to `t / t_end`.
    pub fn tick_at(&self, step: usize, t: f64, t_end: f64) {
        self.bar.set_position((1000.0 * t / t_end) as u64);
        self.bar.set_message(format!("t = {t:.4}, step {step}"));
        self.tick(step);
    }

    /// The steps timed, leaving out `untimed` (a step that did more than step, such as a
    /// download of a snapshot); `None` when no step was reported.
    pub fn timing(&self, untimed: Option<usize>) -> Option<Timing> {
        let ticks = self.ticks.borrow();
        let first = self.warm_up.min(ticks.len().checked_sub(1)?);
        let mut timing = Timing { steps: (ticks[first].0, ticks[ticks.len() - 1].0), count: 0, seconds: 0.0 };
        for (i, &(step, at)) in ticks.iter().enumerate().skip(first) {
            if Some(step) != untimed {
                let since = if i == 0 { self.created } else { ticks[i - 1].1 };
                timing.count += 1;
                timing.seconds += (at - since).as_secs_f64();
            }
        }
        Some(timing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_steps_and_an_untimed_step_are_left_out() {
        let timed = Timed::new(ProgressBar::hidden(), 2);
        assert_eq!(timed.timing(None), None);
        for step in 11..=20 {
            timed.tick(step);
        }
        let t = timed.timing(None).unwrap();
        assert_eq!((t.steps, t.count), ((13, 20), 8));
        assert_eq!(timed.timing(Some(15)).unwrap().count, 7);
        let short = Timed::new(ProgressBar::hidden(), 2);
        short.tick(1);
        short.tick(2);
        assert_eq!(short.timing(None).unwrap().steps, (2, 2), "a short run times its last step");
    }
}
