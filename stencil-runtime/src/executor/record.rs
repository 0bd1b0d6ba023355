//! [`Recorded`]: a time step recorded once and replayed (a CUDA graph on a GPU: one launch per
//! step instead of one per kernel), with the state it works on borrowed for as long as it lives.

use super::Executor;
use crate::stencil::launch::LaunchError;

/// The step closure a [`Recorded`] keeps (run again on executors that do not record).
type Step<'a, E, F> = Box<dyn FnMut(&E, &mut F) -> Result<(), LaunchError> + 'a>;

/// A step over a state `F` (e.g. a model's fields), recorded on an executor. The recording holds
/// the addresses of the state's fields, so the state stays mutably borrowed while it lives: no
/// field can be dropped, reallocated or swapped under it. Swap buffers by recording an even
/// number of steps (`f → g`, then `g → f`).
///
/// On the host nothing is recorded: [`Recorded::replay`] runs the step.
pub struct Recorded<'a, E: Executor, F> {
    exec: E,
    state: &'a mut F,
    step: Step<'a, E, F>,
    recording: Option<E::Recording>,
}

impl<'a, E: Executor, F> Recorded<'a, E, F> {
    /// Records `step` over `state` on `exec` (the step does not run now). Everything the step
    /// issues must be executor work on `state`'s fields: a host read (download, read_range,
    /// synchronize) inside it is an error on a GPU. Run the step once before recording it, so
    /// that its kernels are compiled and tuned (tuning needs the stream to run, so a launch
    /// first seen inside a recording takes the default strategy) and its launches checked.
    /// With the environment variable `STENCIL_RECORD=0` nothing is recorded and every replay
    /// runs the step (e.g. to profile its kernels one by one, or to compare); a distributed
    /// executor records a step over several GPUs only with `STENCIL_RECORD=1`.
    pub fn new(
        exec: &E,
        state: &'a mut F,
        mut step: impl FnMut(&E, &mut F) -> Result<(), LaunchError> + 'a,
    ) -> Result<Self, LaunchError> {
        let recording = match std::env::var("STENCIL_RECORD").as_deref() {
            Ok("0") => None,
            _ => {
                let state: &mut F = state;
                exec.record(&mut |e| step(e, state))?
            }
        };
        Ok(Recorded { exec: exec.clone(), state, step: Box::new(step), recording })
    }

    /// Issues the step once more (on a GPU: one graph launch; returns without waiting).
    pub fn replay(&mut self) -> Result<(), LaunchError> {
        match &self.recording {
            Some(r) => self.exec.replay(r),
            None => (self.step)(&self.exec, self.state),
        }
    }

    /// Whether the step is replayed from a recording (a GPU) rather than run again (the host).
    pub fn is_recorded(&self) -> bool {
        self.recording.is_some()
    }

    /// The state, e.g. to download a field between replays (that waits for the replays issued).
    pub fn state(&self) -> &F {
        self.state
    }
}
