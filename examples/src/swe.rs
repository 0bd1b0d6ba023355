//! The 2D shallow water equations over a flat bottom (Xu et al. 2019, section 3.2), `∂q/∂t +
//! ∂F(q)/∂x + ∂G(q)/∂y = 0`, `q = (h, hu, hv)`: finite volumes, MUSCL-minmod states ([`muscl`])
//! and HLL fluxes ([`hll_x`]) at every face, SSP-RK3 with one fused stencil per stage
//! ([`SweStage`]), the CFL step from a reducing stencil ([`SweSpeed`]), edges as halo fills
//! ([`Edge`]); derived on `docs/examples/swe2d.md`. Dry cells (`h = 0`) are not handled.
//!
//! [`Solver`] is written once against [`Executor`]: the host ([`Host`]), a GPU, or subdomains
//! ([`Distributed`](stencil_runtime::Distributed): host subdomains, GPUs, MPI ranks, over
//! [`Model::decompose`]), where the result is the single-domain run's bit for bit.

use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Executor, HaloFill, Loop, Strategy};

use crate::checkpoint::{self, Error, Plan};
use crate::driver::{self, Identity, Stepping};

/// Gravitational acceleration, m/s².
pub const G: f64 = 9.81;

/// Halo width of every field: the reach of MUSCL reconstruction at the cell's outer faces (the
/// executor refuses a launch that reads beyond it).
pub const HALO: usize = 2;

/// The SSP-RK3 stages as `(a, b)` of `q_out = a q_n + b (q + Δt L(q))`.
pub const SSP_RK3: [(f64, f64); 3] = [(0.0, 1.0), (0.75, 0.25), (1.0 / 3.0, 2.0 / 3.0)];

/// Minmod slope limiter: the smaller of two slopes of equal sign, zero at an extremum.
#[stencil_fn]
pub fn minmod(a: f64, b: f64) -> f64 {
    if a * b <= 0.0 {
        0.0
    } else if a.abs() < b.abs() {
        a
    } else {
        b
    }
}

/// MUSCL with minmod: the left and right states at the face between cells `q0` and `q1` (`qm`
/// before `q0`, `q2` after `q1`).
#[stencil_fn]
pub fn muscl(qm: [f64; 3], q0: [f64; 3], q1: [f64; 3], q2: [f64; 3]) -> ([f64; 3], [f64; 3]) {
    let mut ql = q0;
    let mut qr = q1;
    for v in 0..3 {
        ql[v] += 0.5 * minmod(q0[v] - qm[v], q1[v] - q0[v]);
        qr[v] -= 0.5 * minmod(q1[v] - q0[v], q2[v] - q1[v]);
    }
    (ql, qr)
}

/// The x-flux `F(q)` of a state `(h, hu, hv)`, its velocity `u` and its wave speed `√(g h)`.
#[stencil_fn]
pub fn flux_x(q: [f64; 3], g: f64) -> ([f64; 3], f64, f64) {
    let u = q[1] / q[0];
    let c = (g * q[0]).sqrt();
    ([q[1], q[1] * u + 0.5 * g * q[0] * q[0], q[2] * u], u, c)
}

/// The HLL flux in x between a left and a right state (Davis wave speeds). Written so that
/// mirroring the states (`ql ↔ qr`, `hu → −hu`) mirrors the flux bit for bit.
#[stencil_fn]
pub fn hll_x(ql: [f64; 3], qr: [f64; 3], g: f64) -> [f64; 3] {
    let (fl, ul, cl) = flux_x(ql, g);
    let (fr, ur, cr) = flux_x(qr, g);
    let sl = (ul - cl).min(ur - cr);
    let sr = (ul + cl).max(ur + cr);
    let mut f = [0.0; 3];
    for v in 0..3 {
        let mid = (sr * fl[v] - sl * fr[v] + sl * sr * (qr[v] - ql[v])) / (sr - sl);
        f[v] = if sl >= 0.0 {
            fl[v]
        } else if sr <= 0.0 {
            fr[v]
        } else {
            mid
        };
    }
    f
}

/// The flux through the face between cells `q0` and `q1` along the face normal, the first
/// momentum component being the normal one: MUSCL-minmod states, then HLL.
#[stencil_fn]
pub fn face_flux(qm: [f64; 3], q0: [f64; 3], q1: [f64; 3], q2: [f64; 3], g: f64) -> [f64; 3] {
    let (ql, qr) = muscl(qm, q0, q1, q2);
    hll_x(ql, qr, g)
}

/// One SSP-RK stage at a cell: `out = a q_n + b (q + Δt L(q))` where `L(q)` is the flux
/// divergence of `q` (`dt_dx = Δt/Δx`, `dt_dy = Δt/Δy`). Reads `q` two cells out along each axis.
#[stencil]
pub fn swe_stage(
    idx: Idx2,
    a: f64,
    b: f64,
    dt_dx: f64,
    dt_dy: f64,
    g: f64,
    h_n: &Field2<f64>,
    hu_n: &Field2<f64>,
    hv_n: &Field2<f64>,
    h: &Field2<f64>,
    hu: &Field2<f64>,
    hv: &Field2<f64>,
    h_out: &mut Field2<f64>,
    hu_out: &mut Field2<f64>,
    hv_out: &mut Field2<f64>,
) {
    // x faces: states (h, hu, hv), hu normal.
    let xm2 = [h[idx.ix::<-2, 0>()], hu[idx.ix::<-2, 0>()], hv[idx.ix::<-2, 0>()]];
    let xm1 = [h[idx.ix::<-1, 0>()], hu[idx.ix::<-1, 0>()], hv[idx.ix::<-1, 0>()]];
    let c = [h[idx], hu[idx], hv[idx]];
    let xp1 = [h[idx.ix::<1, 0>()], hu[idx.ix::<1, 0>()], hv[idx.ix::<1, 0>()]];
    let xp2 = [h[idx.ix::<2, 0>()], hu[idx.ix::<2, 0>()], hv[idx.ix::<2, 0>()]];
    let fw = face_flux(xm2, xm1, c, xp1, g);
    let fe = face_flux(xm1, c, xp1, xp2, g);
    // y faces: states (h, hv, hu), hv normal; the fluxes come back in that order.
    let ym2 = [h[idx.ix::<0, -2>()], hv[idx.ix::<0, -2>()], hu[idx.ix::<0, -2>()]];
    let ym1 = [h[idx.ix::<0, -1>()], hv[idx.ix::<0, -1>()], hu[idx.ix::<0, -1>()]];
    let cy = [h[idx], hv[idx], hu[idx]];
    let yp1 = [h[idx.ix::<0, 1>()], hv[idx.ix::<0, 1>()], hu[idx.ix::<0, 1>()]];
    let yp2 = [h[idx.ix::<0, 2>()], hv[idx.ix::<0, 2>()], hu[idx.ix::<0, 2>()]];
    let gs = face_flux(ym2, ym1, cy, yp1, g);
    let gn = face_flux(ym1, cy, yp1, yp2, g);
    let h_new = h[idx] + (dt_dx * (fw[0] - fe[0]) + dt_dy * (gs[0] - gn[0]));
    let hu_new = hu[idx] + (dt_dx * (fw[1] - fe[1]) + dt_dy * (gs[2] - gn[2]));
    let hv_new = hv[idx] + (dt_dx * (fw[2] - fe[2]) + dt_dy * (gs[1] - gn[1]));
    h_out[idx] = a * h_n[idx] + b * h_new;
    hu_out[idx] = a * hu_n[idx] + b * hu_new;
    hv_out[idx] = a * hv_n[idx] + b * hv_new;
}

/// The fastest signal speed of the cells, `max(max(|u|, |v|) + √(g h))` (NaN once a speed is
/// NaN): the time step's input.
#[stencil]
pub fn swe_speed(idx: Idx2, g: f64, h: &Field2<f64>, hu: &Field2<f64>, hv: &Field2<f64>, fastest: &mut Max<f64>) {
    let u = hu[idx] / h[idx];
    let v = hv[idx] / h[idx];
    fastest.fold(u.abs().max(v.abs()) + (g * h[idx]).sqrt());
}

/// What lies beyond the two ends of an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Reflective walls: mirrored state, normal momentum negated.
    Wall,
    /// Transmissive (outflow): the last cell copied outwards.
    Outflow,
    /// The other end of the axis.
    Periodic,
}

impl Edge {
    /// The halo fill of `h` and the tangential momentum (`normal = false`) or of the momentum
    /// normal to this axis (`normal = true`).
    pub fn fill(self, normal: bool) -> HaloFill {
        match (self, normal) {
            (Edge::Wall, true) => HaloFill::MirrorNegated,
            (Edge::Wall, false) => HaloFill::Mirror,
            (Edge::Outflow, _) => HaloFill::ZeroGradient,
            (Edge::Periodic, _) => HaloFill::Periodic,
        }
    }
}

/// The conserved fields `(h, hu, hv)`, on the host or on a device (`F` is the field type).
#[derive(Clone)]
pub struct State<F> {
    /// Depth, m.
    pub h: F,
    /// x momentum per unit area, m²/s.
    pub hu: F,
    /// y momentum per unit area, m²/s.
    pub hv: F,
}

impl<F> State<F> {
    /// The three fields through `f` (e.g. copied to or from an executor), or its first error.
    pub fn try_map<G, Err>(&self, mut f: impl FnMut(&F) -> Result<G, Err>) -> Result<State<G>, Err> {
        Ok(State { h: f(&self.h)?, hu: f(&self.hu)?, hv: f(&self.hv)? })
    }
}

/// A problem: the grid, the boundaries, the CFL number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// Cells along x and y.
    pub n: [usize; 2],
    /// Cell size along x and y, m.
    pub dx: [f64; 2],
    /// The boundary of each axis.
    pub edges: [Edge; 2],
    /// `Δt max(max(|u|, |v|) + √(g h)) / min(Δx, Δy)`.
    pub cfl: f64,
}

impl Model {
    /// The field shape: the interior cells with a halo of [`HALO`].
    pub fn shape(&self) -> Shape2 {
        Shape2::new(self.n).halo(HALO)
    }

    /// The centre of cell `[i, j]` (global index, negative in the halo) relative to the grid's
    /// centre, m. Exactly antisymmetric under `i → n − 1 − i`.
    pub fn centre(&self, [i, j]: [isize; 2]) -> [f64; 2] {
        let [nx, ny] = self.n.map(|n| n as isize);
        [(2 * i + 1 - nx) as f64 * 0.5 * self.dx[0], (2 * j + 1 - ny) as f64 * 0.5 * self.dx[1]]
    }

    /// A host state from `(h, hu, hv)` as functions of the cell centre (relative to the grid's
    /// centre, see [`Model::centre`]); the halos are filled by the first step.
    pub fn initial(&self, q: impl Fn([f64; 2]) -> [f64; 3]) -> State<Field2<f64>> {
        let shape = self.shape();
        let at = |v: usize| Field2::from_fn(shape, |g| q(self.centre(g))[v]);
        State { h: at(0), hu: at(1), hv: at(2) }
    }

    /// The time step for the largest signal speed `max(max(|u|, |v|) + √(g h))` of a state:
    /// `cfl · min(Δx, Δy) / speed`.
    pub fn dt(&self, speed: f64) -> f64 {
        self.cfl * self.dx[0].min(self.dx[1]) / speed
    }

    /// `Σ h ΔxΔy` over the interior (summed row by row), m³.
    pub fn mass(&self, state: &State<Field2<f64>>) -> f64 {
        let [nx, ny] = self.n.map(|n| n as isize);
        let h = (0..ny).flat_map(|j| (0..nx).map(move |i| [i, j])).map(|p| state.h.get(p).expect("interior"));
        h.sum::<f64>() * self.dx[0] * self.dx[1]
    }

    /// The decomposition of the grid over `domains` subdomains, over process grid `grid` (else the
    /// grid of least halo surface); periodic axes wrap, subdomains are at least [`HALO`] thick.
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 2]>) -> Result<Decomposition<2>, Error> {
        let periodic = self.edges.map(|e| e == Edge::Periodic);
        Ok(Decomposition::with_grid(self.n, domains, grid, periodic, self.shape().halo_widths())?)
    }
}

/// Whether a run to `t_end` goes on at time `t` (it stops within round-off of `t_end`).
pub fn running(t: f64, t_end: f64) -> bool {
    t < t_end * (1.0 - 1e-14)
}

/// The conserved fields on executor `E`.
pub type Fields<E> = State<<E as Executor>::Field<f64, 2>>;

/// A model's state on an executor ([`Host`], or a `Gpu` with the `cuda` feature) with the
/// buffers of the Runge-Kutta stages.
pub struct Solver<E: Executor> {
    /// The executor.
    pub exec: E,
    /// The problem.
    pub model: Model,
    /// The CUDA kernel strategy of [`SweStage`] and [`SweSpeed`] (`None`: each stencil's
    /// default; the host ignores it).
    pub strategy: Option<Strategy>,
    /// The state at the current time.
    pub q: Fields<E>,
    stage1: Fields<E>,
    stage2: Fields<E>,
    range: Loop<2>,
    /// The simulated time, s.
    pub t: f64,
    /// Steps taken.
    pub steps: usize,
}

impl<E: Executor> Solver<E> {
    /// A solver on `exec` starting from the host state `q` (copied there), with zeroed stage
    /// buffers, and each stencil's default strategy; every field declares the edges' boundary.
    pub fn new(exec: E, model: Model, q: &State<Field2<f64>>) -> Result<Self, LaunchError> {
        let shape = model.shape();
        let (mut stage1, mut stage2) = (q.try_map(|_| exec.alloc(shape))?, q.try_map(|_| exec.alloc(shape))?);
        let mut q = q.try_map(|f| exec.upload(f))?;
        let fills = |normal: Option<usize>| [0, 1].map(|a| Some(model.edges[a].fill(normal == Some(a))));
        for s in [&mut q, &mut stage1, &mut stage2] {
            exec.declare_boundary(&mut s.h, fills(None))?;
            exec.declare_boundary(&mut s.hu, fills(Some(0)))?;
            exec.declare_boundary(&mut s.hv, fills(Some(1)))?;
        }
        let range = Loop2D::interior(&shape);
        Ok(Solver { exec, model, strategy: None, q, stage1, stage2, range, t: 0.0, steps: 0 })
    }

    /// One SSP-RK3 step of `dt` seconds (on a GPU: issued, not waited for): stage `k` runs
    /// [`SweStage`], `o = a q + b (s + Δt L(s))` with `(a, b) = SSP_RK3[k]`.
    pub fn step(&mut self, dt: f64) -> Result<(), Error> {
        let Solver { exec, model, strategy, q, stage1, stage2, range, .. } = self;
        let [dt_dx, dt_dy] = model.dx.map(|dx| dt / dx);
        let n = &*q;
        let stage = |k: usize, s: &Fields<E>, o: &mut Fields<E>| {
            let (a, b) = SSP_RK3[k];
            let args = (a, b, dt_dx, dt_dy, G, &n.h, &n.hu, &n.hv, &s.h, &s.hu, &s.hv, &mut o.h, &mut o.hu, &mut o.hv);
            exec.run_with(range, SweStage, *strategy, args)
        };
        stage(0, q, stage1)?;
        stage(1, stage1, stage2)?;
        stage(2, stage2, stage1)?;
        std::mem::swap(q, stage1);
        self.t += dt;
        self.steps += 1;
        Ok(())
    }

    /// A host copy of the current state (waits for the work issued so far).
    pub fn state(&self) -> Result<State<Field2<f64>>, LaunchError> {
        self.q.try_map(|f| self.exec.download(f))
    }

    /// One step of the CFL time step of the current state (its fastest speed by [`SweSpeed`] on
    /// the executor: one number comes back), cut to end at `t_end` if given; returns the step.
    pub fn cfl_step(&mut self, t_end: Option<f64>) -> Result<f64, Error> {
        let (mut fastest, q) = (Max::new(), &self.q);
        self.exec.run_with(&self.range, SweSpeed, self.strategy, (G, &q.h, &q.hu, &q.hv, &mut fastest))?;
        let dt = self.model.dt(fastest.get());
        if !dt.is_finite() || dt <= 0.0 {
            return Err(format!("time step {dt} at t = {}: the state is no longer wet and finite", self.t).into());
        }
        let dt = t_end.map_or(dt, |end| dt.min(end - self.t));
        self.step(dt)?;
        Ok(dt)
    }

    /// CFL steps until `t_end`; `after_step(solver)` after each (e.g. a progress bar).
    pub fn run_until(&mut self, t_end: f64, mut after_step: impl FnMut(&Self)) -> Result<(), Error> {
        while running(self.t, t_end) {
            self.cfl_step(Some(t_end))?;
            after_step(self);
        }
        Ok(())
    }
}

/// The circular dam break: depth `h_in` within `radius` of the centre, `h_out` outside, at rest.
pub fn circular_dam(radius: f64, h_in: f64, h_out: f64) -> impl Fn([f64; 2]) -> [f64; 3] {
    move |[x, y]| [if x * x + y * y < radius * radius { h_in } else { h_out }, 0.0, 0.0]
}

/// A shallow-water run as the time loop drives it: the solver and the end time.
struct Running<E: Executor> {
    solver: Solver<E>,
    t_end: f64,
}

impl<E: Executor> Stepping for Running<E> {
    fn clock(&self) -> (usize, f64) {
        (self.solver.steps, self.solver.t)
    }

    fn finished(&self) -> bool {
        !running(self.solver.t, self.t_end)
    }

    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let end = self.solver.steps + steps;
        while self.solver.steps < end && !self.finished() {
            self.solver.cfl_step(Some(self.t_end))?;
            after_step(self.solver.steps, self.solver.t);
        }
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let q = self.solver.state()?;
        let fields = [("h", &q.h), ("hu", &q.hu), ("hv", &q.hv)];
        write(&checkpoint::snapshot_of(&id.name, self.solver.steps, self.solver.t, &id.grid, &id.settings, &fields)?)
    }
}

/// [`Solver::run_until`] on the time-loop driver, with checkpoints: a solver from `q0`, or from
/// `plan.restart` (its state, time and step count), run to `t_end`; `after_step(steps, t)` after
/// each step. The checkpoint's name holds the edges and its settings the CFL number and the cell
/// size, so a restart with others is refused. Returns the solver and the first step run.
pub fn run_with<E: Executor>(
    exec: E,
    model: Model,
    q0: &State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    after_step: impl FnMut(usize, f64),
) -> Result<(Solver<E>, usize), Error> {
    let settings = vec![("cfl", model.cfl), ("dx", model.dx[0]), ("dy", model.dx[1])];
    let name = format!("swe2d {:?}", model.edges);
    let id = Identity { name, grid: model.n.to_vec(), fields: vec!["h", "hu", "hv"], settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<Running<E>, Error> {
        let f = |c: &Checkpoint<'_>, name: &str| c.field::<f64, 2>(name, &model.shape());
        let q = c.map(|c| Ok::<_, Error>(State { h: f(c, "h")?, hu: f(c, "hu")?, hv: f(c, "hv")? })).transpose()?;
        let mut solver = Solver::new(exec, model, q.as_ref().unwrap_or(q0))?;
        (solver.t, solver.steps) = c.map_or((0.0, 0), |c| (c.time, c.step as usize));
        Ok(Running { solver, t_end })
    };
    let (run, start) = driver::run(&id, &Plan { model: "swe2d".into(), ..plan.clone() }, build, after_step)?;
    Ok((run.solver, start))
}
