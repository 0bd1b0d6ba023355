//! ASUCA's `Diffusion3d` (seed paper 004, section IV.C): the heat equation `u_t = kappa Δu` with
//! the 7-point explicit scheme, checked against the analytic heat kernel.
//!
//! The test problem is a Gaussian in a box,
//!
//! ```text
//! u(x, t) = (t0 / (t0 + t))^{3/2} exp(-|x - c|^2 / (4 kappa (t0 + t)))
//! ```
//!
//! the infinite-domain heat kernel started at `t0` (peak 1 at `t = 0`).
//!
//! Boundary: the Gaussian is kept far from the walls, and the halo (one ghost layer per side) is a
//! fixed zero Dirichlet boundary. That keeps a step a single stencil launch (no halo kernel, which
//! a GPU path would need too), and it is exact to within the value of the analytic solution at
//! the walls, which [`Outcome::wall_value`] reports: about 1e-8 of the peak with the defaults, far
//! below the discretisation error. Runs long enough for the Gaussian to reach the walls warn.
//!
//! The model is written once, against [`Executor`]: [`run`] and [`simulate`] take the host
//! ([`Host`]), a GPU (`stencil_runtime::cuda::Gpu`, with the `cuda` feature) or subdomains
//! ([`Distributed`](stencil_runtime::Distributed): host subdomains, GPUs, MPI ranks; it moves the
//! halos the stencil reads, and its result is the single-domain one, bit for bit). [`time_loop`]
//! replays a recorded pair of steps (a CUDA graph on a GPU).

use std::time::Instant;

use stencil_runtime::domain::ReachError;
use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::io::IoElement;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Element, Executor, HaloWidths, Recorded};

use crate::checkpoint::{self, Error, Plan};
use crate::driver::{self, Identity, Stepping};

/// One explicit step of the 7-point scheme, single precision (ASUCA's `Diffusion3d` verbatim).
#[stencil]
pub fn diffusion3d(
    idx: Idx3,
    ce: f32,
    cw: f32,
    cn: f32,
    cs: f32,
    ct: f32,
    cb: f32,
    cc: f32,
    f: &Field3<f32>,
    f_new: &mut Field3<f32>,
) {
    f_new[idx] = cc * f[idx]
        + ce * f[idx.ix::<1, 0, 0>()]
        + cw * f[idx.ix::<-1, 0, 0>()]
        + cn * f[idx.ix::<0, 1, 0>()]
        + cs * f[idx.ix::<0, -1, 0>()]
        + ct * f[idx.ix::<0, 0, 1>()]
        + cb * f[idx.ix::<0, 0, -1>()];
}

/// The same step in double precision.
#[stencil]
pub fn diffusion3d_f64(
    idx: Idx3,
    ce: f64,
    cw: f64,
    cn: f64,
    cs: f64,
    ct: f64,
    cb: f64,
    cc: f64,
    f: &Field3<f64>,
    f_new: &mut Field3<f64>,
) {
    f_new[idx] = cc * f[idx]
        + ce * f[idx.ix::<1, 0, 0>()]
        + cw * f[idx.ix::<-1, 0, 0>()]
        + cn * f[idx.ix::<0, 1, 0>()]
        + cs * f[idx.ix::<0, -1, 0>()]
        + ct * f[idx.ix::<0, 0, 1>()]
        + cb * f[idx.ix::<0, 0, -1>()];
}

/// The scheme's coefficients, named as in ASUCA (east/west along x, north/south along y,
/// top/bottom along z, centre).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients {
    /// `+x` neighbour.
    pub ce: f64,
    /// `-x` neighbour.
    pub cw: f64,
    /// `+y` neighbour.
    pub cn: f64,
    /// `-y` neighbour.
    pub cs: f64,
    /// `+z` neighbour.
    pub ct: f64,
    /// `-z` neighbour.
    pub cb: f64,
    /// The point itself.
    pub cc: f64,
}

/// A field element the example runs in: `f32` or `f64`, each with its stencil.
pub trait Real: Element + IoElement + Into<f64> {
    /// The value nearest to `v`.
    fn from_f64(v: f64) -> Self;
    /// One step `f -> f_new` over `range` on `exec` (the stencil's default strategy).
    fn step<E: Executor>(
        exec: &E,
        range: &Loop3D,
        c: &Coefficients,
        f: &E::Field<Self, 3>,
        f_new: &mut E::Field<Self, 3>,
    ) -> Result<(), LaunchError>;
}

impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn step<E: Executor>(
        exec: &E,
        range: &Loop3D,
        c: &Coefficients,
        f: &E::Field<f32, 3>,
        f_new: &mut E::Field<f32, 3>,
    ) -> Result<(), LaunchError> {
        let k = |v: f64| v as f32;
        exec.run(range, Diffusion3d, (k(c.ce), k(c.cw), k(c.cn), k(c.cs), k(c.ct), k(c.cb), k(c.cc), f, f_new))
    }
}

impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn step<E: Executor>(
        exec: &E,
        range: &Loop3D,
        c: &Coefficients,
        f: &E::Field<f64, 3>,
        f_new: &mut E::Field<f64, 3>,
    ) -> Result<(), LaunchError> {
        exec.run(range, Diffusion3dF64, (c.ce, c.cw, c.cn, c.cs, c.ct, c.cb, c.cc, f, f_new))
    }
}

/// The analytic solution: a heat kernel of diffusivity `kappa` centred at `center`, started at
/// time `t0` so that it has peak 1 at `t = 0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gaussian {
    /// Diffusivity.
    pub kappa: f64,
    /// Age of the kernel at `t = 0` (initial variance per axis is `2 kappa t0`).
    pub t0: f64,
    /// Centre.
    pub center: [f64; 3],
}

impl Gaussian {
    /// `u(x, t)`.
    pub fn at(&self, x: [f64; 3], t: f64) -> f64 {
        let s = self.t0 + t;
        let r2: f64 = (0..3).map(|a| (x[a] - self.center[a]).powi(2)).sum();
        (self.t0 / s).powf(1.5) * (-r2 / (4.0 * self.kappa * s)).exp()
    }
}

/// A run of the example: grid, element order, number of steps and time step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setup {
    /// Interior points per axis.
    pub n: [usize; 3],
    /// Element order of the fields.
    pub order: Order,
    /// Time steps.
    pub steps: usize,
    /// Time step as a fraction of the stability limit `dx^2 / (6 kappa)`.
    pub cfl: f64,
    /// Initial standard deviation of the Gaussian, as a fraction of the shortest side of the box.
    pub sigma0: f64,
}

/// Diffusivity of every run (the problem is nondimensional: the shortest side of the box is 1).
pub const KAPPA: f64 = 1.0;

impl Setup {
    /// A cubic grid of `n^3` points with the default time step (0.9 of the stability limit) and
    /// Gaussian (standard deviation 0.06 of the box).
    pub fn cube(n: usize, steps: usize) -> Self {
        Setup { n: [n; 3], order: Order::Ijk, steps, cfl: 0.9, sigma0: 0.06 }
    }

    /// Grid spacing, the same on every axis: the shortest side of the box has length 1.
    pub fn dx(&self) -> f64 {
        1.0 / *self.n.iter().min().expect("3 axes") as f64
    }

    /// The time step.
    pub fn dt(&self) -> f64 {
        self.cfl * self.dx().powi(2) / (6.0 * KAPPA)
    }

    /// Time at the end of the run.
    pub fn end_time(&self) -> f64 {
        self.steps as f64 * self.dt()
    }

    /// The fields' shape: the interior plus one ghost layer, in the chosen element order.
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n).halo(1).order(self.order)
    }

    /// The coefficients `kappa dt / dx^2` for the six neighbours and `1 - 6 kappa dt / dx^2`.
    pub fn coefficients(&self) -> Coefficients {
        let c = KAPPA * self.dt() / self.dx().powi(2);
        Coefficients { ce: c, cw: c, cn: c, cs: c, ct: c, cb: c, cc: 1.0 - 6.0 * c }
    }

    /// The analytic solution, centred in the box.
    pub fn gaussian(&self) -> Gaussian {
        let center = self.n.map(|n| n as f64 * self.dx() / 2.0);
        Gaussian { kappa: KAPPA, t0: self.sigma0.powi(2) / (2.0 * KAPPA), center }
    }

    /// Position of the cell centre at a global coordinate (the interior spans `0 .. n dx`).
    pub fn position(&self, g: [isize; 3]) -> [f64; 3] {
        g.map(|i| (i as f64 + 0.5) * self.dx())
    }

    /// The initial field: the Gaussian in the interior, zero in the halo (the fixed boundary).
    ///
    /// Errors when the host memory for the field cannot be had
    /// ([`FieldError::OutOfMemory`](stencil_runtime::FieldError::OutOfMemory),
    /// which says how many bytes the field needs and how many are available).
    pub fn initial<T: Real>(&self) -> Result<Field3<T>, LaunchError> {
        let gauss = self.gaussian();
        let n = self.n;
        Ok(Field3::try_from_fn(self.shape(), |g| {
            let inside = (0..3).all(|a| g[a] >= 0 && (g[a] as usize) < n[a]);
            T::from_f64(if inside { gauss.at(self.position(g), 0.0) } else { 0.0 })
        })?)
    }

    /// The largest value of the analytic solution on the ghost layer at time `t`: how much the
    /// zero boundary is off (relative to the peak 1 at `t = 0`).
    pub fn wall_value(&self, t: f64) -> f64 {
        let gauss = self.gaussian();
        (0..3)
            .map(|a| {
                let mut x = gauss.center;
                x[a] = self.position([-1; 3])[a];
                gauss.at(x, t)
            })
            .fold(0.0, f64::max)
    }

    /// The error of `u` against the analytic solution at time `t`, over the interior.
    pub fn error<T: Real>(&self, u: &Field3<T>, t: f64) -> ErrorNorms {
        let gauss = self.gaussian();
        let (mut diff2, mut exact2, mut max_diff, mut max_exact) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for k in 0..self.n[2] as isize {
            for j in 0..self.n[1] as isize {
                for i in 0..self.n[0] as isize {
                    let g = [i, j, k];
                    let exact = gauss.at(self.position(g), t);
                    let d = u.get(g).expect("interior point").into() - exact;
                    diff2 += d * d;
                    exact2 += exact * exact;
                    max_diff = max_diff.max(d.abs());
                    max_exact = max_exact.max(exact.abs());
                }
            }
        }
        ErrorNorms { rel_l2: (diff2 / exact2).sqrt(), rel_max: max_diff / max_exact }
    }
}

/// Error of a numerical solution against the analytic one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorNorms {
    /// `||u - u_exact||_2 / ||u_exact||_2` over the interior.
    pub rel_l2: f64,
    /// `max |u - u_exact| / max |u_exact|` over the interior.
    pub rel_max: f64,
}

/// Runs `steps` steps of a double-buffered scheme on `exec`: `step(exec, a, b)` writes the state
/// after `a` into `b`. The latest state is in `buffers[0]` at the end. `after_step(s)` is called
/// after step `s` (1-based) has been issued, e.g. for a progress bar (on a GPU the work may still
/// be running).
///
/// Pairs of steps (`buffers[0] → buffers[1] → buffers[0]`) after the first are recorded once as a
/// [`Recorded`] step and replayed (one CUDA graph launch per pair on a GPU, one graph over all
/// the GPUs of the distributed executor; on the host the pair simply runs);
/// an odd last step is a plain step followed by a swap. The result is the same, bit for bit, as
/// issuing every step by hand. Run `step` once on fields of the same shapes beforehand, so that
/// kernels are compiled and launches checked before the recording (as [`simulate`] does).
pub fn time_loop<E: Executor, F>(
    exec: &E,
    steps: usize,
    buffers: &mut [F; 2],
    step: impl Fn(&E, &F, &mut F) -> Result<(), LaunchError>,
    mut after_step: impl FnMut(usize),
) -> Result<(), LaunchError> {
    let pairs = steps / 2;
    if pairs > 0 {
        // The first pair runs as it is: on a distributed executor it brings the fields' halos to
        // the state every later pair starts from, which a recording needs to be replayable.
        let [a, b] = &mut *buffers;
        step(exec, a, b)?;
        step(exec, b, a)?;
        after_step(1);
        after_step(2);
    }
    if pairs > 1 {
        let mut pair = Recorded::new(exec, &mut *buffers, |e, [a, b]: &mut [F; 2]| {
            step(e, a, b)?;
            step(e, b, a)
        })?;
        for p in 1..pairs {
            pair.replay()?;
            after_step(2 * p + 1);
            after_step(2 * p + 2);
        }
    }
    if steps % 2 == 1 {
        let [a, b] = &mut *buffers;
        step(exec, a, b)?;
        buffers.swap(0, 1);
        after_step(steps);
    }
    Ok(())
}

/// What a run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    /// Wall-clock seconds of the time loop (set-up and the error check excluded).
    pub seconds: f64,
    /// Interior point updates per second, in billions.
    pub gpts_per_s: f64,
    /// Error at the end against the analytic solution.
    pub error: ErrorNorms,
    /// Largest analytic value on the ghost layer at the end (the zero boundary's own error).
    pub wall_value: f64,
}

/// [`run_with`] without checkpoints: the final field (on the host) and the seconds of the time
/// loop.
pub fn simulate<E: Executor, T: Real>(
    exec: &E,
    setup: &Setup,
    after_step: impl FnMut(usize),
) -> Result<(Field3<T>, f64), Error> {
    let (f, seconds, _) = run_with(exec, setup, &Plan::none(), after_step)?;
    Ok((f, seconds))
}

/// Runs `setup` on `exec` in precision `T` from its initial field, or from the checkpoint
/// `plan.restart` (written on any placement), to step `setup.steps`, writing checkpoints as
/// `plan` says. The fields are uploaded once, stepped by [`time_loop`] and downloaded once.
/// Returns the final field (on the host), the seconds of the time loop and the first step run.
/// Before the clock starts, one pair of steps runs on scratch copies of the initial field
/// (kernels compiled, launches checked; the result is not touched by it). The time includes a
/// final synchronisation and the checkpoints, not the set-up or the copies.
pub fn run_with<E: Executor, T: Real>(
    exec: &E,
    setup: &Setup,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<(Field3<T>, f64, usize), Error> {
    let settings = vec![("dt", setup.dt()), ("cfl", setup.cfl), ("sigma0", setup.sigma0)];
    let id = Identity { name: "diffusion3d".into(), grid: setup.n.to_vec(), fields: vec!["f"], settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<Running<'_, E, T>, Error> {
        let (host, step) = match c {
            Some(c) => (c.field::<T, 3>("f", &setup.shape())?, c.step as usize),
            None => (setup.initial::<T>()?, 0),
        };
        checkpoint::within_run(step, setup.steps)?;
        let [mut a, mut b] = [exec.upload(&host)?, exec.upload(&host)?];
        let clock = Instant::now();
        let mut run = Running { exec, setup, buffers: [exec.upload(&host)?, exec.upload(&host)?], step, clock };
        run.step(exec, &a, &mut b)?;
        run.step(exec, &b, &mut a)?;
        // Both buffers carry the same (zero) halo, so the boundary stays fixed across swaps.
        exec.synchronize()?;
        run.clock = Instant::now();
        Ok(run)
    };
    let plan = Plan { model: id.name.clone(), ..plan.clone() };
    let (run, first) = driver::run(&id, &plan, build, |s, _| after_step(s))?;
    exec.synchronize()?;
    let seconds = run.clock.elapsed().as_secs_f64();
    Ok((exec.download(&run.buffers[0])?, seconds, first))
}

/// A run on `E` as the time loop drives it: the two buffers and the steps run.
struct Running<'a, E: Executor, T: Real> {
    exec: &'a E,
    setup: &'a Setup,
    buffers: [E::Field<T, 3>; 2],
    step: usize,
    clock: Instant,
}

impl<E: Executor, T: Real> Running<'_, E, T> {
    /// One step `f -> f_new` over the interior.
    fn step(&self, exec: &E, f: &E::Field<T, 3>, f_new: &mut E::Field<T, 3>) -> Result<(), LaunchError> {
        T::step(exec, &Loop3D::interior(&self.setup.shape()), &self.setup.coefficients(), f, f_new)
    }
}

impl<E: Executor, T: Real> Stepping for Running<'_, E, T> {
    fn clock(&self) -> (usize, f64) {
        (self.step, self.step as f64 * self.setup.dt())
    }

    fn finished(&self) -> bool {
        self.step >= self.setup.steps
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let (from, dt) = (self.step, self.setup.dt());
        let steps = steps.min(self.setup.steps - from);
        let (range, c) = (Loop3D::interior(&self.setup.shape()), self.setup.coefficients());
        let step = |e: &E, f: &E::Field<T, 3>, g: &mut E::Field<T, 3>| T::step(e, &range, &c, f, g);
        time_loop(self.exec, steps, &mut self.buffers, step, |k| after_step(from + k, (from + k) as f64 * dt))?;
        self.step += steps;
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let f = self.exec.download(&self.buffers[0])?;
        let (step, time) = self.clock();
        write(&checkpoint::snapshot_of(&id.name, step, time, &id.grid, &id.settings, &[("f", &f)])?)
    }
}

/// Runs `setup` on `exec` in precision `T` ([`simulate`]) and checks the result against the
/// analytic solution; `after_step` as in [`time_loop`].
pub fn run<E: Executor, T: Real>(exec: &E, setup: &Setup, after_step: impl FnMut(usize)) -> Result<Outcome, Error> {
    let (f, seconds) = simulate::<E, T>(exec, setup, after_step)?;
    Ok(Outcome::of(setup, &f, setup.steps, seconds))
}

impl Outcome {
    /// The outcome of a run of `setup` that ended with `f` after `steps` steps in `seconds`.
    pub fn of<T: Real>(setup: &Setup, f: &Field3<T>, steps: usize, seconds: f64) -> Outcome {
        let t = setup.end_time();
        Outcome {
            seconds,
            gpts_per_s: (setup.shape().interior_points() * steps) as f64 / seconds / 1e9,
            error: setup.error(f, t),
            wall_value: setup.wall_value(t),
        }
    }
}

/// The halo the scheme needs: the reach of the stencils' reads of `f` (both precisions), as the
/// macro recorded it.
pub fn halo() -> Result<HaloWidths<3>, ReachError> {
    HaloWidths::of::<Diffusion3d>("f")?.read_by::<Diffusion3dF64>("f")
}

impl Setup {
    /// The decomposition of this setup's grid over `domains` subdomains: over process grid
    /// `grid` when given (its product must be `domains`), else the grid of least halo surface
    /// ([`Decomposition::auto`]). No axis is periodic (the boundary is the fixed zero halo), and
    /// the halo is [`halo`].
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, LaunchError> {
        let halo = halo().map_err(|e| LaunchError::Decomposition(e.to_string()))?.0;
        Ok(Decomposition::with_grid(self.n, domains, grid, [false; 3], halo)?)
    }
}
