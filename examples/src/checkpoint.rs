//! Checkpoint and restart of the example models (`--checkpoint-every N`, `--restart FILE`): the
//! options, the plan of a run (where and how often it writes, where it restarts from) and the
//! helpers a model's [`crate::driver::Stepping`] uses to write and read its state. What each
//! model's checkpoint holds is said next to its run function in the model's module.
//!
//! A restarted run does the same steps on the same values as an uninterrupted one, so a run of
//! `2N` steps and a run of `N` steps, a checkpoint and a restart for `N` more give the same
//! fields, bit for bit (`tests/checkpoint_restart.rs`). A checkpoint holds every field of the
//! model's state with its halo, the step, the time, the scalars a step depends on and the grid;
//! a restart refuses a checkpoint of another model, grid, precision, field set, setting or
//! decomposition with an error that names the difference.
//!
//! Files: `DIR/MODEL-STEP.ckpt` (the step with 8 digits). The drivers run on any executor, the
//! distributed one included: a checkpoint holds the global fields, written by one process
//! ([`Plan::written_by`]), and a restart may run on another placement (other subdomains, other
//! ranks, one GPU).

use std::path::{Path, PathBuf};

use stencil_runtime::io::checkpoint::{part_counts, Checkpoint};
use stencil_runtime::io::{IoElement, IoError};
use stencil_runtime::prelude::*;
use stencil_runtime::Element;

/// A boxed error, as the models return them.
pub type Error = Box<dyn std::error::Error>;

/// The checkpoint options of an example binary.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CheckpointArgs {
    /// Write a checkpoint every N steps (into --checkpoint-dir), and after the last step.
    #[arg(long, value_name = "N")]
    pub checkpoint_every: Option<usize>,
    /// Folder for the checkpoints (created if missing).
    #[arg(long, value_name = "DIR", default_value = "checkpoints")]
    pub checkpoint_dir: PathBuf,
    /// Resume from this checkpoint (for a decomposed run, the name without `.part-I-of-N`), run
    /// with the settings it was written with.
    #[arg(long, value_name = "FILE")]
    pub restart: Option<PathBuf>,
    /// Check the whole state for values that are not finite (NaN, infinity) every N steps (a
    /// download of every field); checkpoints are always checked before they are written.
    #[arg(long, value_name = "N")]
    pub check_every: Option<usize>,
    /// Write every field of the state as `.npy` every N steps (into --output-dir, as
    /// `MODEL-STEP-FIELD.npy`; checked like a checkpoint first).
    #[arg(long, value_name = "N")]
    pub output_every: Option<usize>,
    /// Folder for the `.npy` snapshots of --output-every (created if missing).
    #[arg(long, value_name = "DIR", default_value = "snapshots")]
    pub output_dir: PathBuf,
}

impl CheckpointArgs {
    /// Whether the run writes, reads or checks checkpoints of its state.
    pub fn active(&self) -> bool {
        self.checkpoint_every.is_some()
            || self.restart.is_some()
            || self.check_every.is_some()
            || self.output_every.is_some()
    }

    /// The plan of binary `bin` (rank 0 writes), checked, saying where checkpoints go.
    pub fn plan(&self, bin: &str, processes: &crate::placement::Processes) -> Result<Plan, Error> {
        self.check()?;
        let plan = Plan::new(bin, self).written_by(processes.world().rank() == 0);
        if let Some(n) = plan.every {
            println!("checkpoints every {n} steps into {}", plan.dir.display());
        }
        Ok(plan)
    }

    /// Refuses `--checkpoint-every 0`.
    pub fn check(&self) -> Result<(), Error> {
        if [self.checkpoint_every, self.check_every, self.output_every].contains(&Some(0)) {
            return Err(
                "--checkpoint-every, --check-every or --output-every 0: give a number of steps of at least 1".into()
            );
        }
        Ok(())
    }
}

/// Where and how often a run writes checkpoints, and where it restarts from.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The model's name in file names and checkpoints.
    pub model: String,
    /// Write every this many steps (`None`: never).
    pub every: Option<usize>,
    /// The folder of the checkpoints.
    pub dir: PathBuf,
    /// The checkpoint to resume from.
    pub restart: Option<PathBuf>,
    /// Whether this process writes the global checkpoints (rank 0 of a run over ranks: every
    /// rank computes the same global field, one writes it).
    pub writer: bool,
    /// Check the state for values that are not finite every this many steps.
    pub check_every: Option<usize>,
    /// Write the state as `.npy` snapshots every this many steps, into this folder.
    pub output: Option<(usize, PathBuf)>,
}

impl Plan {
    /// The plan of a binary's options for `model`.
    pub fn new(model: &str, args: &CheckpointArgs) -> Self {
        Plan {
            model: model.into(),
            every: args.checkpoint_every,
            dir: args.checkpoint_dir.clone(),
            restart: args.restart.clone(),
            writer: true,
            check_every: args.check_every,
            output: args.output_every.map(|n| (n, args.output_dir.clone())),
        }
    }

    /// This plan, writing only where `writer` (rank 0 of a run over ranks).
    pub fn written_by(mut self, writer: bool) -> Self {
        self.writer = writer;
        self
    }

    /// A plan that neither writes nor restarts.
    pub fn none() -> Self {
        Plan {
            model: String::new(),
            every: None,
            dir: PathBuf::new(),
            restart: None,
            writer: true,
            check_every: None,
            output: None,
        }
    }

    /// A plan that writes every `every` steps into `dir` and does not restart.
    pub fn every(model: &str, every: usize, dir: &Path) -> Self {
        Plan {
            model: model.into(),
            every: Some(every),
            dir: dir.into(),
            restart: None,
            writer: true,
            check_every: None,
            output: None,
        }
    }

    /// The same plan restarting from `path`.
    pub fn restart_from(mut self, path: &Path) -> Self {
        self.restart = Some(path.into());
        self
    }

    /// The checkpoint file of step `step` (without a part suffix).
    pub fn path(&self, step: usize) -> PathBuf {
        self.dir.join(format!("{}-{step:08}.ckpt", self.model))
    }

    /// Writes the `.npy` snapshots of `c` (step `step`) where this process is the writer.
    pub(crate) fn write_snapshots(&self, c: &Checkpoint<'_>, step: usize) -> Result<(), Error> {
        let Some((_, dir)) = self.output.as_ref().filter(|_| self.writer) else { return Ok(()) };
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        c.write_npy(dir, &format!("{}-{step:08}", self.model))?;
        Ok(())
    }

    /// Whether a checkpoint is due after step `step` (`last`: the run's last step).
    pub(crate) fn due(&self, step: usize, last: bool) -> bool {
        self.every.is_some_and(|n| step.is_multiple_of(n) || last)
    }

    /// Writes a single-domain checkpoint of step `step` (where this process is the writer).
    pub(crate) fn save(&self, c: &Checkpoint<'_>, step: usize) -> Result<(), Error> {
        if !self.writer {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        c.write(self.path(step))?;
        Ok(())
    }

    /// The restart checkpoint, checked against the run: model, grid, field set and settings.
    pub(crate) fn load(
        &self,
        global: &[usize],
        fields: &[&str],
        settings: &[(&str, f64)],
    ) -> Result<Option<Checkpoint<'static>>, Error> {
        let Some(path) = &self.restart else { return Ok(None) };
        if !path.exists() && !part_counts(path).is_empty() {
            return Err(IoError::Mismatch {
                path: path.clone(),
                what: "decomposition".into(),
                expected: "a single domain".into(),
                found: "a decomposed run's parts (`.part-I-of-N`)".into(),
            }
            .into());
        }
        let c = Checkpoint::read(path)?;
        check(&c, &self.model, global, fields, settings)?;
        c.expect_part(None)?;
        Ok(Some(c))
    }
}

/// Checks a checkpoint against a run: model, grid, fields and settings.
fn check(
    c: &Checkpoint<'_>,
    model: &str,
    global: &[usize],
    fields: &[&str],
    settings: &[(&str, f64)],
) -> Result<(), IoError> {
    c.expect(model, global, fields)?;
    settings.iter().try_for_each(|(name, v)| c.expect_scalar(name, *v))
}

/// Per-step records (`rows[s][r]`, e.g. receiver traces) as a 2D field indexed `[r, s]`, so that
/// a checkpoint carries them and a restarted run writes the whole record.
pub(crate) fn records_field<T: Element>(rows: &[Vec<T>], width: usize) -> Field2<T> {
    Field2::from_fn(Shape2::new([width, rows.len()]).align(1), |[r, s]| rows[s as usize][r as usize])
}

/// The first `steps` records of width `width` of checkpoint field `name`
/// ([`records_field`]'s inverse).
pub(crate) fn records_of<T: IoElement>(
    c: &Checkpoint<'_>,
    name: &str,
    width: usize,
    steps: usize,
) -> Result<Vec<Vec<T>>, IoError> {
    let f = c.field::<T, 2>(name, &Shape2::new([width, steps]).align(1))?;
    Ok((0..steps as isize).map(|s| (0..width as isize).map(|r| f.get([r, s]).expect("in")).collect()).collect())
}

/// Checks that field `what` of checkpoint `c` (`found`) is this run's (`expected`), point by
/// point: e.g. a material model, where another one is another run.
pub(crate) fn expect_same<T: Element, const D: usize>(
    c: &Checkpoint<'_>,
    what: &str,
    expected: &Field<T, D>,
    found: &Field<T, D>,
) -> Result<(), IoError> {
    let differ = expected.as_slice().iter().zip(found.as_slice()).filter(|(a, b)| a != b).count();
    if differ > 0 {
        return Err(IoError::Mismatch {
            path: c.path().to_path_buf(),
            what: what.into(),
            expected: "this run's".into(),
            found: format!("another one, at {differ} of {} points", found.shape().points()),
        });
    }
    Ok(())
}

/// 52 bits of an FNV-1a hash of `values` (exact as an `f64` setting): a setting for a list,
/// e.g. receiver positions.
pub(crate) fn hash_setting(values: impl IntoIterator<Item = f64>) -> f64 {
    let hash =
        values.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, v| (h ^ v.to_bits()).wrapping_mul(0x0100_0000_01b3));
    (hash >> 12) as f64
}

/// Refuses a checkpoint of step `step`, past the run's last step `last`.
pub(crate) fn within_run(step: usize, last: usize) -> Result<(), Error> {
    if step > last {
        return Err(format!("the checkpoint is of step {step}, past the run's last step {last}").into());
    }
    Ok(())
}

/// A checkpoint of `fields` (names and host fields) with `settings` as scalars.
pub(crate) fn snapshot_of<'a, T: IoElement, const D: usize>(
    model: &str,
    step: usize,
    time: f64,
    global: &[usize],
    settings: &[(&str, f64)],
    fields: &[(&str, &'a Field<T, D>)],
) -> Result<Checkpoint<'a>, IoError> {
    let mut c = Checkpoint::new(model, step as u64, time, global);
    settings.iter().for_each(|(n, v)| c.scalar(n, *v));
    for (name, f) in fields {
        c.push(name, f)?;
    }
    Ok(c)
}
