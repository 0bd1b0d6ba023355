//! Steps sized on the executor and replayed in recorded pairs: a model's step that reduces its
//! own size and the time after it into held scalars (so the host waits for nothing before the
//! step's launches) runs twice as issued (compiling and tuning its kernels), then as two steps
//! recorded as one, replayed with their sizes and times read back without waiting.

use std::collections::VecDeque;

use stencil_runtime::{Executor, LaunchError, Readback};

use crate::checkpoint::Error;

/// A run's clock held on the executor: the time, and each step's size and the time after it, for
/// the first and second step of a pair.
pub struct HeldClock<E: Executor> {
    /// The size of the step the launches read: a pair's second step's, or one the host set.
    pub dt: E::HeldScalar<f64>,
    /// The time a pair starts from, and after its second step.
    pub t: E::HeldScalar<f64>,
    /// The size of a pair's first step and the time after it.
    pub first: [E::HeldScalar<f64>; 2],
    /// Two steps recorded as one, once two steps have run.
    recorded: Option<E::Recording>,
    /// The steps run as issued so far (at most 2).
    issued: usize,
    /// Replayed steps whose size and time are still to be returned, read without waiting.
    queued: VecDeque<[Readback<f64>; 2]>,
    /// The size of the last step returned.
    last_dt: f64,
}

/// When a run may replay recorded pairs, and how far ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pairing {
    /// The run reads its state only after even step counts: steps may go in recorded pairs.
    pub pairs: bool,
    /// The run reads its state only at the end: the next pair may be replayed before the host
    /// waits for the one before.
    pub ahead: bool,
}

impl<E: Executor> HeldClock<E> {
    /// A clock at time 0 on `exec`.
    pub fn new(exec: &E) -> Result<Self, LaunchError> {
        let held = || exec.held(0.0);
        Ok(HeldClock {
            dt: held()?,
            t: held()?,
            first: [held()?, held()?],
            recorded: None,
            issued: 0,
            queued: VecDeque::new(),
            last_dt: 0.0,
        })
    }

    /// What a step sized on the executor reads and writes: the time it starts from, and where its
    /// size and the time after it go (`first`: the first step of a pair).
    pub fn roles(&self, first: bool) -> (&E::HeldScalar<f64>, [&E::HeldScalar<f64>; 2]) {
        if first {
            (&self.t, [&self.first[0], &self.first[1]])
        } else {
            (&self.first[1], [&self.dt, &self.t])
        }
    }

    /// The step size the launches of a step read (`first`: the first step of a pair).
    pub fn step_size(&self, first: bool) -> &E::HeldScalar<f64> {
        if first {
            &self.first[0]
        } else {
            &self.dt
        }
    }
}

/// Step `step` (counted from the run's start) of a run on `exec` from time `t`, sized on the
/// executor by `one(exec, state, first)` (which reads the start time and writes the size and the
/// time after it where `clock(state).roles(first)` says, and runs the step): the size of the step
/// and the time after it. The first two run as issued; then, with `pairing.pairs` (and unless
/// `STENCIL_RECORD=0`), two steps are recorded as one and replayed, their sizes and times read
/// without waiting and returned one per call; with `pairing.ahead` the next pair is replayed
/// before the host waits for the one before, unless the steps in flight may reach `t_end` (a
/// step past it must change nothing, but costs a step).
#[allow(clippy::too_many_arguments)]
pub fn paired_step<E: Executor, S>(
    exec: &E,
    state: &mut S,
    clock: fn(&mut S) -> &mut HeldClock<E>,
    (step, t): (usize, f64),
    t_end: f64,
    pairing: Pairing,
    mut one: impl FnMut(&E, &mut S, bool) -> Result<(), LaunchError>,
) -> Result<(f64, f64), Error> {
    if clock(state).recorded.is_none() {
        exec.set_held(&clock(state).t, t)?;
        one(exec, state, true)?;
        clock(state).issued += 1;
        let record = pairing.pairs && (step + 1) % 2 == 0 && std::env::var("STENCIL_RECORD").as_deref() != Ok("0");
        if clock(state).issued == 2 && record {
            let mut pair = |e: &E| {
                one(e, state, true)?;
                one(e, state, false)
            };
            let recorded = exec.record(&mut pair)?;
            clock(state).recorded = recorded;
        }
        let c = clock(state);
        c.last_dt = exec.read_held(&c.first[0])?;
        return Ok((c.last_dt, exec.read_held(&c.first[1])?));
    }
    let c = clock(state);
    let pair = c.recorded.as_ref().expect("recorded");
    let may_end = |queued: usize| t + 1.5 * c.last_dt * queued as f64 >= t_end;
    while c.queued.is_empty() || (pairing.ahead && c.queued.len() <= 2 && !may_end(c.queued.len())) {
        if c.queued.is_empty() {
            // Nothing in flight: the time is the host's (the steps run as issued leave theirs in
            // `first`).
            exec.set_held(&c.t, t)?;
        }
        exec.replay(pair)?;
        c.queued.push_back([exec.read_held_later(&c.first[0])?, exec.read_held_later(&c.first[1])?]);
        c.queued.push_back([exec.read_held_later(&c.dt)?, exec.read_held_later(&c.t)?]);
    }
    let [dt, next] = c.queued.pop_front().expect("a step in flight");
    let (dt, next) = (dt.wait()?[0][0], next.wait()?[0][0]);
    c.last_dt = dt;
    Ok((dt, next))
}
