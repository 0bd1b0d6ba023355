//! Checkpoint and restart of the example models (`--checkpoint-every N`, `--restart FILE`):
//! the time loops of the models, resumable, writing a checkpoint
//! ([`stencil_runtime::io::checkpoint`]) every `N` steps.
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

use crate::acoustic::{self, Coefficients, RegionStrategies, Wave};
use crate::diffusion::{self, Real};
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
    fn due(&self, step: usize, last: bool) -> bool {
        self.every.is_some_and(|n| step.is_multiple_of(n) || last)
    }

    /// Writes a single-domain checkpoint of step `step` (where this process is the writer).
    fn save(&self, c: &Checkpoint<'_>, step: usize) -> Result<(), Error> {
        if !self.writer {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        c.write(self.path(step))?;
        Ok(())
    }

    /// The restart checkpoint, checked against the run: model, grid, field set and settings.
    fn load(
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

/// A checkpoint of `fields` (names and host fields) with `settings` as scalars.
fn snapshot_of<'a, T: IoElement, const D: usize>(
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

/// [`diffusion::simulate`] with checkpoints, on any executor (subdomains too: the checkpoint
/// holds the global field, so a run may restart on another placement): from the setup's
/// initial field, or from the checkpoint `plan.restart`, to step `setup.steps`, writing a
/// checkpoint after every `plan.every` steps and after the last; returns the final field and
/// the first step run (0 without a restart). `after_step(s)` is called after step `s` (counted from the start of
/// the run, not of the restart). Pairs of steps are replayed as in [`diffusion::time_loop`].
pub fn diffusion<E: Executor, T: Real + IoElement>(
    exec: &E,
    setup: &diffusion::Setup,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<(Field3<T>, usize), Error> {
    let shape = setup.shape();
    let model = DIFFUSION.to_string();
    let plan = Plan { model: model.clone(), ..plan.clone() };
    let settings = diffusion_settings(setup);
    let (host, start) = match plan.load(&setup.n, &["f"], &settings)? {
        Some(c) => (c.field::<T, 3>("f", &shape)?, c.step as usize),
        None => (setup.initial::<T>()?, 0),
    };
    if start > setup.steps {
        return Err(format!("the checkpoint is of step {start}, past the run's last step {}", setup.steps).into());
    }
    let range = Loop3D::interior(&shape);
    let c = setup.coefficients();
    let step = |e: &E, f: &E::Field<T, 3>, g: &mut E::Field<T, 3>| T::step(e, &range, &c, f, g);
    let mut buffers = [exec.upload(&host)?, exec.upload(&host)?];
    let mut s = start;
    while s < setup.steps {
        let next = match plan.every {
            Some(n) => ((s / n + 1) * n).min(setup.steps),
            None => setup.steps,
        };
        let from = s;
        diffusion::time_loop(exec, next - s, &mut buffers, step, |k| after_step(from + k))?;
        s = next;
        if plan.due(s, s == setup.steps) {
            let f = exec.download(&buffers[0])?;
            plan.save(&snapshot_of(&model, s, s as f64 * setup.dt(), &setup.n, &settings, &[("f", &f)])?, s)?;
        }
    }
    let [f, _] = buffers;
    Ok((exec.download(&f)?, start))
}

// ---------------------------------------------------------------------------------------------
// acoustic3d

/// The acoustic model's fields in checkpoints: the state, and the receiver traces so far
/// (`traces`, a 2D field indexed `[receiver, step]`), so that a restarted run writes the whole
/// seismogram.
const ACOUSTIC_FIELDS: [&str; 6] = ["u", "u_prev", "vdt2", "eta", "phi", "traces"];

/// The traces `traces[s][r]` as a field indexed `[r, s]`.
fn traces_field<T: Element>(traces: &[Vec<T>], receivers: usize) -> Field2<T> {
    Field2::from_fn(Shape2::new([receivers, traces.len()]).align(1), |[r, s]| traces[s as usize][r as usize])
}

/// The acoustic model's name in checkpoints.
const ACOUSTIC: &str = "acoustic3d";

/// The acoustic run's settings a checkpoint must match.
fn acoustic_settings(model: &acoustic::Model) -> [(&'static str, f64); 8] {
    // The source (metres) and the receivers (a hash of their positions or of the line) too: a
    // restart with other ones would splice traces of two set-ups.
    let source = model.source_position.unwrap_or(model.source.map(|i| i as f64 * model.h));
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let line = [f64::NAN, model.source[1] as f64, model.receiver_depth as f64];
    for v in model.receiver_positions.iter().flatten().flatten().chain(if model.receiver_positions.is_none() {
        &line[..]
    } else {
        &[]
    }) {
        hash = (hash ^ v.to_bits()).wrapping_mul(0x0100_0000_01b3);
    }
    [
        ("dt", model.dt),
        ("h", model.h),
        ("f0", model.f0),
        ("pml", model.pml as f64),
        ("source_x", source[0]),
        ("source_y", source[1]),
        ("source_z", source[2]),
        // 52 bits of the hash: exact in an f64.
        ("receivers", (hash >> 12) as f64),
    ]
}

/// Checks the `vdt2` of a checkpoint `c` (V²Δt² per point) against this run's (`expected`):
/// another velocity model is another run.
fn check_velocity<T: Element>(c: &Checkpoint<'_>, expected: &Field3<T>, vdt2: &Field3<T>) -> Result<(), IoError> {
    let differ = expected.as_slice().iter().zip(vdt2.as_slice()).filter(|(a, b)| a != b).count();
    if differ > 0 {
        return Err(IoError::Mismatch {
            path: c.path().to_path_buf(),
            what: "velocity model (V² Δt² per point)".into(),
            expected: "this run's".into(),
            found: format!("another one, at {differ} of {} points", vdt2.shape().points()),
        });
    }
    Ok(())
}

/// This run's V²Δt² per point of the global grid, as the model computes it.
fn velocity_of<T: Wave>(model: &acoustic::Model) -> Result<Field3<T>, Error> {
    let dt2 = model.dt * model.dt;
    Ok(Field3::<T>::try_from_fn(model.shape(), |g| T::from_f64(model.velocity(g).powi(2) * dt2))?)
}

/// [`acoustic::run`] with checkpoints, on any executor (subdomains too: the global state, written
/// by the writer; a restart may run on another placement) (the whole state: `u`, `u_prev`,
/// `vdt2`, `eta`, `phi` and the receiver traces so far), from the model's initial state or from `plan.restart`, to step
/// `model.steps`; the wavefields after step `snapshot` too, if that step is run. Returns the
/// model's outcome (every step's traces, also after a restart; the time covers the steps run
/// but the first, and the checkpoints) and the first step run.
pub fn acoustic<E: Executor, T: Wave + IoElement>(
    exec: &E,
    strategies: &RegionStrategies,
    model: &acoustic::Model,
    snapshot: Option<usize>,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<(acoustic::Outcome<T>, usize), Error> {
    model.check()?;
    let name = ACOUSTIC.to_string();
    let plan = Plan { model: name.clone(), ..plan.clone() };
    let shape = model.shape();
    let global = shape.interior();
    let receivers = model.receiver_range()?;
    let count = receivers.points();
    let settings = acoustic_settings(model);
    let mut traces: Vec<Vec<T>> = Vec::with_capacity(model.steps);
    let (host, start) = match plan.load(&global, &ACOUSTIC_FIELDS, &settings)? {
        Some(c) => {
            let f = |n: &str| c.field::<T, 3>(n, &shape);
            let state =
                acoustic::State { u: f("u")?, u_prev: f("u_prev")?, vdt2: f("vdt2")?, eta: f("eta")?, phi: f("phi")? };
            // The velocity model (layers or a grid) is this run's: V²Δt² as the run computes it.
            check_velocity(&c, &velocity_of::<T>(model)?, &state.vdt2)?;
            let start = c.step as usize;
            let recorded = c.field::<T, 2>("traces", &Shape2::new([count, start]).align(1))?;
            traces.extend(
                (0..start as isize).map(|s| (0..count as isize).map(|r| recorded.get([r, s]).expect("in")).collect()),
            );
            (state, start)
        }
        None => (model.initial::<T>()?, 0),
    };
    if start > model.steps {
        return Err(format!("the checkpoint is of step {start}, past the run's last step {}", model.steps).into());
    }
    let (regions, c) = (model.regions(), Coefficients::new([model.h; 3]).to::<T>());
    let mut state = host.upload(exec)?;
    drop(host);
    let mut snap = None;
    let mut clock = std::time::Instant::now();
    for s in start..model.steps {
        T::step(exec, strategies, &regions, &c, &mut state, &model.source_at(s)?)?;
        traces.push(exec.read_range(&state.u, &receivers)?);
        if snapshot == Some(s + 1) {
            snap = Some(state.wavefields(exec)?);
        }
        after_step(s + 1);
        if plan.due(s + 1, s + 1 == model.steps) {
            let d = |f: &E::Field<T, 3>| exec.download(f);
            let (u, u_prev, vdt2, eta, phi) =
                (d(&state.u)?, d(&state.u_prev)?, d(&state.vdt2)?, d(&state.eta)?, d(&state.phi)?);
            let recorded = traces_field(&traces, count);
            let mut c = snapshot_of(
                &name,
                s + 1,
                (s + 1) as f64 * model.dt,
                &global,
                &settings,
                &[("u", &u), ("u_prev", &u_prev), ("vdt2", &vdt2), ("eta", &eta), ("phi", &phi)],
            )?;
            c.push("traces", &recorded)?;
            plan.save(&c, s + 1)?;
        }
        if s + 1 == start + acoustic::WARM_UP.min(model.steps - start - 1) {
            // The first steps prepare the kernels: not timed, as in the model's run.
            exec.synchronize()?;
            clock = std::time::Instant::now();
        }
    }
    exec.synchronize()?;
    let seconds = clock.elapsed().as_secs_f64();
    let timed_steps = (model.steps - start).saturating_sub(acoustic::WARM_UP).max(1);
    let last = state.wavefields(exec)?;
    let traces = model.receiver_traces(traces)?;
    Ok((acoustic::Outcome { last, snapshot: snap, traces, seconds, timed_steps }, start))
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
    mut after_step: impl FnMut(usize, f64),
) -> Result<(Conserved<Field3<f64>>, usize, usize), Error> {
    let (name, settings) = (euler_name(e), euler_settings(e, dt_every));
    let plan = Plan { model: "euler3d".into(), ..plan.clone() };
    let shape = e.shape();
    let loaded = match plan.restart.as_ref() {
        Some(_) => {
            // The model check first, with the numerics in the name.
            let c =
                Plan { model: name.clone(), ..plan.clone() }.load(&e.n, &EULER_FIELDS, &settings)?.expect("restart");
            let q = EULER_FIELDS.map(|name| c.field::<f64, 3>(name, &shape));
            let [a, b, cc, d, f] = q;
            Some(([a?, b?, cc?, d?, f?], c.time, c.step as usize, c.get_scalar("dt_cfl")?))
        }
        None => None,
    };
    let (mut s, mut t, start, mut dt_cfl) = match loaded {
        Some((q, t, steps, dt_cfl)) => (crate::euler::State::new(exec, &q)?, t, steps, dt_cfl),
        None => (crate::euler::State::new(exec, q)?, 0.0, 0, 0.0),
    };
    let mut steps = start;
    while t < t_end {
        if steps % dt_every.max(1) == 0 {
            dt_cfl = e.dt(exec, &s)?;
        }
        let dt = dt_cfl.min(t_end - t);
        if !(dt.is_finite() && dt > 0.0) {
            return Err(format!("time step {dt} at t = {t}: the state has a non-positive density or pressure").into());
        }
        e.step(exec, &mut s, dt)?;
        t = if t_end - t <= dt { t_end } else { t + dt };
        steps += 1;
        after_step(steps, t);
        if plan.due(steps, t >= t_end) {
            let q = s.download(exec)?;
            let fields: Vec<(&str, &Field3<f64>)> = EULER_FIELDS.iter().copied().zip(q.iter()).collect();
            let mut c = snapshot_of(&name, steps, t, &e.n, &settings, &fields)?;
            c.scalar("dt_cfl", dt_cfl);
            plan.save(&c, steps)?;
        }
    }
    Ok((s.download(exec)?, steps, start))
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

/// [`swe::Solver::run_until`] with checkpoints: a solver from `q0`, or from `plan.restart` (its
/// state, time and step count), run to `t_end`; `after_step` as there. Returns the solver and
/// the first step run.
pub fn swe<E: Executor>(
    exec: E,
    model: swe::Model,
    q0: &swe::State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    mut after_step: impl FnMut(&swe::Solver<E>),
) -> Result<(swe::Solver<E>, usize), Error> {
    let name = swe_name(&model);
    let plan = Plan { model: "swe2d".into(), ..plan.clone() };
    let settings = swe_settings(&model);
    let shape = model.shape();
    let mut solver = match (Plan { model: name.clone(), ..plan.clone() }).load(&model.n, &SWE_FIELDS, &settings)? {
        Some(c) => {
            let f = |n: &str| c.field::<f64, 2>(n, &shape);
            let q = swe::State { h: f("h")?, hu: f("hu")?, hv: f("hv")? };
            let mut solver = swe::Solver::new(exec, model, &q)?;
            (solver.t, solver.steps) = (c.time, c.step as usize);
            solver
        }
        None => swe::Solver::new(exec, model, q0)?,
    };
    let start = solver.steps;
    while swe::running(solver.t, t_end) {
        solver.cfl_step(Some(t_end))?;
        after_step(&solver);
        if plan.due(solver.steps, !swe::running(solver.t, t_end)) {
            let q = solver.state()?;
            let fields = [("h", &q.h), ("hu", &q.hu), ("hv", &q.hv)];
            plan.save(&snapshot_of(&name, solver.steps, solver.t, &model.n, &settings, &fields)?, solver.steps)?;
        }
    }
    Ok((solver, start))
}
