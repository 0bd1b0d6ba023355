//! Binomial checkpointing (Griewank and Walther's *revolve*, 2000): the order in which a
//! reverse (adjoint) run over `n` time steps stores, restores and recomputes forward states when
//! only `s` of them fit in memory.
//!
//! The adjoint of step `i` (from state `x_i` to `x_{i+1}`) needs `x_i`, and the adjoints run
//! from the last step down to the first. With every state stored, one forward sweep suffices;
//! with `s` slots, states are stored at binomially spaced steps and the others recomputed from
//! the nearest stored one. [`Schedule::binomial`] gives a schedule with the fewest forward steps
//! possible for `s` slots (the initial state's included):
//!
//! ```text
//! t(n, s) = r·n − C(s + r, s + 1),   r the integer with C(s + r − 1, s) < n ≤ C(s + r, s)
//! ```
//!
//! ([`optimal_forward_steps`]); [`Schedule::store_all`] is the schedule without a budget. A
//! schedule is a list of [`Action`]s that a time loop carries out in order:
//!
//! ```
//! use stencil_runtime::revolve::{Action, Schedule};
//!
//! let schedule = Schedule::binomial(10, 3).unwrap();
//! assert_eq!(schedule.forward_steps(), 15); // t(10, 3): r = 2 (C(4, 3) < 10 <= C(5, 3)), 2·10 − C(5, 4)
//! assert_eq!(schedule.recomputed(), 6); // beyond the 9 steps of one forward sweep
//! let reversed: Vec<usize> = schedule
//!     .actions()
//!     .iter()
//!     .filter_map(|a| match *a {
//!         Action::FirstReverse { step } | Action::Reverse { step } => Some(step),
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(reversed, (0..10).rev().collect::<Vec<_>>());
//! ```

use crate::error::LaunchError;
pub use crate::error::ScheduleError;
use crate::executor::{Executor, FieldStorage, HostCopy};
use crate::field::Element;

/// One thing a reverse time loop does, in schedule order. "The state" is the forward state the
/// loop holds in its working fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Copy the state (the state after `step` steps) into checkpoint slot `slot`.
    Store {
        /// The slot, `0 .. slots`.
        slot: usize,
        /// The step the state is at.
        step: usize,
    },
    /// Copy checkpoint slot `slot` (the state after `step` steps) into the state.
    Restore {
        /// The slot.
        slot: usize,
        /// The step it holds.
        step: usize,
    },
    /// Run the forward steps `from .. to` (the state goes from step `from` to step `to`).
    Advance {
        /// The step the state is at.
        from: usize,
        /// The step it ends at.
        to: usize,
    },
    /// The first adjoint step: from the state at `step` (the last step, `n − 1`), run forward
    /// step `step` keeping what its adjoint needs, then its adjoint. Afterwards the state is
    /// undefined.
    FirstReverse {
        /// The step.
        step: usize,
    },
    /// The adjoint of step `step`, from the state at `step`, as [`Action::FirstReverse`].
    Reverse {
        /// The step.
        step: usize,
    },
}

/// A checkpointing schedule: the actions of a reverse run over `steps` steps with `slots`
/// checkpoint slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    steps: usize,
    slots: usize,
    actions: Vec<Action>,
    held: Held,
}

/// Where [`reverse`] keeps the checkpoints of a [`Schedule`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Held {
    /// Fields of the executor ([`Executor::alloc`], [`Executor::copy`]): device memory for a
    /// GPU state. The default.
    #[default]
    OnExecutor,
    /// Host memory ([`Executor::save`], [`Executor::restore`]): a GPU state's checkpoints then
    /// take no device memory, and each store and restore crosses the bus (and waits for it).
    OnHost,
}

impl Schedule {
    /// The binomial schedule for `steps` steps and `slots` checkpoint slots (one of them holds
    /// the initial state): the fewest forward steps possible ([`optimal_forward_steps`]). With
    /// `slots >= steps` every state is stored once, as [`Schedule::store_all`] does.
    pub fn binomial(steps: usize, slots: usize) -> Result<Schedule, ScheduleError> {
        if steps == 0 {
            return Ok(Schedule { steps, slots, actions: Vec::new(), held: Held::OnExecutor });
        }
        if slots == 0 {
            return Err(ScheduleError::NoSlot { steps });
        }
        let mut b = Builder { actions: Vec::new(), state: None, free: (1..slots).rev().collect(), first: true };
        b.actions.push(Action::Store { slot: 0, step: 0 });
        b.state = Some(0);
        b.reverse(0, steps, 0);
        Ok(Schedule { steps, slots, actions: b.actions, held: Held::OnExecutor })
    }

    /// The binomial schedule for `steps` steps with as many slots as a memory budget of
    /// `budget` bytes holds states of `state` bytes each (every step stored when it holds them
    /// all). Refused ([`ScheduleError::Budget`]) when it holds no state.
    pub fn within(steps: usize, budget: usize, state: usize) -> Result<Schedule, ScheduleError> {
        let slots = budget.checked_div(state).unwrap_or(usize::MAX).min(steps.max(1));
        if slots == 0 && steps > 0 {
            return Err(ScheduleError::Budget { steps, budget, state });
        }
        Schedule::binomial(steps, slots)
    }

    /// The same schedule with its checkpoints held in `held` memory.
    pub fn held(self, held: Held) -> Schedule {
        Schedule { held, ..self }
    }

    /// Where [`reverse`] keeps the checkpoints.
    pub fn held_in(&self) -> Held {
        self.held
    }

    /// The schedule without a memory budget: one forward sweep storing every state, then every
    /// adjoint step from its stored state (`steps` slots, no recomputation).
    pub fn store_all(steps: usize) -> Schedule {
        Schedule::binomial(steps, steps.max(1)).expect("at least one slot")
    }

    /// The steps of the run.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The checkpoint slots it may use (at most this many hold a state at once).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The actions, in order.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// The forward steps the [`Action::Advance`]s run (the adjoint steps' own forward steps not
    /// counted).
    pub fn forward_steps(&self) -> usize {
        self.actions.iter().map(|a| if let Action::Advance { from, to } = a { to - from } else { 0 }).sum()
    }

    /// The forward steps run beyond one forward sweep (`steps − 1` of them reach the last
    /// state): zero when every state is stored.
    pub fn recomputed(&self) -> usize {
        self.forward_steps() - self.steps.saturating_sub(1)
    }
}

/// What [`reverse`] did: the forward steps it ran (those of the [`Action::Advance`]s, equal to
/// [`Schedule::forward_steps`]), the adjoint steps, and the checkpoints it allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReverseRun {
    /// Forward steps run by [`Action::Advance`]s.
    pub forward_steps: usize,
    /// Adjoint steps run (the schedule's steps).
    pub adjoint_steps: usize,
    /// Checkpoint slots used (each a copy of the state's fields), on the executor or the host.
    pub slots_allocated: usize,
    /// The most host memory the checkpoints held at once, bytes ([`Held::OnHost`]; 0 otherwise).
    pub host_bytes: usize,
}

/// Carries out `schedule` on the executor `exec`: the reverse (adjoint) run of a time loop whose
/// forward state is the fields `state` (one element type and dimension; say `[u_prev, u]`),
/// holding the initial state (step 0) on entry.
///
/// - `forward(ctx, i, state)` advances the state from step `i` to step `i + 1` in place;
/// - `adjoint(ctx, i, first, state)` runs the adjoint of step `i` with `state` holding the
///   forward state at step `i` (it may read it, and leave it changed: the run restores what it
///   needs next). `first` is true for the last step (`i = n − 1`), the first adjoint step: a
///   misfit of the final state is computed there, by running forward step `i` into fields of
///   its own before the adjoint;
/// - `ctx` is handed to both, for what they share (scratch fields, the adjoint's fields, the
///   gradient being accumulated).
///
/// A checkpoint is a copy of every field of the state made on the executor ([`Executor::alloc`]
/// on first use, then [`Executor::copy`]), so checkpoints live where the state lives: on the
/// host, on a GPU, or spread over the subdomains of the distributed executor. With
/// [`Schedule::held`]`(`[`Held::OnHost`]`)` they are saved to host memory instead
/// ([`Executor::save`], [`Executor::restore`]; a distributed state part by part), with the
/// same results bit for bit. Every step is
/// stored with [`Schedule::store_all`]; [`Schedule::binomial`] with fewer slots recomputes.
/// The adjoint steps are called from `n − 1` down to `0`, each exactly once.
///
/// ```
/// use stencil_runtime::prelude::*;
/// use stencil_runtime::revolve::{reverse, Schedule};
///
/// // x_{i+1} = 2 x_i pointwise; J = sum(x_n): dJ/dx_0 = 2^n.
/// let shape = Shape1::new([4]).halo(0);
/// let mut state = [Field1::<f64>::filled(shape, 1.0)];
/// let mut bar = Field1::<f64>::filled(shape, 0.0);
/// let run = reverse(
///     &Host,
///     &Schedule::binomial(10, 2)?,
///     &mut state,
///     &mut bar,
///     |_, _, s: &mut [Field1<f64>]| -> Result<(), LaunchError> {
///         s[0] = Field1::from_fn(shape, |g| 2.0 * s[0].get(g).unwrap());
///         Ok(())
///     },
///     |bar, _, first, _| {
///         let seed = if first { 1.0 } else { bar.get([0]).unwrap() };
///         *bar = Field1::filled(shape, 2.0 * seed);
///         Ok(())
///     },
/// )?;
/// assert_eq!(bar.get([0]), Some(1024.0));
/// assert_eq!(run.forward_steps, Schedule::binomial(10, 2)?.forward_steps());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn reverse<X, T, C, E, const D: usize>(
    exec: &X,
    schedule: &Schedule,
    state: &mut [X::Field<T, D>],
    ctx: &mut C,
    mut forward: impl FnMut(&mut C, usize, &mut [X::Field<T, D>]) -> Result<(), E>,
    mut adjoint: impl FnMut(&mut C, usize, bool, &mut [X::Field<T, D>]) -> Result<(), E>,
) -> Result<ReverseRun, E>
where
    X: Executor,
    T: Element,
    C: ?Sized,
    E: From<LaunchError>,
{
    // A slot holds a copy of each field of the state: on the executor, or saved on the host.
    enum Slot<F, H> {
        Empty,
        Executor(Vec<F>),
        Host(Vec<H>),
    }
    let mut slots: Vec<Slot<X::Field<T, D>, HostCopy<T, D>>> = (0..schedule.slots()).map(|_| Slot::Empty).collect();
    let mut run = ReverseRun { forward_steps: 0, adjoint_steps: 0, slots_allocated: 0, host_bytes: 0 };
    for action in schedule.actions() {
        match *action {
            Action::Store { slot, .. } => match schedule.held_in() {
                Held::OnExecutor => {
                    if matches!(slots[slot], Slot::Empty) {
                        let fields = state.iter().map(|f| exec.alloc(*f.shape())).collect::<Result<Vec<_>, _>>()?;
                        slots[slot] = Slot::Executor(fields);
                        run.slots_allocated += 1;
                    }
                    let Slot::Executor(copy) = &mut slots[slot] else { unreachable!("stored on the executor") };
                    for (dst, src) in copy.iter_mut().zip(state.iter()) {
                        exec.copy(dst, src)?;
                    }
                }
                Held::OnHost => {
                    if matches!(slots[slot], Slot::Empty) {
                        run.slots_allocated += 1;
                    }
                    if let Slot::Host(saved) = &mut slots[slot] {
                        for (dst, src) in saved.iter_mut().zip(state.iter()) {
                            exec.save_into(src, dst)?;
                        }
                    } else {
                        slots[slot] = Slot::Host(state.iter().map(|f| exec.save(f)).collect::<Result<Vec<_>, _>>()?);
                    }
                    let held =
                        slots
                            .iter()
                            .map(|s| if let Slot::Host(h) = s { h.iter().map(HostCopy::bytes).sum() } else { 0 });
                    run.host_bytes = run.host_bytes.max(held.sum());
                }
            },
            Action::Restore { slot, .. } => match &slots[slot] {
                Slot::Executor(copy) => {
                    for (dst, src) in state.iter_mut().zip(copy) {
                        exec.copy(dst, src)?;
                    }
                }
                Slot::Host(saved) => {
                    for (dst, src) in state.iter_mut().zip(saved) {
                        exec.restore(dst, src)?;
                    }
                }
                Slot::Empty => unreachable!("a schedule restores only slots it stored"),
            },
            Action::Advance { from, to } => {
                for i in from..to {
                    forward(ctx, i, state)?;
                    run.forward_steps += 1;
                }
            }
            Action::FirstReverse { step } | Action::Reverse { step } => {
                adjoint(ctx, step, matches!(action, Action::FirstReverse { .. }), state)?;
                run.adjoint_steps += 1;
            }
        }
    }
    Ok(run)
}

/// The fewest forward steps a reverse run over `steps` steps with `slots` checkpoint slots
/// needs (Griewank and Walther's `t(n, s) = r·n − C(s + r, s + 1)`); `None` without a slot.
pub fn optimal_forward_steps(steps: usize, slots: usize) -> Option<usize> {
    if steps <= 1 {
        return Some(0);
    }
    if slots == 0 {
        return None;
    }
    if slots >= steps {
        return Some(steps - 1);
    }
    let beta = |s: usize, r: usize| binomial(s + r, s);
    let mut r = 0;
    while beta(slots, r) < steps as u128 {
        r += 1;
    }
    let t = r as u128 * steps as u128 - binomial(slots + r, slots + 1);
    Some(t as usize)
}

/// `C(n, k)`, saturating.
fn binomial(n: usize, k: usize) -> u128 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c.saturating_mul((n - i) as u128) / (i as u128 + 1);
    }
    c
}

struct Builder {
    actions: Vec<Action>,
    /// The step of the state held, if known.
    state: Option<usize>,
    /// Free slots (taken from the end).
    free: Vec<usize>,
    first: bool,
}

impl Builder {
    /// Reverses steps `end − 1 .. start` (downwards), the state at `start` being in `slot`.
    fn reverse(&mut self, start: usize, end: usize, slot: usize) {
        let n = end - start;
        if n == 1 {
            self.bring(start, slot);
            self.adjoint(start);
            return;
        }
        let Some(&new) = self.free.last() else {
            for i in (start..end).rev() {
                self.bring(start, slot);
                self.advance(i);
                self.adjoint(i);
            }
            return;
        };
        let m = split(n, self.free.len() + 1);
        self.bring(start, slot);
        self.advance(start + m);
        self.free.pop();
        self.actions.push(Action::Store { slot: new, step: start + m });
        self.reverse(start + m, end, new);
        self.free.push(new);
        self.reverse(start, start + m, slot);
    }

    /// Makes the state the one at `step`, held in `slot`.
    fn bring(&mut self, step: usize, slot: usize) {
        if self.state != Some(step) {
            self.actions.push(Action::Restore { slot, step });
            self.state = Some(step);
        }
    }

    fn advance(&mut self, to: usize) {
        let from = self.state.expect("a known state");
        if to > from {
            self.actions.push(Action::Advance { from, to });
            self.state = Some(to);
        }
    }

    fn adjoint(&mut self, step: usize) {
        self.actions.push(if std::mem::take(&mut self.first) {
            Action::FirstReverse { step }
        } else {
            Action::Reverse { step }
        });
        self.state = None;
    }
}

/// Where to put the next checkpoint when reversing `n >= 2` steps with `s >= 2` slots (the
/// segment's initial state in one of them): a split `m` minimising
/// `m + t(n − m, s − 1) + t(m, s)`, the largest such (fewest states restored twice).
fn split(n: usize, s: usize) -> usize {
    let t = |n, s| optimal_forward_steps(n, s).expect("at least one slot");
    let mut best = (usize::MAX, 1);
    for m in 1..n {
        let cost = m + t(n - m, s - 1) + t(m, s);
        if cost <= best.0 {
            best = (cost, m);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fewest forward steps by dynamic programming over every first checkpoint position:
    /// `T(n, s)` with the segment's initial state stored and `s − 1` more slots.
    fn brute_force(n_max: usize, s_max: usize) -> Vec<Vec<usize>> {
        let mut t = vec![vec![0usize; s_max + 1]; n_max + 1];
        for n in 2..=n_max {
            t[n][1] = n * (n - 1) / 2;
            for s in 2..=s_max {
                t[n][s] = (1..n).map(|m| m + t[n - m][s - 1] + t[m][s]).min().expect("n >= 2");
            }
        }
        t
    }

    /// Carries out a schedule on a model whose state is its step number: every action must find
    /// the state it expects, the adjoints must come from `n − 1` down to `0` each from its own
    /// state, and no more than `slots` slots may be in use.
    fn simulate(s: &Schedule) {
        let mut held: Option<usize> = Some(0); // the run starts from the initial state
        let mut slots: Vec<Option<usize>> = vec![None; s.slots()];
        let mut next_adjoint = s.steps();
        for (k, a) in s.actions().iter().enumerate() {
            match *a {
                Action::Store { slot, step } => {
                    assert_eq!(held, Some(step), "action {k}: store of step {step}");
                    slots[slot] = Some(step);
                }
                Action::Restore { slot, step } => {
                    assert_eq!(slots[slot], Some(step), "action {k}: slot {slot} does not hold {step}");
                    held = Some(step);
                }
                Action::Advance { from, to } => {
                    assert_eq!(held, Some(from), "action {k}: advance from {from}");
                    assert!(to > from && to < s.steps());
                    held = Some(to);
                }
                Action::FirstReverse { step } | Action::Reverse { step } => {
                    assert_eq!(matches!(a, Action::FirstReverse { .. }), next_adjoint == s.steps(), "action {k}");
                    assert_eq!(held, Some(step), "action {k}: adjoint of {step} from another state");
                    assert_eq!(step + 1, next_adjoint, "action {k}: adjoints out of order");
                    next_adjoint = step;
                    held = None;
                }
            }
        }
        assert_eq!(next_adjoint, 0, "not every step reversed");
    }

    #[test]
    fn the_schedule_is_optimal_and_the_closed_form_is_the_optimum() {
        let t = brute_force(30, 5);
        for n in 1..=30 {
            for s in 1..=5 {
                let schedule = Schedule::binomial(n, s).expect("a slot");
                simulate(&schedule);
                assert_eq!(optimal_forward_steps(n, s), Some(t[n][s]), "closed form, n = {n}, s = {s}");
                assert_eq!(schedule.forward_steps(), t[n][s], "schedule, n = {n}, s = {s}");
            }
        }
    }

    #[test]
    fn without_a_budget_every_step_is_stored() {
        for n in [1, 2, 7, 40] {
            let s = Schedule::store_all(n);
            simulate(&s);
            assert_eq!(s.recomputed(), 0);
            let mut stored: Vec<usize> = s
                .actions()
                .iter()
                .filter_map(|a| if let Action::Store { step, .. } = a { Some(*step) } else { None })
                .collect();
            stored.sort_unstable();
            assert_eq!(stored, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn larger_runs_are_valid_and_optimal() {
        for (n, s) in [(1000, 10), (500, 3), (200, 1), (64, 64), (100, 200)] {
            let schedule = Schedule::binomial(n, s).expect("a slot");
            simulate(&schedule);
            assert_eq!(Some(schedule.forward_steps()), optimal_forward_steps(n, s), "n = {n}, s = {s}");
        }
        assert_eq!(Schedule::binomial(5, 0), Err(ScheduleError::NoSlot { steps: 5 }));
        assert!(Schedule::binomial(0, 0).expect("nothing to do").actions().is_empty());
    }

    #[test]
    fn a_budget_in_bytes_gives_the_slots_it_holds() {
        // 10 000 bytes of states of 1 024 bytes: 9 slots.
        assert_eq!(Schedule::within(100, 10_000, 1_024), Schedule::binomial(100, 9));
        // A budget for more states than steps stores every step.
        assert_eq!(Schedule::within(20, 1 << 30, 1_024), Ok(Schedule::store_all(20)));
        assert_eq!(Schedule::within(0, 0, 1_024).map(|s| s.actions().len()), Ok(0));
        let e = Schedule::within(100, 1_000, 1_024).unwrap_err();
        assert_eq!(e, ScheduleError::Budget { steps: 100, budget: 1_000, state: 1_024 });
        let text = e.to_string();
        assert!(text.contains("1000 bytes") && text.contains("at least 1024 bytes"), "{text}");
        assert_eq!(Schedule::binomial(10, 3).unwrap().held_in(), Held::OnExecutor);
        assert_eq!(Schedule::binomial(10, 3).unwrap().held(Held::OnHost).held_in(), Held::OnHost);
    }

    /// `reverse` with the checkpoints saved to host memory runs the same steps on the same states
    /// as with them on the executor, and reports the memory held.
    #[test]
    fn checkpoints_held_on_the_host_restore_the_same_states() {
        use crate::field::{Field1, Shape1};
        use crate::Host;
        let shape = Shape1::new([5]).halo(1);
        let run = |schedule: &Schedule| {
            let mut state = [Field1::<f64>::from_fn(shape, |g| 0.5 + g[0] as f64)];
            let mut seen = Vec::new();
            let r = reverse(
                &Host,
                schedule,
                &mut state,
                &mut seen,
                |_, i, s: &mut [Field1<f64>]| -> Result<(), LaunchError> {
                    s[0] = Field1::from_fn(shape, |g| (s[0].get(g).unwrap() * (1.1 + i as f64)).sin());
                    Ok(())
                },
                |seen, i, _, s| {
                    seen.push((i, s[0].to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>()));
                    s[0] = Field1::filled(shape, f64::NAN); // the run must restore what it needs
                    Ok(())
                },
            )
            .unwrap();
            (seen, r)
        };
        let schedule = Schedule::binomial(23, 4).unwrap();
        let (on_exec, r1) = run(&schedule);
        let (on_host, r2) = run(&schedule.clone().held(Held::OnHost));
        assert_eq!(on_exec, on_host);
        assert_eq!((r1.forward_steps, r1.slots_allocated, r1.host_bytes), (r2.forward_steps, 4, 0));
        assert_eq!(r2.host_bytes, 4 * shape.len() * 8);
        assert_eq!(on_exec.len(), 23);
    }

    /// The gradient of a nonlinear scalar recurrence through a checkpointed schedule equals the
    /// one through stored states, bit for bit.
    #[test]
    fn a_checkpointed_gradient_equals_the_stored_one() {
        let n = 37;
        let a: Vec<f64> = (0..n).map(|i| 1.0 + 0.1 * ((i * 7919) % 13) as f64 / 13.0).collect();
        let step = |i: usize, x: f64| (x * a[i]).sin() + 0.5 * x;
        let adjoint = |i: usize, x: f64, bar: f64| bar * ((x * a[i]).cos() * a[i] + 0.5);
        let run = |schedule: &Schedule| {
            let (mut x, mut bar) = (0.3, 1.0);
            let mut slots = vec![0.0; schedule.slots()];
            for action in schedule.actions() {
                match *action {
                    Action::Store { slot, .. } => slots[slot] = x,
                    Action::Restore { slot, .. } => x = slots[slot],
                    Action::Advance { from, to } => (from..to).for_each(|i| x = step(i, x)),
                    Action::FirstReverse { step } | Action::Reverse { step } => bar = adjoint(step, x, bar),
                }
            }
            bar
        };
        let stored = run(&Schedule::store_all(n));
        // A finite-difference check that the stored gradient is the derivative.
        let forward = |x0: f64| (0..n).fold(x0, |x, i| step(i, x));
        let fd = (forward(0.3 + 1e-6) - forward(0.3 - 1e-6)) / 2e-6;
        assert!((fd - stored).abs() <= 1e-5 * stored.abs().max(1.0), "{fd} vs {stored}");
        for s in 1..6 {
            assert_eq!(run(&Schedule::binomial(n, s).expect("a slot")).to_bits(), stored.to_bits(), "{s} slots");
        }
    }
}
