//! Checkpoint and restart of the example models (`--checkpoint-every N`, `--restart FILE`): each
//! model's run as [`crate::driver`] drives it (one time loop for all of them), resumable, writing
//! a checkpoint ([`stencil_runtime::io::checkpoint`]) every `N` steps. This module says what
//! each model's checkpoint holds and how a run is built from one.
//!
//! Each driver runs the same steps as the model's own run function (the same stencils in the
//! same order on the same values), so a run of `2N` steps and a run of `N` steps, a checkpoint
//! and a restart for `N` more give the same fields, bit for bit (`tests/checkpoint_restart.rs`
//! checks it against the models' own runs). A checkpoint holds every field of the model's state
//! with its halo, the step, the time, the scalars a step depends on (time step, CFL number,
//! the CFL step reused between computations) and the grid; a restart refuses a checkpoint of
//! another model, grid, precision, field set, setting or decomposition with an error that names
//! the difference.
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

use crate::diffusion::{self, Real};
use crate::driver::{self, Identity, Stepping};
use crate::euler::{Conserved, Euler};
use crate::swe;

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
}

impl CheckpointArgs {
    /// Whether the run writes or reads checkpoints.
    pub fn active(&self) -> bool {
        self.checkpoint_every.is_some() || self.restart.is_some()
    }

    /// Refuses `--checkpoint-every 0`.
    pub fn check(&self) -> Result<(), Error> {
        if self.checkpoint_every == Some(0) {
            return Err("--checkpoint-every 0: give a number of steps of at least 1".into());
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
        }
    }

    /// This plan, writing only where `writer` (rank 0 of a run over ranks).
    pub fn written_by(mut self, writer: bool) -> Self {
        self.writer = writer;
        self
    }

    /// A plan that neither writes nor restarts.
    pub fn none() -> Self {
        Plan { model: String::new(), every: None, dir: PathBuf::new(), restart: None, writer: true }
    }

    /// A plan that writes every `every` steps into `dir` and does not restart.
    pub fn every(model: &str, every: usize, dir: &Path) -> Self {
        Plan { model: model.into(), every: Some(every), dir: dir.into(), restart: None, writer: true }
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

// ---------------------------------------------------------------------------------------------
// diffusion3d

/// The diffusion run's settings a checkpoint must match.
fn diffusion_settings(setup: &diffusion::Setup) -> [(&'static str, f64); 3] {
    [("dt", setup.dt()), ("cfl", setup.cfl), ("sigma0", setup.sigma0)]
}

/// The diffusion model's name in checkpoints (the precision is the field's element type, which
/// a restart checks too).
const DIFFUSION: &str = "diffusion3d";

/// A diffusion run on `E` as the time loop drives it: the two buffers and the steps run.
struct DiffusionRun<'a, E: Executor, T: Real> {
    exec: &'a E,
    setup: &'a diffusion::Setup,
    buffers: [E::Field<T, 3>; 2],
    step: usize,
}

impl<E: Executor, T: Real + IoElement> Stepping for DiffusionRun<'_, E, T> {
    fn clock(&self) -> (usize, f64) {
        (self.step, self.step as f64 * self.setup.dt())
    }

    fn finished(&self) -> bool {
        self.step >= self.setup.steps
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let (from, dt) = (self.step, self.setup.dt());
        let steps = steps.min(self.setup.steps - from);
        let range = Loop3D::interior(&self.setup.shape());
        let c = self.setup.coefficients();
        let step = |e: &E, f: &E::Field<T, 3>, g: &mut E::Field<T, 3>| T::step(e, &range, &c, f, g);
        diffusion::time_loop(self.exec, steps, &mut self.buffers, step, |k| {
            after_step(from + k, (from + k) as f64 * dt)
        })?;
        self.step += steps;
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let f = self.exec.download(&self.buffers[0])?;
        let (step, time) = self.clock();
        write(&snapshot_of(&id.name, step, time, &id.grid, &id.settings, &[("f", &f)])?)
    }
}

/// [`diffusion::simulate`] with checkpoints, on any executor (subdomains too: the checkpoint
/// holds the global field, so a run may restart on another placement): from the setup's
/// initial field, or from the checkpoint `plan.restart`, to step `setup.steps`, writing a
/// checkpoint after every `plan.every` steps and after the last; returns the final field and
/// the first step run (0 without a restart). `after_step(s)` is called after step `s` (counted
/// from the start of the run, not of the restart). Pairs of steps are replayed as in
/// [`diffusion::time_loop`].
pub fn diffusion<E: Executor, T: Real + IoElement>(
    exec: &E,
    setup: &diffusion::Setup,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<(Field3<T>, usize), Error> {
    let settings = diffusion_settings(setup).to_vec();
    let id = Identity { name: DIFFUSION.into(), grid: setup.n.to_vec(), fields: vec!["f"], settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<DiffusionRun<'_, E, T>, Error> {
        let (host, step) = match c {
            Some(c) => (c.field::<T, 3>("f", &setup.shape())?, c.step as usize),
            None => (setup.initial::<T>()?, 0),
        };
        if step > setup.steps {
            return Err(format!("the checkpoint is of step {step}, past the run's last step {}", setup.steps).into());
        }
        Ok(DiffusionRun { exec, setup, buffers: [exec.upload(&host)?, exec.upload(&host)?], step })
    };
    let plan = Plan { model: DIFFUSION.into(), ..plan.clone() };
    let (run, start) = driver::run(&id, &plan, build, |s, _| after_step(s))?;
    Ok((exec.download(&run.buffers[0])?, start))
}

// ---------------------------------------------------------------------------------------------
// euler3d

/// The names of the conserved fields in checkpoints.
const EULER_FIELDS: [&str; 5] = ["rho", "rho_u", "rho_v", "rho_w", "energy"];

/// The Euler model's name in checkpoints: with its scheme, Riemann solver, limiter and
/// boundaries.
fn euler_name(e: &Euler) -> String {
    format!("euler3d {:?} {:?} {:?} {:?}", e.scheme, e.riemann, e.limiter, e.boundaries)
}

/// The Euler run's settings a checkpoint must match.
fn euler_settings(e: &Euler, dt_every: usize) -> [(&'static str, f64); 4] {
    [("cfl", e.cfl), ("gamma", e.gamma), ("gravity", e.gravity), ("dt_every", dt_every as f64)]
}

/// An Euler run on `E` as the time loop drives it: the state, its time and steps, and the CFL
/// step in use.
struct EulerRun<'a, E: Executor> {
    e: &'a Euler,
    exec: &'a E,
    s: crate::euler::State<E>,
    t: f64,
    steps: usize,
    dt_cfl: f64,
    t_end: f64,
    dt_every: usize,
}

impl<E: Executor> Stepping for EulerRun<'_, E> {
    fn clock(&self) -> (usize, f64) {
        (self.steps, self.t)
    }

    fn finished(&self) -> bool {
        self.t >= self.t_end
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let (e, exec, t_end) = (self.e, self.exec, self.t_end);
        for _ in 0..steps {
            if self.t >= t_end {
                break;
            }
            if self.steps.is_multiple_of(self.dt_every.max(1)) {
                self.dt_cfl = e.dt(exec, &self.s)?;
            }
            let dt = self.dt_cfl.min(t_end - self.t);
            if !(dt.is_finite() && dt > 0.0) {
                let t = self.t;
                return Err(
                    format!("time step {dt} at t = {t}: the state has a non-positive density or pressure").into()
                );
            }
            e.step(exec, &mut self.s, dt)?;
            self.t = if t_end - self.t <= dt { t_end } else { self.t + dt };
            self.steps += 1;
            after_step(self.steps, self.t);
        }
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let q = self.s.download(self.exec)?;
        let fields: Vec<(&str, &Field3<f64>)> = EULER_FIELDS.iter().copied().zip(q.iter()).collect();
        let mut c = snapshot_of(&id.name, self.steps, self.t, &id.grid, &id.settings, &fields)?;
        c.scalar("dt_cfl", self.dt_cfl);
        write(&c)
    }
}

/// [`Euler::run`] with checkpoints: from `q` or from `plan.restart` (its state, time, step
/// count and the CFL step in use) to time `t_end`; returns the final state, the step count and
/// the first step run. The model's name in checkpoints includes its scheme, Riemann solver,
/// limiter and boundaries, so a restart with other numerics is refused.
pub fn euler<E: Executor>(
    e: &Euler,
    exec: &E,
    q: &Conserved<Field3<f64>>,
    t_end: f64,
    dt_every: usize,
    plan: &Plan,
    after_step: impl FnMut(usize, f64),
) -> Result<(Conserved<Field3<f64>>, usize, usize), Error> {
    let (name, settings) = (euler_name(e), euler_settings(e, dt_every).to_vec());
    let id = Identity { name, grid: e.n.to_vec(), fields: EULER_FIELDS.to_vec(), settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<EulerRun<'_, E>, Error> {
        let run = |s, t, steps, dt_cfl| EulerRun { e, exec, s, t, steps, dt_cfl, t_end, dt_every };
        Ok(match c {
            Some(c) => {
                let [a, b, cc, d, f] = EULER_FIELDS.map(|name| c.field::<f64, 3>(name, &e.shape()));
                let s = crate::euler::State::new(exec, &[a?, b?, cc?, d?, f?])?;
                run(s, c.time, c.step as usize, c.get_scalar("dt_cfl")?)
            }
            None => run(crate::euler::State::new(exec, q)?, 0.0, 0, 0.0),
        })
    };
    let plan = Plan { model: "euler3d".into(), ..plan.clone() };
    let (run, start) = driver::run(&id, &plan, build, after_step)?;
    Ok((run.s.download(exec)?, run.steps, start))
}

// ---------------------------------------------------------------------------------------------
// swe2d

/// The names of the shallow-water fields in checkpoints.
const SWE_FIELDS: [&str; 3] = ["h", "hu", "hv"];

/// The shallow-water model's name in checkpoints: with its edges, so a restart with other
/// boundaries is refused.
fn swe_name(model: &swe::Model) -> String {
    format!("swe2d {:?}", model.edges)
}

/// The shallow-water run's settings a checkpoint must match.
fn swe_settings(model: &swe::Model) -> [(&'static str, f64); 3] {
    [("cfl", model.cfl), ("dx", model.dx[0]), ("dy", model.dx[1])]
}

/// A shallow-water run as the time loop drives it: the solver and the end time.
struct SweRun<E: Executor> {
    solver: swe::Solver<E>,
    t_end: f64,
}

impl<E: Executor> Stepping for SweRun<E> {
    fn clock(&self) -> (usize, f64) {
        (self.solver.steps, self.solver.t)
    }

    fn finished(&self) -> bool {
        !swe::running(self.solver.t, self.t_end)
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        for _ in 0..steps {
            if self.finished() {
                break;
            }
            self.solver.cfl_step(Some(self.t_end))?;
            after_step(self.solver.steps, self.solver.t);
        }
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let q = self.solver.state()?;
        let fields = [("h", &q.h), ("hu", &q.hu), ("hv", &q.hv)];
        let (step, time) = self.clock();
        write(&snapshot_of(&id.name, step, time, &id.grid, &id.settings, &fields)?)
    }
}

/// [`swe::Solver::run_until`] with checkpoints: a solver from `q0`, or from `plan.restart` (its
/// state, time and step count), run to `t_end`; `after_step(steps, t)` after each step. Returns
/// the solver and the first step run.
pub fn swe<E: Executor>(
    exec: E,
    model: swe::Model,
    q0: &swe::State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    after_step: impl FnMut(usize, f64),
) -> Result<(swe::Solver<E>, usize), Error> {
    let (fields, settings) = (SWE_FIELDS.to_vec(), swe_settings(&model).to_vec());
    let id = Identity { name: swe_name(&model), grid: model.n.to_vec(), fields, settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<SweRun<E>, Error> {
        let solver = match c {
            Some(c) => {
                let f = |n: &str| c.field::<f64, 2>(n, &model.shape());
                let mut solver = swe::Solver::new(exec, model, &swe::State { h: f("h")?, hu: f("hu")?, hv: f("hv")? })?;
                (solver.t, solver.steps) = (c.time, c.step as usize);
                solver
            }
            None => swe::Solver::new(exec, model, q0)?,
        };
        Ok(SweRun { solver, t_end })
    };
    let (run, start) = driver::run(&id, &Plan { model: "swe2d".into(), ..plan.clone() }, build, after_step)?;
    Ok((run.solver, start))
}
