//! The 2D shallow water equations over a flat bottom (seed paper 000, section 3.2: a
//! cell-centred finite-volume solver with piecewise-linear state reconstruction and a Riemann
//! solver at every face):
//!
//! ```text
//! ∂q/∂t + ∂F(q)/∂x + ∂G(q)/∂y = 0,   q = (h, hu, hv),
//! F(q) = (hu, hu²/h + g h²/2, hu v),   G(q) = (hv, hu v, hv²/h + g h²/2),   g = 9.81
//! ```
//!
//! **Space.** Cell averages on a uniform grid. At every face the states on both sides are
//! reconstructed piecewise linearly (MUSCL) with the [`minmod`] limiter on the conserved
//! variables, `q⁻ = q_i + ½ minmod(q_i − q_{i−1}, q_{i+1} − q_i)` and likewise `q⁺` from the
//! cell on the other side (the paper's equation (5) with a limited slope), and the face flux is
//! the HLL approximate Riemann solver ([`hll_x`]) with Davis's wave-speed estimates
//! `s_L = min(u_L − c_L, u_R − c_R)`, `s_R = max(u_L + c_L, u_R + c_R)`, `c = √(g h)`. The y
//! faces reuse the x solver with the momentum components swapped (`G(h, hu, hv)` is `F(h, hv,
//! hu)` permuted), so the scheme is exactly symmetric under `x ↔ y` on a square grid. Every
//! cell computes its own four face fluxes (each face twice, once per side, bit-identically):
//! one stencil per stage, radius 2, no flux fields.
//!
//! **Time.** Third-order SSP Runge-Kutta (Shu-Osher), each stage one launch of the fused
//! stencil [`SweStage`], `q_out = a q_n + b (q + Δt L(q))` with `(a, b)` = `(0, 1)`,
//! `(3/4, 1/4)`, `(1/3, 2/3)`. `Δt = cfl · min(Δx, Δy) / max(max(|u|, |v|) + √(g h))`, the speed
//! of every cell at the start of the step folded into a maximum by the reducing stencil
//! [`SweSpeed`] where the state lives (on a GPU one number comes back, not the state).
//!
//! **Boundaries** ([`Edge`], per axis): a reflective wall mirrors the state into the halo and
//! negates the momentum normal to it (`HaloFill::MirrorNegated` for `hu` on x, `hv` on y,
//! `HaloFill::Mirror` for the rest), so the reconstructed states at the wall are mirror images
//! and the HLL mass flux through it is exactly zero; outflow copies the last cell outwards
//! (`ZeroGradient`); periodic wraps. Halos are refilled before every stage, the three fields
//! along both axes in one executor call.
//!
//! **Where it runs.** [`Solver`] is written once against [`stencil_runtime::Executor`]: the same
//! code runs on the host ([`Host`]) or a GPU, where [`Solver::strategy`] picks the kernels.
//!
//! **Subdomains**: [`Solver`] on the distributed executor
//! ([`Distributed`](stencil_runtime::Distributed), over [`Model::decompose`]; host subdomains,
//! GPUs, MPI ranks): the halos of `h`, `hu`, `hv` move when [`SweStage`] reads them (a periodic
//! axis wraps when the stage's halo fill asks), and the CFL step is the largest [`SweSpeed`] over
//! every subdomain of every rank: a maximum, whatever the order. Every cell is updated by the
//! same operations on the same values as in the single-domain run, so the result is the same bit
//! for bit for any process grid.
//!
//! Dry cells (`h = 0`) are not handled: the depth must stay positive.

use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Executor, HaloFill, HaloWidths, Loop, Strategy};

use crate::checkpoint::{self, Plan};
use crate::driver::{self, Identity, Stepping};

/// The error type of the drivers: launch, halo and decomposition errors.
pub type Error = Box<dyn std::error::Error>;

/// Gravitational acceleration, m/s².
pub const G: f64 = 9.81;

/// Halo width of every field: the reach of MUSCL reconstruction at the cell's outer faces.
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

    /// The fills of both axes of `h` (`normal: None`) or of the momentum normal to axis
    /// `normal`; `None` on the periodic axes when `exchanged` (a decomposed run: the halo
    /// exchange wraps them).
    pub fn fills(edges: [Edge; 2], normal: Option<usize>, exchanged: bool) -> [Option<HaloFill>; 2] {
        [0, 1].map(|axis| (!exchanged || edges[axis] != Edge::Periodic).then(|| edges[axis].fill(normal == Some(axis))))
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

    /// References to the three fields.
    pub fn as_ref(&self) -> State<&F> {
        State { h: &self.h, hu: &self.hu, hv: &self.hv }
    }

    /// Mutable references to the three fields.
    pub fn as_mut(&mut self) -> State<&mut F> {
        State { h: &mut self.h, hu: &mut self.hu, hv: &mut self.hv }
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

    /// `Σ h ΔxΔy` over the interior, m³.
    pub fn mass(&self, state: &State<Field2<f64>>) -> f64 {
        interior_sum(&state.h) * self.dx[0] * self.dx[1]
    }

    /// The halo every field needs per axis: the reach of [`SweStage`] into the stage's input as
    /// the macro recorded it ([`SweSpeed`] reads at the cell only). [`HALO`] must cover it.
    pub fn halo_needed(&self) -> Result<HaloWidths<2>, Error> {
        Ok(["h", "hu", "hv"].iter().try_fold(HaloWidths::none(), |w, name| w.read_by::<SweStage>(name))?)
    }

    /// The decomposition of this model's grid over `domains` subdomains: over process grid
    /// `grid` when given (its product must be `domains`), else the grid of least halo surface
    /// ([`Decomposition::auto`]). The periodic axes wrap around; every subdomain must be at least
    /// [`HALO`] cells thick where it has a neighbour (the exchange copies that many layers).
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 2]>) -> Result<Decomposition<2>, Error> {
        let periodic = self.edges.map(|e| e == Edge::Periodic);
        Ok(Decomposition::with_grid(self.n, domains, grid, periodic, self.checked_halo()?)?)
    }

    /// The fields' halo widths, refused where they do not cover [`Model::halo_needed`].
    fn checked_halo(&self) -> Result<[usize; 2], Error> {
        let needed = self.halo_needed()?.0;
        let halo = self.shape().halo_widths();
        if (0..2).any(|a| halo[a] < needed[a]) {
            return Err(format!(
                "the fields' halo is {halo:?}, but SweStage reads {needed:?} cells around a cell: widen HALO to its reach"
            )
            .into());
        }
        Ok(halo)
    }
}

/// Whether a run to `t_end` goes on at time `t` (it stops within round-off of `t_end`).
pub fn running(t: f64, t_end: f64) -> bool {
    t < t_end * (1.0 - 1e-14)
}

/// The CFL time step at time `t` for the fastest signal speed `speed` ([`Model::dt`]), cut to
/// end exactly at `t_end` if given; refused when it is not a positive number.
fn cfl_dt(model: &Model, speed: f64, t: f64, t_end: Option<f64>) -> Result<f64, Error> {
    let dt = model.dt(speed);
    if !dt.is_finite() || dt <= 0.0 {
        return Err(format!("time step {dt} at t = {t}: the state is no longer wet and finite").into());
    }
    Ok(t_end.map_or(dt, |end| dt.min(end - t)))
}

/// The fastest signal speed of the cells of `range` of `q`: [`SweSpeed`] folded on `exec` (on a
/// GPU one number comes back).
fn fastest<E: Executor>(
    exec: &E,
    range: &Loop<2>,
    strategy: Option<Strategy>,
    q: State<&E::Field<f64, 2>>,
) -> Result<f64, LaunchError> {
    let mut fastest = Max::new();
    exec.run_with(range, SweSpeed, strategy, (G, q.h, q.hu, q.hv, &mut fastest))?;
    Ok(fastest.get())
}

/// SSP-RK3 stage `k` of a step of `dt` over the cells of `range`: [`SweStage`] with
/// `o = a n + b (s + Δt L(s))`, `(a, b) = SSP_RK3[k]`, `n` the state at the step's start.
#[allow(clippy::too_many_arguments)]
fn run_stage<E: Executor>(
    exec: &E,
    range: &Loop<2>,
    strategy: Option<Strategy>,
    model: &Model,
    k: usize,
    dt: f64,
    n: State<&E::Field<f64, 2>>,
    s: State<&E::Field<f64, 2>>,
    o: State<&mut E::Field<f64, 2>>,
) -> Result<(), LaunchError> {
    let (a, b) = SSP_RK3[k];
    let [dt_dx, dt_dy] = model.dx.map(|dx| dt / dx);
    let args = (a, b, dt_dx, dt_dy, G, n.h, n.hu, n.hv, s.h, s.hu, s.hv, o.h, o.hu, o.hv);
    exec.run_with(range, SweStage, strategy, args)
}

/// The three stages of an SSP-RK3 step on the state `q` and the stage buffers `stage1`,
/// `stage2` (one domain's fields, or every subdomain's): before each stage `fill` refills the
/// halos of its input, then `stage(k, n, s, o)` runs stage `k` from input `s` into `o`; the
/// new state ends in `q`.
fn ssp_rk3<S>(
    q: &mut S,
    stage1: &mut S,
    stage2: &mut S,
    mut fill: impl FnMut(&mut S) -> Result<(), LaunchError>,
    mut stage: impl FnMut(usize, &S, &S, &mut S) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    fill(q)?;
    stage(0, q, q, stage1)?;
    fill(stage1)?;
    stage(1, q, stage1, stage2)?;
    fill(stage2)?;
    stage(2, q, stage2, stage1)?;
    std::mem::swap(q, stage1);
    Ok(())
}

/// The sum of a field's interior values, row by row.
pub fn interior_sum(f: &Field2<f64>) -> f64 {
    let [nx, ny] = f.shape().interior();
    (0..ny as isize).flat_map(|j| (0..nx as isize).map(move |i| [i, j])).map(|p| f.get(p).expect("interior")).sum()
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
    /// buffers, and each stencil's default strategy.
    pub fn new(exec: E, model: Model, q: &State<Field2<f64>>) -> Result<Self, LaunchError> {
        let shape = model.shape();
        let (stage1, stage2) = (q.try_map(|_| exec.alloc(shape))?, q.try_map(|_| exec.alloc(shape))?);
        let q = q.try_map(|f| exec.upload(f))?;
        let range = Loop2D::interior(&shape);
        Ok(Solver { exec, model, strategy: None, q, stage1, stage2, range, t: 0.0, steps: 0 })
    }

    /// Refills every halo of `q` for the model's boundaries: the three fields along both axes in
    /// one executor call.
    fn fill(exec: &E, edges: [Edge; 2], q: &mut Fields<E>) -> Result<(), LaunchError> {
        let fills = |normal: Option<usize>| Edge::fills(edges, normal, false);
        exec.fill_halos(&mut [(&mut q.h, fills(None)), (&mut q.hu, fills(Some(0))), (&mut q.hv, fills(Some(1)))])
    }

    /// One SSP-RK3 step of `dt` seconds (on a GPU: issued, not waited for).
    pub fn step(&mut self, dt: f64) -> Result<(), Error> {
        let Solver { exec, model, strategy, q, stage1, stage2, range, .. } = self;
        let edges = model.edges;
        ssp_rk3(
            q,
            stage1,
            stage2,
            |s| Self::fill(exec, edges, s),
            |k, n, s, o| run_stage(exec, range, *strategy, model, k, dt, n.as_ref(), s.as_ref(), o.as_mut()),
        )?;
        self.t += dt;
        self.steps += 1;
        Ok(())
    }

    /// A host copy of the current state (waits for the work issued so far).
    pub fn state(&self) -> Result<State<Field2<f64>>, LaunchError> {
        self.q.try_map(|f| self.exec.download(f))
    }

    /// One step with the CFL time step of the current state (the fastest speed by [`SweSpeed`]
    /// on the executor: on a GPU one number comes back), cut to end exactly at `t_end` if given;
    /// returns the step taken.
    pub fn cfl_step(&mut self, t_end: Option<f64>) -> Result<f64, Error> {
        let speed = fastest(&self.exec, &self.range, self.strategy, self.q.as_ref())?;
        let dt = cfl_dt(&self.model, speed, self.t, t_end)?;
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

/// The names of the shallow-water fields in checkpoints.
const SWE_FIELDS: [&str; 3] = ["h", "hu", "hv"];

/// The shallow-water model's name in checkpoints: with its edges, so a restart with other
/// boundaries is refused.
fn swe_name(model: &Model) -> String {
    format!("swe2d {:?}", model.edges)
}

/// The shallow-water run's settings a checkpoint must match.
fn swe_settings(model: &Model) -> [(&'static str, f64); 3] {
    [("cfl", model.cfl), ("dx", model.dx[0]), ("dy", model.dx[1])]
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
        write(&checkpoint::snapshot_of(&id.name, step, time, &id.grid, &id.settings, &fields)?)
    }
}

/// [`Solver::run_until`] on the time-loop driver, with checkpoints: a solver from `q0`, or from `plan.restart` (its
/// state, time and step count), run to `t_end`; `after_step(steps, t)` after each step. Returns
/// the solver and the first step run.
pub fn run_with<E: Executor>(
    exec: E,
    model: Model,
    q0: &State<Field2<f64>>,
    t_end: f64,
    plan: &Plan,
    after_step: impl FnMut(usize, f64),
) -> Result<(Solver<E>, usize), Error> {
    let (fields, settings) = (SWE_FIELDS.to_vec(), swe_settings(&model).to_vec());
    let id = Identity { name: swe_name(&model), grid: model.n.to_vec(), fields, settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<Running<E>, Error> {
        let solver = match c {
            Some(c) => {
                let f = |n: &str| c.field::<f64, 2>(n, &model.shape());
                let mut solver = Solver::new(exec, model, &State { h: f("h")?, hu: f("hu")?, hv: f("hv")? })?;
                (solver.t, solver.steps) = (c.time, c.step as usize);
                solver
            }
            None => Solver::new(exec, model, q0)?,
        };
        Ok(Running { solver, t_end })
    };
    let (run, start) = driver::run(&id, &Plan { model: "swe2d".into(), ..plan.clone() }, build, after_step)?;
    Ok((run.solver, start))
}
