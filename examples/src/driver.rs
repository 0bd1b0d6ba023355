//! The time loop of the example models, written once ([`run`]): restart from a checkpoint, run
//! to the end in segments that stop where a checkpoint is due, call back after every step, and
//! write the checkpoints. A model takes part by implementing [`Stepping`] (how it advances and
//! what its checkpoint holds) and by being built from a checkpoint or from its initial state.
//!
//! A segment is handed to the model whole, so a model that records several steps as one (a pair
//! of steps replayed as one CUDA graph) keeps doing so between checkpoints.
//!
//! A model whose state is named fields on an executor ([`Named`]), advanced a step at a time,
//! runs through [`run_fields`] instead: its clock, checkpoints, restart, checks and snapshots
//! come from its fields' names, declared once.

use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::io::IoElement;
use stencil_runtime::prelude::*;
use stencil_runtime::{Element, Executor};

use crate::checkpoint::{self, Error, Plan};

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
/// checkpoint every `plan.every` steps and after the last (files named by `plan.model`), and
/// checks the state every `plan.check_every` steps and before each checkpoint and snapshot:
/// values that are not finite stop the run with an error; writes the state as `.npy` snapshots
/// every `plan.output` steps; `after_step(step, time)` after every step. Returns the model and the first step run (0
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
    let next = |done: usize, every: Option<usize>| every.map_or(usize::MAX, |n| (done / n + 1) * n - done);
    while !model.finished() {
        let done = model.clock().0;
        let output_every = plan.output.as_ref().map(|(n, _)| *n);
        let segment = next(done, plan.every).min(next(done, plan.check_every)).min(next(done, output_every));
        model.advance(segment, &mut after_step)?;
        let (step, time) = model.clock();
        if step == done && !model.finished() {
            return Err(format!("the run stopped advancing at step {step} (t = {time}) before its end").into());
        }
        let checked = plan.check_every.is_some_and(|n| step.is_multiple_of(n));
        let output = output_every.is_some_and(|n| step.is_multiple_of(n));
        let saved = plan.due(step, model.finished());
        if checked || output || saved {
            model.save(id, &mut |c| {
                finite(c, step, time)?;
                if output {
                    plan.write_snapshots(c, step)?;
                }
                if saved {
                    plan.save(c, step)?;
                }
                Ok(())
            })?;
        }
    }
    Ok((model, start))
}

/// The fields of a model's state (`F`: their type on the executor), named by [`Identity::fields`]
/// in the same order: what [`run_fields`] saves, restores, checks and writes as snapshots.
pub trait Named<F> {
    /// The fields, in the order of their names.
    fn fields(&self) -> Vec<&F>;
    /// Scalars of the state a restart needs besides its fields and clock (e.g. the time step in
    /// use); [`Restart::checkpoint`] holds them.
    fn scalars(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Where a run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum End {
    /// After this many steps.
    Steps(usize),
    /// At this model time.
    Time(f64),
}

/// A run of [`run_fields`]: what its checkpoints must match, its fields' shape, its end and the
/// records its steps make.
pub struct Spec<const D: usize> {
    /// The checkpoint identity; its `fields` name the state's fields.
    pub id: Identity,
    /// The shape of every field of the state.
    pub shape: Shape<D>,
    /// Where the run ends.
    pub end: End,
    /// The name in checkpoints and the width (values per step) of the record each step makes
    /// (e.g. the receivers' samples), kept for every step; `None`: no records.
    pub records: Option<(&'static str, usize)>,
    /// Steps a run's clock leaves out (they compile and tune the kernels): the executor is
    /// waited for after the run's step `warm_up` and after its last step, before `after_step`
    /// is told of them, so that the time between the two counts the work of the steps between,
    /// not only their issue (a GPU runs behind the host).
    pub warm_up: usize,
}

/// What a step of [`run_fields`] records: values it has, or values still on their way (e.g.
/// receivers sampled without waiting for the GPU, [`SparsePoints::sample_later`]), collected a
/// few steps later, so that the host issues the next steps meanwhile.
///
/// [`SparsePoints::sample_later`]: stencil_runtime::SparsePoints::sample_later
pub enum Record<T> {
    /// The values.
    Now(Vec<T>),
    /// A read in flight: the function waits for it and returns the values.
    Later(Box<dyn FnOnce() -> Result<Vec<T>, Error>>),
}

impl<T> Record<T> {
    /// No values (a model without records).
    pub fn none() -> Self {
        Record::Now(Vec::new())
    }

    fn get(self) -> Result<Vec<T>, Error> {
        match self {
            Record::Now(values) => Ok(values),
            Record::Later(wait) => wait(),
        }
    }
}

/// How many steps' [`Record::Later`] records may be in flight: the host runs at most this many
/// steps ahead of the oldest read it has not collected.
const RECORDS_IN_FLIGHT: usize = 8;

/// What a restart hands the build of [`run_fields`].
pub struct Restart<'c, T: Element, const D: usize> {
    /// The state's fields as the checkpoint holds them, in the order of their names.
    pub fields: Vec<Field<T, D>>,
    /// The checkpoint (its step, time and scalars).
    pub checkpoint: &'c Checkpoint<'static>,
}

/// What [`run_fields`] ends with.
pub struct Finished<S, T> {
    /// The state at the end.
    pub state: S,
    /// Steps run since the start (a restart's earlier steps included).
    pub steps: usize,
    /// The records (`records[s]` made by step `s + 1`, a restart's earlier ones included).
    pub records: Vec<Vec<T>>,
    /// The first step run: 0, or the step of the checkpoint it restarted from.
    pub start: usize,
}

/// A run of [`run_fields`] as the time loop drives it.
struct Fields<'a, E, T, const D: usize, S, F> {
    exec: &'a E,
    spec: &'a Spec<D>,
    state: S,
    /// The step the run started at (0, or a restart's).
    first: usize,
    step: usize,
    time: f64,
    records: Vec<Vec<T>>,
    /// Records of the last steps, not yet collected (oldest first).
    in_flight: std::collections::VecDeque<Record<T>>,
    step_fn: F,
}

impl<E, T, const D: usize, S, F> Stepping for Fields<'_, E, T, D, S, F>
where
    E: Executor,
    T: IoElement,
    S: Named<E::Field<T, D>>,
    F: FnMut(&mut S, usize, f64) -> Result<(f64, Record<T>), Error>,
{
    fn clock(&self) -> (usize, f64) {
        (self.step, self.time)
    }

    fn finished(&self) -> bool {
        match self.spec.end {
            End::Steps(n) => self.step >= n,
            End::Time(t) => self.time >= t,
        }
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        for _ in 0..steps {
            if self.finished() {
                break;
            }
            let (time, record) = (self.step_fn)(&mut self.state, self.step, self.time)?;
            if self.spec.records.is_some() {
                self.in_flight.push_back(record);
                if self.in_flight.len() > RECORDS_IN_FLIGHT {
                    self.collect(1)?;
                }
            }
            (self.step, self.time) = (self.step + 1, time);
            if self.step == self.first + self.spec.warm_up || self.finished() {
                self.exec.synchronize()?;
            }
            after_step(self.step, time);
        }
        // A segment ends before a checkpoint, a check or the end: every record is in by then.
        self.collect(self.in_flight.len())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let host = self.state.fields().into_iter().map(|f| self.exec.download(f)).collect::<Result<Vec<_>, _>>()?;
        let records = self.spec.records.map(|(name, width)| (name, checkpoint::records_field(&self.records, width)));
        let mut c = Checkpoint::new(&id.name, self.step as u64, self.time, &id.grid);
        id.settings.iter().chain(&self.state.scalars()).for_each(|(name, v)| c.scalar(name, *v));
        for (name, f) in id.fields.iter().zip(&host) {
            c.push(name, f)?;
        }
        if let Some((name, f)) = &records {
            c.push(name, f)?;
        }
        write(&c)
    }
}

impl<E, T, const D: usize, S, F> Fields<'_, E, T, D, S, F> {
    /// Collects the `n` oldest records in flight.
    fn collect(&mut self, n: usize) -> Result<(), Error> {
        for record in self.in_flight.drain(..n) {
            self.records.push(record.get()?);
        }
        Ok(())
    }
}

/// Runs a model whose state is named fields on `exec` to its end through [`run`]: `build` makes
/// the state from the initial one (given `None`) or from a restart (the fields of
/// `spec.id.fields`, read from the checkpoint; the step and the time start at the
/// checkpoint's), and `step(state, step, time)` runs step `step + 1`, returning the time after
/// it and its record ([`Record::none`] without records). `after_step` may run before the
/// step's record is in.
pub fn run_fields<E: Executor, T: IoElement, const D: usize, S: Named<E::Field<T, D>>>(
    exec: &E,
    spec: &Spec<D>,
    plan: &Plan,
    build: impl FnOnce(Option<Restart<'_, T, D>>) -> Result<S, Error>,
    step: impl FnMut(&mut S, usize, f64) -> Result<(f64, Record<T>), Error>,
    after_step: impl FnMut(usize, f64),
) -> Result<Finished<S, T>, Error> {
    let Spec { id, shape, records, .. } = spec;
    let fields = id.fields.iter().copied().chain(records.map(|(name, _)| name)).collect();
    let full = Identity { name: id.name.clone(), grid: id.grid.clone(), fields, settings: id.settings.clone() };
    let start = |c: Option<&Checkpoint<'static>>| -> Result<_, Error> {
        let restart = match c {
            Some(c) => {
                let fields = id.fields.iter().map(|name| c.field::<T, D>(name, shape)).collect::<Result<_, _>>()?;
                Some(Restart { fields, checkpoint: c })
            }
            None => None,
        };
        let state = build(restart)?;
        let (at, time) = c.map_or((0, 0.0), |c| (c.step as usize, c.time));
        let kept = match (c, records) {
            (Some(c), Some((name, width))) => checkpoint::records_of(c, name, *width, at)?,
            _ => Vec::new(),
        };
        let in_flight = Default::default();
        Ok(Fields { exec, spec, state, first: at, step: at, time, records: kept, in_flight, step_fn: step })
    };
    let (run, start) = run(&full, plan, start, after_step)?;
    Ok(Finished { state: run.state, steps: run.step, records: run.records, start })
}

/// Refuses a state (as its checkpoint holds it) with values that are not finite, naming the
/// field, the step and the time.
/// `N` results as one: the first error, or the `N` values.
pub fn all<T, E, const N: usize>(results: [Result<T, E>; N]) -> Result<[T; N], E> {
    let mut out = Vec::with_capacity(N);
    for r in results {
        out.push(r?);
    }
    Ok(out.try_into().unwrap_or_else(|_| unreachable!("{N} values from {N} results")))
}

fn finite(c: &Checkpoint<'_>, step: usize, time: f64) -> Result<(), Error> {
    match c.non_finite() {
        None => Ok(()),
        Some((field, count)) => Err(format!(
            "after step {step} (t = {time}) field `{field}` holds {count} values that are not finite (NaN or \
             infinity): the run has become unstable or started from a broken state; lower the time step or check \
             the input (no checkpoint of this state is written)"
        )
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of `end` steps that records the segments it is given and the steps it saves at;
    /// `stall` makes it stop advancing at that step.
    struct Toy {
        step: usize,
        end: usize,
        stall: Option<usize>,
        /// The step from which its state holds a NaN.
        nan_from: Option<usize>,
        segments: Vec<usize>,
        saved: std::cell::RefCell<Vec<usize>>,
    }

    impl Stepping for Toy {
        fn clock(&self) -> (usize, f64) {
            (self.step, self.step as f64 * 0.5)
        }
        fn finished(&self) -> bool {
            self.step >= self.end
        }
        fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
            self.segments.push(steps.min(self.end - self.step));
            for _ in 0..steps {
                if self.finished() || self.stall == Some(self.step) {
                    break;
                }
                self.step += 1;
                after_step(self.step, self.clock().1);
            }
            Ok(())
        }
        fn save(
            &self,
            id: &Identity,
            write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>,
        ) -> Result<(), Error> {
            self.saved.borrow_mut().push(self.step);
            let bad = self.nan_from.is_some_and(|k| self.step >= k);
            let x = stencil_runtime::Field1::<f64>::from_fn(stencil_runtime::Shape1::new([4]), |[i]| {
                if bad && i == 2 {
                    f64::NAN
                } else {
                    i as f64
                }
            });
            let mut c = Checkpoint::new(&id.name, self.step as u64, self.clock().1, &id.grid);
            c.push("x", &x)?;
            write(&c)
        }
    }

    /// The driver's loop with the toy: the steps the callback saw, and the toy (its segments
    /// and the steps it was saved at).
    fn drive(end: usize, every: Option<usize>, stall: Option<usize>) -> Result<(Vec<usize>, Toy), Error> {
        // Nothing written: this process is not the writer.
        let plan = Plan { every, ..Plan::every("toy", 1, std::path::Path::new("unused")) }.written_by(false);
        drive_with(end, &plan, stall, None)
    }

    /// [`drive`] with a plan and a NaN from step `nan_from`.
    fn drive_with(
        end: usize,
        plan: &Plan,
        stall: Option<usize>,
        nan_from: Option<usize>,
    ) -> Result<(Vec<usize>, Toy), Error> {
        let id = Identity { name: "toy".into(), grid: vec![4], fields: vec!["x"], settings: vec![] };
        let mut seen = Vec::new();
        let toy = |_: Option<&Checkpoint<'static>>| {
            Ok(Toy { step: 0, end, stall, nan_from, segments: vec![], saved: Default::default() })
        };
        let (toy, start) = run(&id, plan, toy, |s, t| {
            assert_eq!(t, s as f64 * 0.5);
            seen.push(s);
        })?;
        assert_eq!(start, 0);
        Ok((seen, toy))
    }

    /// A state of one named field on the host.
    struct One(stencil_runtime::Field1<f64>);

    impl Named<stencil_runtime::Field1<f64>> for One {
        fn fields(&self) -> Vec<&stencil_runtime::Field1<f64>> {
            vec![&self.0]
        }
        fn scalars(&self) -> Vec<(&'static str, f64)> {
            vec![("first", self.0.get([0]).unwrap())]
        }
    }

    #[test]
    fn named_fields_restart_with_their_records_and_end_where_the_spec_says() {
        use stencil_runtime::{Field1, Host, Shape1};
        let dir = std::env::temp_dir().join(format!("stencil-driver-named-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let shape = Shape1::new([4]);
        let id = Identity { name: "toy".into(), grid: vec![4], fields: vec!["x"], settings: vec![("k", 2.0)] };
        let spec = Spec { id, shape, end: End::Steps(6), records: Some(("seen", 2)), warm_up: 1 };
        let go = |plan: &Plan| {
            let build = |r: Option<Restart<'_, f64, 1>>| -> Result<One, Error> {
                if let Some(r) = &r {
                    assert_eq!(r.checkpoint.get_scalar("first").unwrap(), r.fields[0].get([0]).unwrap());
                }
                Ok(One(r.map_or_else(|| Field1::from_fn(shape, |[i]| i as f64), |mut r| r.fields.remove(0))))
            };
            // Records now and records collected later (every third step), in step order.
            let step = |s: &mut One, step: usize, t: f64| -> Result<(f64, Record<f64>), Error> {
                s.0 = Field1::from_fn(shape, |[i]| 2.0 * s.0.get([i]).unwrap() + 1.0);
                let values = vec![step as f64, s.0.get([3]).unwrap()];
                let record =
                    if step % 3 == 1 { Record::Later(Box::new(move || Ok(values))) } else { Record::Now(values) };
                Ok((t + 0.5, record))
            };
            run_fields(&Host, &spec, plan, build, step, |_, _| {}).unwrap()
        };
        let straight = go(&Plan::none());
        assert_eq!((straight.steps, straight.start, straight.records.len()), (6, 0, 6));
        let first: Vec<f64> = straight.records.iter().map(|r| r[0]).collect();
        assert_eq!(first, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "records in step order");
        let plan = Plan::every("toy", 3, &dir);
        go(&plan);
        let resumed = go(&Plan::none().restart_from(&plan.path(3)));
        assert_eq!((resumed.steps, resumed.start), (6, 3));
        assert_eq!((resumed.records, resumed.state.0.as_slice()), (straight.records, straight.state.0.as_slice()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn segments_end_where_checkpoints_are_due_and_every_step_is_seen_once() {
        let (seen, toy) = drive(10, Some(3), None).unwrap();
        assert_eq!(seen, (1..=10).collect::<Vec<_>>());
        assert_eq!(toy.segments, [3, 3, 3, 1]);
        assert_eq!(*toy.saved.borrow(), [3, 6, 9, 10]);
        let (seen, toy) = drive(7, None, None).unwrap();
        assert_eq!((seen.len(), toy.segments), (7, vec![7]));
        assert!(toy.saved.borrow().is_empty());
    }

    #[test]
    fn snapshots_are_written_every_n_steps_with_the_state() {
        let dir = std::env::temp_dir().join(format!("stencil-driver-npy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let plan = Plan { output: Some((4, dir.clone())), ..Plan::none() };
        let plan = Plan { model: "toy".into(), ..plan };
        let (_, toy) = drive_with(10, &plan, None, None).unwrap();
        assert_eq!(toy.segments, [4, 4, 2]);
        let mut written: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        written.sort();
        assert_eq!(written, ["toy-00000004-x.npy", "toy-00000008-x.npy"]);
        let x = stencil_runtime::io::npy::read::<f64, 1>(dir.join("toy-00000008-x.npy"), 0).unwrap();
        assert_eq!((0..4).map(|i| x.get([i]).unwrap()).collect::<Vec<_>>(), [0.0, 1.0, 2.0, 3.0]);
        // A snapshot of a broken state is refused like a checkpoint.
        std::fs::remove_dir_all(&dir).unwrap();
        let e = drive_with(10, &plan, None, Some(3)).map(drop).unwrap_err().to_string();
        assert!(e.contains("after step 4"), "{e}");
        assert!(!dir.join("toy-00000004-x.npy").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_run_that_stops_advancing_is_an_error_not_a_hang() {
        let e = drive(10, Some(4), Some(5)).map(drop).unwrap_err().to_string();
        assert!(e.contains("stopped advancing at step 5"), "{e}");
    }

    #[test]
    fn a_state_that_is_not_finite_stops_the_run_at_the_next_check_and_is_not_written() {
        let dir = std::env::temp_dir().join(format!("stencil-driver-nan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let plan = Plan { check_every: Some(2), ..Plan::every("toy", 3, &dir) };
        // Clean: checked at 2, 4, 6, 8, saved at 3, 6, 9, 10 (the last).
        let (_, toy) = drive_with(10, &plan, None, None).unwrap();
        assert_eq!(toy.segments, [2, 1, 1, 2, 2, 1, 1]);
        assert_eq!(*toy.saved.borrow(), [2, 3, 4, 6, 8, 9, 10]);
        // A NaN from step 5: found at step 6 (a check and a checkpoint), named, and not written.
        std::fs::remove_dir_all(&dir).unwrap();
        let e = drive_with(10, &plan, None, Some(5)).map(drop).unwrap_err().to_string();
        assert!(e.contains("after step 6") && e.contains("field `x`") && e.contains("1 values"), "{e}");
        assert!(plan.path(3).exists() && !plan.path(6).exists());
        // Without checks the NaN is still caught before the next checkpoint is written.
        std::fs::remove_dir_all(&dir).unwrap();
        let e = drive_with(10, &Plan::every("toy", 4, &dir), None, Some(2)).map(drop).unwrap_err().to_string();
        assert!(e.contains("after step 4"), "{e}");
        assert!(!Plan::every("toy", 4, &dir).path(4).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
