//! The time loop of the example models, written once ([`run`]): restart from a checkpoint, run
//! to the end in segments that stop where a checkpoint is due, call back after every step, and
//! write the checkpoints. A model takes part by implementing [`Stepping`] (how it advances and
//! what its checkpoint holds) and by being built from a checkpoint or from its initial state.
//!
//! A segment is handed to the model whole, so a model that records several steps as one (a pair
//! of steps replayed as one CUDA graph) keeps doing so between checkpoints.

use stencil_runtime::io::checkpoint::Checkpoint;

use crate::checkpoint::{Error, Plan};

/// What a checkpoint of a run must match: the model's name (with the numerics a restart must
/// share), the global grid, the fields and the settings.
pub struct Identity {
    /// The name in the checkpoint.
    pub name: String,
    /// The global grid's interior extent.
    pub grid: Vec<usize>,
    /// The fields, by name.
    pub fields: Vec<&'static str>,
    /// Scalars a restart must match exactly.
    pub settings: Vec<(&'static str, f64)>,
}

/// A model's run as the time loop drives it.
pub trait Stepping {
    /// Steps run since the start (a restart's earlier steps included) and the model time.
    fn clock(&self) -> (usize, f64);
    /// Whether the run has reached its end.
    fn finished(&self) -> bool;
    /// Runs up to `steps` steps, fewer where the run ends first, calling `after_step(step, time)`
    /// after each.
    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error>;
    /// A checkpoint of the current state (every field of `id.fields`), handed to `write`.
    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error>;
}

/// Runs a model to its end. The checkpoint `plan.restart`, if given, is read and checked against
/// `id` first, before `build` makes the model from it (or from the initial state, given `None`),
/// so that a restart that does not fit is refused before anything is allocated. Writes a
/// checkpoint every `plan.every` steps and after the last (files named by `plan.model`);
/// `after_step(step, time)` after every step. Returns the model and the first step run (0
/// without a restart).
pub fn run<M: Stepping>(
    id: &Identity,
    plan: &Plan,
    build: impl FnOnce(Option<&Checkpoint<'static>>) -> Result<M, Error>,
    mut after_step: impl FnMut(usize, f64),
) -> Result<(M, usize), Error> {
    let named = Plan { model: id.name.clone(), ..plan.clone() };
    let restart = named.load(&id.grid, &id.fields, &id.settings)?;
    let mut model = build(restart.as_ref())?;
    let start = model.clock().0;
    while !model.finished() {
        let done = model.clock().0;
        let segment = plan.every.map_or(usize::MAX, |n| (done / n + 1) * n - done);
        model.advance(segment, &mut after_step)?;
        let (step, _) = model.clock();
        if plan.due(step, model.finished()) {
            model.save(id, &mut |c| plan.save(c, step))?;
        }
    }
    Ok((model, start))
}
