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
//! stencil [`swe_stage`], `q_out = a q_n + b (q + Δt L(q))` with `(a, b)` = `(0, 1)`,
//! `(3/4, 1/4)`, `(1/3, 2/3)`. `Δt = cfl · min(Δx, Δy) / max(max(|u|, |v|) + √(g h))`, the speed
//! of every cell at the start of the step computed by the stencil [`swe_speed`] (on the GPU,
//! then one field copied back) and its maximum taken on the host.
//!
//! **Boundaries** ([`Edge`], per axis): a reflective wall mirrors the state into the halo and
//! negates the momentum normal to it (`HaloFill::MirrorNegated` for `hu` on x, `hv` on y,
//! `HaloFill::Mirror` for the rest), so the reconstructed states at the wall are mirror images
//! and the HLL mass flux through it is exactly zero; outflow copies the last cell outwards
//! (`ZeroGradient`); periodic wraps. Halos are refilled before every stage.
//!
//! Dry cells (`h = 0`) are not handled: the depth must stay positive.

use stencil_runtime::prelude::*;
#[cfg(feature = "cuda")]
use stencil_runtime::{cuda::Gpu, DeviceField2, Strategy};
use stencil_runtime::{HaloFill, Loop};

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

/// The fastest signal speed at a cell, `max(|u|, |v|) + √(g h)`: the time step's input (the
/// maximum over the cells is taken on the host).
#[stencil]
pub fn swe_speed(idx: Idx2, g: f64, h: &Field2<f64>, hu: &Field2<f64>, hv: &Field2<f64>, speed: &mut Field2<f64>) {
    let u = hu[idx] / h[idx];
    let v = hv[idx] / h[idx];
    speed[idx] = u.abs().max(v.abs()) + (g * h[idx]).sqrt();
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
}

/// The sum of a field's interior values, row by row.
pub fn interior_sum(f: &Field2<f64>) -> f64 {
    let [nx, ny] = f.shape().interior();
    (0..ny as isize).flat_map(|j| (0..nx as isize).map(move |i| [i, j])).map(|p| f.get(p).expect("interior")).sum()
}

/// The largest of `values`, NaN if one is NaN (a blown-up state must not pass as a time step).
fn max_value(values: &[f64]) -> f64 {
    values.iter().fold(f64::NEG_INFINITY, |m, &v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) })
}

/// Where the fields live and how a stage runs there: the CPU ([`Cpu`]) or, with the `cuda`
/// feature, a GPU ([`OnGpu`]).
pub trait Executor {
    /// The field type.
    type Field;

    /// Fills the halo of `field` along `axis` as `fill` says.
    fn fill_halo(&self, field: &mut Self::Field, axis: usize, fill: HaloFill)
        -> Result<(), Box<dyn std::error::Error>>;

    /// One stage of [`swe_stage`] over `range`: `out = a q_n + b (q + Δt L(q))`.
    #[allow(clippy::too_many_arguments)]
    fn stage(
        &self,
        range: &Loop2D,
        ab: (f64, f64),
        dt_dx: [f64; 2],
        q_n: &State<Self::Field>,
        q: &State<Self::Field>,
        out: &mut State<Self::Field>,
    ) -> Result<(), LaunchError>;

    /// [`swe_speed`] of `q` over `range` into `speed`.
    fn speed(&self, range: &Loop2D, q: &State<Self::Field>, speed: &mut Self::Field) -> Result<(), LaunchError>;

    /// The largest value of `field`, halo and padding included (NaN if any value is NaN); a
    /// device field is copied to the host for it.
    fn max_of(&self, field: &Self::Field) -> Result<f64, Box<dyn std::error::Error>>;

    /// A host copy of a state.
    fn to_host(&self, q: &State<Self::Field>) -> Result<State<Field2<f64>>, Box<dyn std::error::Error>>;
}

/// The CPU executor: host fields, the rayon nest.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

impl Executor for Cpu {
    type Field = Field2<f64>;

    fn fill_halo(
        &self,
        field: &mut Field2<f64>,
        axis: usize,
        fill: HaloFill,
    ) -> Result<(), Box<dyn std::error::Error>> {
        Ok(field.fill_halo(axis, fill)?)
    }

    fn stage(
        &self,
        range: &Loop2D,
        (a, b): (f64, f64),
        [dt_dx, dt_dy]: [f64; 2],
        q_n: &State<Field2<f64>>,
        q: &State<Field2<f64>>,
        out: &mut State<Field2<f64>>,
    ) -> Result<(), LaunchError> {
        range.run(
            SweStage,
            (a, b, dt_dx, dt_dy, G, &q_n.h, &q_n.hu, &q_n.hv, &q.h, &q.hu, &q.hv, &mut out.h, &mut out.hu, &mut out.hv),
        )
    }

    fn speed(&self, range: &Loop2D, q: &State<Field2<f64>>, speed: &mut Field2<f64>) -> Result<(), LaunchError> {
        range.run(SweSpeed, (G, &q.h, &q.hu, &q.hv, speed))
    }

    fn max_of(&self, field: &Field2<f64>) -> Result<f64, Box<dyn std::error::Error>> {
        Ok(max_value(field.as_slice()))
    }

    fn to_host(&self, q: &State<Field2<f64>>) -> Result<State<Field2<f64>>, Box<dyn std::error::Error>> {
        Ok(q.clone())
    }
}

/// The GPU executor: device fields, one kernel per stage with `strategy` (`None`: the
/// stencil's default).
#[cfg(feature = "cuda")]
pub struct OnGpu<'a> {
    /// The device.
    pub gpu: &'a Gpu,
    /// The kernel strategy of [`swe_stage`].
    pub strategy: Option<Strategy>,
}

#[cfg(feature = "cuda")]
impl Executor for OnGpu<'_> {
    type Field = DeviceField2<f64>;

    fn fill_halo(
        &self,
        field: &mut DeviceField2<f64>,
        axis: usize,
        fill: HaloFill,
    ) -> Result<(), Box<dyn std::error::Error>> {
        Ok(field.fill_halo(axis, fill)?)
    }

    fn stage(
        &self,
        range: &Loop2D,
        (a, b): (f64, f64),
        [dt_dx, dt_dy]: [f64; 2],
        q_n: &State<DeviceField2<f64>>,
        q: &State<DeviceField2<f64>>,
        out: &mut State<DeviceField2<f64>>,
    ) -> Result<(), LaunchError> {
        let strategy = self.strategy.unwrap_or_else(|| Strategy::default_for(SweStage::ir()));
        range.with_strategy(strategy).run_on(
            self.gpu,
            SweStage,
            (a, b, dt_dx, dt_dy, G, &q_n.h, &q_n.hu, &q_n.hv, &q.h, &q.hu, &q.hv, &mut out.h, &mut out.hu, &mut out.hv),
        )
    }

    fn speed(
        &self,
        range: &Loop2D,
        q: &State<DeviceField2<f64>>,
        speed: &mut DeviceField2<f64>,
    ) -> Result<(), LaunchError> {
        let strategy = self.strategy.unwrap_or_else(|| Strategy::default_for(SweSpeed::ir()));
        range.with_strategy(strategy).run_on(self.gpu, SweSpeed, (G, &q.h, &q.hu, &q.hv, speed))
    }

    fn max_of(&self, field: &DeviceField2<f64>) -> Result<f64, Box<dyn std::error::Error>> {
        Ok(max_value(field.download()?.as_slice()))
    }

    fn to_host(&self, q: &State<DeviceField2<f64>>) -> Result<State<Field2<f64>>, Box<dyn std::error::Error>> {
        Ok(State { h: q.h.download()?, hu: q.hu.download()?, hv: q.hv.download()? })
    }
}

/// A model's state on an executor with the buffers of the Runge-Kutta stages.
pub struct Solver<E: Executor> {
    /// The executor.
    pub exec: E,
    /// The problem.
    pub model: Model,
    /// The state at the current time.
    pub q: State<E::Field>,
    stage1: State<E::Field>,
    stage2: State<E::Field>,
    speed: E::Field,
    range: Loop<2>,
    /// The simulated time, s.
    pub t: f64,
    /// Steps taken.
    pub steps: usize,
}

impl<E: Executor> Solver<E> {
    /// A solver starting from `q` (the stage buffers start as copies of it: `make` builds each)
    /// with `speed` a field of zeros (halo and padding stay zero: the maximum takes them in).
    pub fn new(exec: E, model: Model, mut make: impl FnMut() -> State<E::Field>, speed: E::Field) -> Self {
        let (q, stage1, stage2) = (make(), make(), make());
        let range = Loop2D::interior(&model.shape());
        Solver { exec, model, q, stage1, stage2, speed, range, t: 0.0, steps: 0 }
    }

    /// Refills every halo of `q` for the model's boundaries.
    fn fill(exec: &E, edges: [Edge; 2], q: &mut State<E::Field>) -> Result<(), Box<dyn std::error::Error>> {
        for (axis, edge) in edges.into_iter().enumerate() {
            exec.fill_halo(&mut q.h, axis, edge.fill(false))?;
            exec.fill_halo(&mut q.hu, axis, edge.fill(axis == 0))?;
            exec.fill_halo(&mut q.hv, axis, edge.fill(axis == 1))?;
        }
        Ok(())
    }

    /// One SSP-RK3 step of `dt` seconds.
    pub fn step(&mut self, dt: f64) -> Result<(), Box<dyn std::error::Error>> {
        let dt_dx = [dt / self.model.dx[0], dt / self.model.dx[1]];
        let (exec, edges, range) = (&self.exec, self.model.edges, &self.range);
        Self::fill(exec, edges, &mut self.q)?;
        exec.stage(range, SSP_RK3[0], dt_dx, &self.q, &self.q, &mut self.stage1)?;
        Self::fill(exec, edges, &mut self.stage1)?;
        exec.stage(range, SSP_RK3[1], dt_dx, &self.q, &self.stage1, &mut self.stage2)?;
        Self::fill(exec, edges, &mut self.stage2)?;
        exec.stage(range, SSP_RK3[2], dt_dx, &self.q, &self.stage2, &mut self.stage1)?;
        std::mem::swap(&mut self.q, &mut self.stage1);
        self.t += dt;
        self.steps += 1;
        Ok(())
    }

    /// A host copy of the current state.
    pub fn state(&self) -> Result<State<Field2<f64>>, Box<dyn std::error::Error>> {
        self.exec.to_host(&self.q)
    }

    /// One step with the CFL time step of the current state ([`swe_speed`] on the executor, its
    /// maximum on the host: one field copied from a GPU),
    /// cut to end exactly at `t_end` if given; returns the step taken.
    pub fn cfl_step(&mut self, t_end: Option<f64>) -> Result<f64, Box<dyn std::error::Error>> {
        self.exec.speed(&self.range, &self.q, &mut self.speed)?;
        let mut dt = self.model.dt(self.exec.max_of(&self.speed)?);
        if !dt.is_finite() || dt <= 0.0 {
            return Err(format!("time step {dt} at t = {}: the state is no longer wet and finite", self.t).into());
        }
        if let Some(end) = t_end {
            dt = dt.min(end - self.t);
        }
        self.step(dt)?;
        Ok(dt)
    }

    /// CFL steps until `t_end`; `after_step(solver)` after each (e.g. a progress bar).
    pub fn run_until(
        &mut self,
        t_end: f64,
        mut after_step: impl FnMut(&Self),
    ) -> Result<(), Box<dyn std::error::Error>> {
        while self.t < t_end * (1.0 - 1e-14) {
            self.cfl_step(Some(t_end))?;
            after_step(self);
        }
        Ok(())
    }
}

impl Solver<Cpu> {
    /// A CPU solver starting from the host state `q`.
    pub fn cpu(model: Model, q: State<Field2<f64>>) -> Self {
        Solver::new(Cpu, model, || q.clone(), Field2::zeros(model.shape()))
    }
}

#[cfg(feature = "cuda")]
impl<'a> Solver<OnGpu<'a>> {
    /// A GPU solver on `gpu` starting from the host state `q` (uploaded).
    pub fn gpu(
        gpu: &'a Gpu,
        strategy: Option<Strategy>,
        model: Model,
        q: &State<Field2<f64>>,
    ) -> Result<Self, stencil_runtime::CudaError> {
        let up = |q: &State<Field2<f64>>| -> Result<_, stencil_runtime::CudaError> {
            Ok(State { h: gpu.upload(&q.h)?, hu: gpu.upload(&q.hu)?, hv: gpu.upload(&q.hv)? })
        };
        let (a, b, c) = (up(q)?, up(q)?, up(q)?);
        let mut bufs = [Some(a), Some(b), Some(c)].into_iter();
        let speed = gpu.upload(&Field2::zeros(model.shape()))?;
        Ok(Solver::new(OnGpu { gpu, strategy }, model, || bufs.next().flatten().expect("three buffers"), speed))
    }
}

/// The circular dam break: depth `h_in` within `radius` of the centre, `h_out` outside, at rest.
pub fn circular_dam(radius: f64, h_in: f64, h_out: f64) -> impl Fn([f64; 2]) -> [f64; 3] {
    move |[x, y]| [if x * x + y * y < radius * radius { h_in } else { h_out }, 0.0, 0.0]
}
