//! Full-waveform inversion (FWI) on the constant-density acoustic wave equation in the squared
//! slowness `m = 1/V²`: `m ∂²u/∂t² + η m ∂u/∂t − ∇²u = q`, 8th order in space (the acoustic
//! model's 25-point star), 2nd order in time, with a damping sponge of `sponge` points on every
//! side instead of the acoustic model's PML (so that the update is one stencil whose adjoint and
//! `m`-gradient `#[stencil(adjoint(..), gradient(..))]` derive exactly).
//!
//! [`Survey`] holds the grid, the models (two layers on a smooth background, plus a small
//! anomaly in the true model), the shots and receivers (anywhere: trilinear [`SparsePoints`]).
//! [`Fwi`] runs it on any [`Executor`]: [`Fwi::traces`] (the forward run),
//! [`Fwi::misfit`] (`Φ = ½ Σ ‖d_syn − d_obs‖²`), [`Fwi::gradient`] (the adjoint run backwards
//! in time with the residuals injected at the receivers, the forward wavefield recomputed from
//! checkpoints by the runtime's Revolve schedule) and [`Fwi::invert`] (gradient descent with a
//! backtracking line search). The fwi3d page of the examples docs gives the conventions.

use std::collections::VecDeque;
use stencil_runtime::adjoint::range_mask;
use stencil_runtime::prelude::*;
use stencil_runtime::revolve::{reverse, Held, ReverseRun, Schedule};
use stencil_runtime::{Decomposition, Executor, Samples, SparsePoints};

use crate::acoustic::{courant_limit, Coefficients, HALO};
use crate::checkpoint::Error;

/// One time step in the interior: `u⁺ = (2u − (1 − d) u⁻ + Δt² ∇²u / m) / (1 + d)`, `d = η Δt / 2`
/// (zero outside the sponge). Linear in `(u, u_prev)`; derived: the reverse time step in scaled
/// cotangents (`FwiWaveScaledAdjointStep`, with `FwiWaveCotangentScale`) and the gradient in `m`
/// reading them (`FwiWaveScaledGradient`), which the gradient runs; the reverse time step and
/// gradient in plain cotangents and the accumulating `FwiWaveAdjoint`, for the tests.
#[stencil(adjoint(u, u_prev), adjoint_step(u, u_prev), gradient(m), scaled_adjoint_step(u, u_prev), scaled_gradient(m))]
#[rustfmt::skip]
pub fn fwi_wave(
    idx: Idx3, c0: f64, cx: [f64; 4], cy: [f64; 4], cz: [f64; 4], dt2: f64,
    m: &Field3<f64>, damp: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>,
) {
    let mut lap = c0 * u[idx];
    for r in 1..=4 {
        lap += cx[r - 1] * (u[idx.ix(r, 0, 0)] + u[idx.ix(-r, 0, 0)]);
    }
    for r in 1..=4 {
        lap += cy[r - 1] * (u[idx.ix(0, r, 0)] + u[idx.ix(0, -r, 0)]);
    }
    for r in 1..=4 {
        lap += cz[r - 1] * (u[idx.ix(0, 0, r)] + u[idx.ix(0, 0, -r)]);
    }
    let d = damp[idx];
    u_next[idx] = (2.0 * u[idx] - (1.0 - d) * u_prev[idx] + dt2 * lap / m[idx]) / (1.0 + d);
}

/// The source term at one node, Devito's `src · Δt² / m`: `u += amount · Δt² / m` (`amount` the
/// source per unit volume times the node's weight). Its gradient in `m` is derived.
#[stencil(gradient(m), scaled_gradient(m))]
pub fn fwi_inject(idx: Idx3, amount: f64, dt2: f64, m: &Field3<f64>, u: &mut Field3<f64>) {
    u[idx] = u[idx] + amount * dt2 / m[idx];
}

/// A smooth Gaussian anomaly of the velocity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anomaly {
    /// Centre, metres from the physical domain's first point (x, y, z).
    pub centre: [f64; 3],
    /// Radius (standard deviation of the Gaussian), metres.
    pub radius: f64,
    /// Peak velocity change, m/s (positive: faster).
    pub dv: f64,
}

/// An inversion problem: grid, models, wavelet, shots, receivers and the optimiser's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Survey {
    /// Points of the physical domain per axis (x, y, z; z is depth).
    pub n: [usize; 3],
    /// Width of the damping sponge on every side, in points.
    pub sponge: usize,
    /// Grid spacing, metres.
    pub h: f64,
    /// Velocities of the upper and the lower layer, m/s.
    pub layers: [f64; 2],
    /// Depth of the interface, metres.
    pub interface: f64,
    /// The smooth background: velocity added per metre of depth, 1/s.
    pub gradient: f64,
    /// The anomaly of the true model.
    pub anomaly: Anomaly,
    /// Peak frequency of the Ricker wavelet, Hz.
    pub f0: f64,
    /// Time step, seconds.
    pub dt: f64,
    /// Time steps per shot.
    pub steps: usize,
    /// Source positions, one shot each (metres from the physical domain's first point).
    pub shots: Vec<[f64; 3]>,
    /// Receiver positions (metres), the same for every shot.
    pub receivers: Vec<[f64; 3]>,
    /// Checkpoint slots of the reverse run (`None`: every step stored).
    pub slots: Option<usize>,
    /// Where the reverse run keeps its checkpoints (default: with the state, on its executor).
    pub held: Held,
    /// Points around every source and receiver (and the sponge) where the update is muted.
    pub mute: usize,
}

impl Survey {
    /// A transmission survey on `n³` points (10 m, sponge 10): 1800 m/s over 2400 m/s from 60 %
    /// depth on a background growing 0.5 m/s per metre, a +150 m/s anomaly in the middle;
    /// `shots` sources alternating between a vertical line near x = 0 (as Devito's crosswell FWI
    /// tutorial places them) and a line along x near the top, and two 5 × 5 grids of receivers,
    /// near x = max and near the bottom; 10 Hz (scaled to the grid), Courant 0.4.
    pub fn transmission(n: usize, steps: usize, shots: usize) -> Survey {
        let h = 10.0;
        let len = (n - 1) as f64 * h;
        let (near, far) = (2.0 * h, len - 2.0 * h);
        let depth = |k: usize, of: usize| len * (k as f64 + 1.0) / (of as f64 + 1.0);
        // Shots alternate between the x = near face and the top (z = near); receivers on the
        // x = far face and the bottom: two crossing views of the middle.
        let half = shots.div_ceil(2);
        let shots = (0..shots)
            .map(|s| {
                let along = depth(s / 2, half);
                if s % 2 == 0 {
                    [near, 0.5 * len, along]
                } else {
                    [along, 0.5 * len, near]
                }
            })
            .collect();
        let (a, b) = (|r: usize| depth(r % 5, 5), |r: usize| depth(r / 5 % 5, 5));
        let receivers = (0..50).map(|r| if r < 25 { [far, a(r), b(r)] } else { [a(r), b(r), far] }).collect();
        let anomaly = Anomaly { centre: [0.5 * len; 3], radius: 0.12 * len, dv: 150.0 };
        let layers = [1800.0, 2400.0];
        let mut survey = Survey {
            n: [n; 3],
            sponge: 10,
            h,
            layers,
            interface: 0.6 * len,
            gradient: 0.5,
            anomaly,
            f0: 10.0 * 32.0 / n as f64,
            dt: 0.0,
            steps,
            shots,
            receivers,
            slots: None,
            held: Held::OnExecutor,
            mute: 3,
        };
        survey.dt = 0.4 * h / survey.v_limit();
        survey
    }

    /// The fastest velocity the inversion may reach (the true model's maximum plus 20 %).
    pub fn v_limit(&self) -> f64 {
        let deepest = (self.n[2] - 1) as f64 * self.h;
        1.2 * (self.layers[0].max(self.layers[1]) + self.gradient.abs() * deepest + self.anomaly.dv.abs())
    }

    /// Checks the parameters: the grid, the velocities, stability, the sparse points.
    pub fn check(&self) -> Result<(), Error> {
        if self.n.iter().any(|&n| n < 2) || self.sponge == 0 {
            return Err(format!("the grid {:?} needs 2 points per axis and a sponge of 1 or more", self.n).into());
        }
        let positive = [self.h, self.f0, self.dt, self.layers[0], self.layers[1], self.anomaly.radius];
        if positive.iter().any(|v| !(v.is_finite() && *v > 0.0)) || self.steps == 0 {
            return Err(format!("h, f0, dt, the layers' velocities, the anomaly's radius ({positive:?}) and the steps ({}) must all be > 0", self.steps).into());
        }
        let limit = courant_limit() * self.h / self.v_limit();
        if self.dt > limit {
            return Err(format!(
                "dt = {:.4e} s is unstable for velocities up to {:.0} m/s (h = {} m): give dt <= {limit:.4e} s",
                self.dt,
                self.v_limit(),
                self.h
            )
            .into());
        }
        if self.shots.is_empty() || self.receivers.is_empty() {
            return Err("give at least one shot and one receiver".into());
        }
        if self.slots == Some(0) {
            return Err("a checkpointed reverse run needs at least 1 slot".into());
        }
        let region = self.physical();
        SparsePoints::new(&region, [self.h; 3], &self.shots).map_err(|e| format!("a shot: {e}"))?;
        SparsePoints::new(&region, [self.h; 3], &self.receivers).map_err(|e| format!("a receiver: {e}"))?;
        Ok(())
    }

    /// The fields' shape: the physical domain plus the sponge on every side, plus a halo of [`HALO`].
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n.map(|n| n + 2 * self.sponge)).halo(HALO)
    }

    /// The physical domain (storage coordinates).
    pub fn physical(&self) -> Loop3D {
        Loop3D::interior(&self.shape()).shrink([self.sponge; 3])
    }

    /// The decomposition of the interior over `domains` subdomains (over `grid` when given).
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, LaunchError> {
        let shape = self.shape();
        Ok(Decomposition::with_grid(shape.interior(), domains, grid, [false; 3], shape.halo_widths())?)
    }

    /// Metres from the physical domain's first point of a global coordinate.
    fn metres(&self, global: [isize; 3]) -> [f64; 3] {
        global.map(|g| (g - self.sponge as isize) as f64 * self.h)
    }

    /// The velocity at a global coordinate, with or without the anomaly (outside the physical
    /// domain, that of its nearest point).
    pub fn velocity(&self, global: [isize; 3], anomaly: bool) -> f64 {
        let last = self.n.map(|n| (n - 1) as f64 * self.h);
        let x: [f64; 3] = std::array::from_fn(|a| self.metres(global)[a].clamp(0.0, last[a]));
        let layer = if x[2] < self.interface { self.layers[0] } else { self.layers[1] };
        let a = &self.anomaly;
        let r2: f64 = (0..3).map(|i| (x[i] - a.centre[i]).powi(2)).sum();
        let bump = if anomaly { a.dv * (-0.5 * r2 / (a.radius * a.radius)).exp() } else { 0.0 };
        layer + self.gradient * x[2] + bump
    }

    /// The squared slowness `1/V²` of the true model (`anomaly`) or of the starting model.
    pub fn slowness(&self, anomaly: bool) -> Result<Field3<f64>, LaunchError> {
        Ok(Field3::try_from_fn(self.shape(), |g| self.velocity(g, anomaly).powi(-2))?)
    }

    /// `d = η Δt / 2` per point: `η = η_max Σ_a (depth into the sponge along a / width)²`,
    /// `η_max = 3 V ln(1000) / (2 w h)`, zero in the physical domain.
    pub fn damping(&self) -> Result<Field3<f64>, LaunchError> {
        let w = self.sponge as f64;
        let eta_max = 3.0 * self.v_limit() * 1000f64.ln() / (2.0 * w * self.h);
        Ok(Field3::try_from_fn(self.shape(), |g| {
            let into = |a: usize| {
                let last = (self.n[a] + self.sponge) as isize - 1;
                (self.sponge as isize - g[a]).max(g[a] - last).max(0) as f64
            };
            0.5 * self.dt * eta_max * (0..3).map(|a| (into(a) / w).powi(2)).sum::<f64>()
        })?)
    }

    /// Where the model is updated: 1 in the physical domain farther than `mute` points from every
    /// source and receiver, 0 elsewhere.
    pub fn update_mask(&self) -> Result<Field3<f64>, LaunchError> {
        let (region, r) = (self.physical(), self.mute as f64 * self.h);
        let (b, e) = (region.begin(), region.end());
        let shape = self.shape();
        Ok(Field3::try_from_fn(shape, |g| {
            let s = shape.storage_of(g).expect("a point of the shape");
            let inside = (0..3).all(|a| s[a] >= b[a] && (s[a] as isize) < e[a]);
            let x = self.metres(g);
            let near = |p: &[f64; 3]| (0..3).map(|a| (x[a] - p[a]).powi(2)).sum::<f64>() <= r * r;
            let far = !self.shots.iter().chain(&self.receivers).any(near);
            f64::from(u8::from(inside && far))
        })?)
    }

    /// The Ricker wavelet per unit volume injected by step `i` (into the state after it):
    /// `(1 − 2π²f0²τ²) exp(−π²f0²τ²) / h³`, `τ = i Δt − 1.2/f0` (the acoustic model's).
    pub fn wavelet(&self) -> Vec<f64> {
        let a = |i: usize| (std::f64::consts::PI * self.f0 * (i as f64 * self.dt - 1.2 / self.f0)).powi(2);
        (0..self.steps).map(|i| (1.0 - 2.0 * a(i)) * (-a(i)).exp() / self.h.powi(3)).collect()
    }
}

/// Receiver traces: `traces[s][r]` is receiver `r` after step `s + 1`.
pub type Traces = Vec<Vec<f64>>;

/// What one reverse run gives besides the gradient it adds to.
pub struct ShotGradient {
    /// The shot's misfit `½ ‖d_syn − d_obs‖²`.
    pub misfit: f64,
    /// The cotangent of the wavelet (`∂Φ/∂wavelet[i]`), when asked for.
    pub wavelet_bar: Vec<f64>,
    /// What the reverse loop ran.
    pub run: ReverseRun,
}

/// A survey placed on an executor: the fixed fields and the sparse points.
pub struct Fwi<'e, E: Executor> {
    exec: &'e E,
    /// The survey.
    pub survey: Survey,
    c: Coefficients<f64>,
    range: Loop3D,
    damp: E::Field<f64, 3>,
    mask: E::Field<f64, 3>,
    zeros: E::Field<f64, 3>,
    shots: Vec<SparsePoints<3>>,
    receivers: SparsePoints<3>,
    /// Each receiver's nodes as points of their own (weight 1; receiver by receiver, in
    /// [`SparsePoints::nodes`] order), and their weights: the reverse run injects a residual
    /// per node, scaled by the node's cotangent scale.
    receiver_nodes: (SparsePoints<3>, Vec<(usize, f64)>),
}

/// The working fields of one reverse run.
struct Work<F> {
    scratch: F,
    a: F,
    b: F,
    t: F,
    syn: Traces,
    /// The first forward sweep's samples still in flight, for `syn`.
    sampling: InFlight,
    residual: Traces,
    misfit: f64,
    wavelet_bar: Vec<f64>,
}

/// Receiver samples in flight ([`SparsePoints::sample_later`]) by step, collected into the
/// traces once more than a few are pending, so that the host does not wait for a GPU each step.
#[derive(Default)]
struct InFlight(VecDeque<(usize, Samples<f64, 3>)>);

impl InFlight {
    /// Steps whose samples may be in flight.
    const STEPS: usize = 8;

    /// Adds step `i`'s samples, collecting the oldest into `traces` beyond [`InFlight::STEPS`].
    fn push(&mut self, i: usize, samples: Samples<f64, 3>, traces: &mut Traces) -> Result<(), Error> {
        self.0.push_back((i, samples));
        while self.0.len() > Self::STEPS {
            self.collect_one(traces)?;
        }
        Ok(())
    }

    /// Collects every sample in flight into `traces`.
    fn collect(&mut self, traces: &mut Traces) -> Result<(), Error> {
        while !self.0.is_empty() {
            self.collect_one(traces)?;
        }
        Ok(())
    }

    fn collect_one(&mut self, traces: &mut Traces) -> Result<(), Error> {
        if let Some((i, samples)) = self.0.pop_front() {
            traces[i] = samples.wait()?;
        }
        Ok(())
    }
}

impl<'e, E: Executor> Fwi<'e, E> {
    /// Checks `survey` and uploads its fixed fields to `exec`.
    pub fn new(exec: &'e E, survey: Survey) -> Result<Self, Error> {
        survey.check()?;
        let (shape, region) = (survey.shape(), survey.physical());
        let range = Loop3D::interior(&shape);
        let shots =
            survey.shots.iter().map(|p| SparsePoints::new(&region, [survey.h; 3], &[*p])).collect::<Result<_, _>>()?;
        let receivers = SparsePoints::new(&region, [survey.h; 3], &survey.receivers)?;
        let (mut at, mut weights) = (Vec::new(), Vec::new());
        for p in 0..receivers.len() {
            for &(node, w) in receivers.nodes(p) {
                at.push(node);
                weights.push((p, w));
            }
        }
        let receiver_nodes = (SparsePoints::on_nodes(&region, &at)?, weights);
        Ok(Fwi {
            exec,
            c: Coefficients::new([survey.h; 3]),
            range,
            damp: exec.upload(&survey.damping()?)?,
            mask: exec.upload(&range_mask(shape, &range))?,
            zeros: exec.alloc(shape)?,
            shots,
            receivers,
            receiver_nodes,
            survey,
        })
    }

    /// Uploads a host field (a model) to the executor.
    pub fn upload(&self, field: &Field3<f64>) -> Result<E::Field<f64, 3>, Error> {
        Ok(self.exec.upload(field)?)
    }

    /// The fields of the state at rest, `[u_prev, u]`.
    fn at_rest(&self) -> Result<[E::Field<f64, 3>; 2], LaunchError> {
        let shape = self.survey.shape();
        Ok([self.exec.alloc(shape)?, self.exec.alloc(shape)?])
    }

    /// Forward step `i` of shot `shot` with `wavelet`: `next` from `(u_prev, u)` = `s`.
    fn step(
        &self,
        m: &E::Field<f64, 3>,
        shot: usize,
        wavelet: &[f64],
        i: usize,
        s: &[E::Field<f64, 3>],
        next: &mut E::Field<f64, 3>,
    ) -> Result<(), LaunchError> {
        let (c, dt2) = (&self.c, self.survey.dt * self.survey.dt);
        let [cx, cy, cz] = c.c;
        self.exec.run(&self.range, FwiWave, (c.c0, cx, cy, cz, dt2, m, &self.damp, &s[1], &s[0], &mut *next))?;
        for (node, amount) in self.shots[shot].spread(0, wavelet[i]) {
            self.exec.run(&node, FwiInject, (amount, dt2, m, &mut *next))?;
        }
        Ok(())
    }

    /// The receiver traces of shot `shot` in model `m` with the source's time function `wavelet`
    /// (one value per step; [`Survey::wavelet`] for the survey's).
    pub fn traces(&self, m: &E::Field<f64, 3>, shot: usize, wavelet: &[f64]) -> Result<Traces, Error> {
        self.check_shot(shot, wavelet)?;
        let mut s = self.at_rest()?;
        let mut next = self.exec.alloc(self.survey.shape())?;
        let (mut traces, mut sampling) = (vec![Vec::new(); self.survey.steps], InFlight::default());
        for i in 0..self.survey.steps {
            self.step(m, shot, wavelet, i, &s, &mut next)?;
            let [p, u] = &mut s;
            std::mem::swap(p, u);
            std::mem::swap(u, &mut next);
            sampling.push(i, self.receivers.sample_later(self.exec, &s[1])?, &mut traces)?;
        }
        sampling.collect(&mut traces)?;
        Ok(traces)
    }

    fn check_shot(&self, shot: usize, wavelet: &[f64]) -> Result<(), Error> {
        if shot >= self.shots.len() || wavelet.len() != self.survey.steps {
            return Err(format!(
                "shot {shot} of {} with a wavelet of {} values: give a shot below {} and one value per step ({})",
                self.shots.len(),
                wavelet.len(),
                self.shots.len(),
                self.survey.steps
            )
            .into());
        }
        Ok(())
    }

    /// The observed data: every shot's traces in model `m` (the true model).
    pub fn observe(&self, m: &E::Field<f64, 3>) -> Result<Vec<Traces>, Error> {
        let w = self.survey.wavelet();
        (0..self.shots.len()).map(|s| self.traces(m, s, &w)).collect()
    }

    /// `Φ(m) = ½ Σ_shots Σ_steps Σ_receivers (d_syn − d_obs)²`.
    pub fn misfit(&self, m: &E::Field<f64, 3>, observed: &[Traces]) -> Result<f64, Error> {
        self.check_observed(observed)?;
        let w = self.survey.wavelet();
        let mut phi = 0.0;
        for (shot, obs) in observed.iter().enumerate() {
            phi += misfit_of(&self.traces(m, shot, &w)?, obs);
        }
        Ok(phi)
    }

    fn check_observed(&self, observed: &[Traces]) -> Result<(), Error> {
        if observed.len() != self.shots.len() {
            return Err(
                format!("the observed data hold {} shots, the survey {}", observed.len(), self.shots.len()).into()
            );
        }
        observed.iter().try_for_each(|o| self.check_traces(o))
    }

    fn check_traces(&self, traces: &Traces) -> Result<(), Error> {
        let (steps, receivers) = (self.survey.steps, self.receivers.len());
        if traces.len() != steps || traces.iter().any(|t| t.len() != receivers) {
            return Err(format!("a shot's traces must hold {steps} steps of {receivers} receivers").into());
        }
        Ok(())
    }

    /// The schedule of a reverse run: binomial with the survey's slots, or every step stored.
    pub fn schedule(&self) -> Result<Schedule, Error> {
        let schedule = match self.survey.slots {
            Some(s) => Schedule::binomial(self.survey.steps, s)?,
            None => Schedule::store_all(self.survey.steps),
        };
        Ok(schedule.held(self.survey.held))
    }

    /// `∂Φ/∂m` of every shot added into `m_bar`; returns `Φ(m)`.
    pub fn gradient(
        &self,
        m: &E::Field<f64, 3>,
        observed: &[Traces],
        m_bar: &mut E::Field<f64, 3>,
    ) -> Result<f64, Error> {
        self.check_observed(observed)?;
        let (w, schedule) = (self.survey.wavelet(), self.schedule()?);
        let mut phi = 0.0;
        for (shot, obs) in observed.iter().enumerate() {
            phi += self.shot_gradient(m, shot, &w, obs, &schedule, m_bar, false)?.misfit;
        }
        Ok(phi)
    }

    /// The reverse run of shot `shot` with `wavelet` against `observed` through `schedule`:
    /// `∂Φ/∂m` added into `m_bar`, and the wavelet's cotangent when `wavelet_bar` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn shot_gradient(
        &self,
        m: &E::Field<f64, 3>,
        shot: usize,
        wavelet: &[f64],
        observed: &Traces,
        schedule: &Schedule,
        m_bar: &mut E::Field<f64, 3>,
        wavelet_bar: bool,
    ) -> Result<ShotGradient, Error> {
        self.check_shot(shot, wavelet)?;
        self.check_traces(observed)?;
        let (exec, shape, n) = (self.exec, self.survey.shape(), self.survey.steps);
        if schedule.steps() != n {
            return Err(format!("a schedule of {} steps for a run of {n}", schedule.steps()).into());
        }
        let (c, dt2) = (&self.c, self.survey.dt * self.survey.dt);
        let [cx, cy, cz] = c.c;
        let alloc = || exec.alloc::<f64, 3>(shape);
        // The reverse run carries the cotangents scaled, μ = λ / ρ (FwiWaveScaledAdjointStep: the
        // forward's cost); ρ = m (1 + d) per point, and at each receiver node for its residuals.
        let mut rho = alloc()?;
        exec.run(&self.range, FwiWaveCotangentScale, (c.c0, cx, cy, cz, dt2, m, &self.damp, &mut rho))?;
        let (nodes, weights) = &self.receiver_nodes;
        let rho_at_nodes = nodes.sample(exec, &rho)?;
        let mut work = Work {
            scratch: alloc()?,
            a: alloc()?,
            b: alloc()?,
            t: alloc()?,
            syn: vec![Vec::new(); n],
            sampling: InFlight::default(),
            residual: Vec::new(),
            misfit: 0.0,
            wavelet_bar: vec![0.0; if wavelet_bar { n } else { 0 }],
        };
        let mut state = self.at_rest()?;
        let source = &self.shots[shot];
        let run = reverse(
            exec,
            schedule,
            &mut state,
            &mut work,
            |w, i, s| -> Result<(), Error> {
                self.step(m, shot, wavelet, i, s, &mut w.scratch)?;
                s.swap(0, 1);
                std::mem::swap(&mut s[1], &mut w.scratch);
                // Recomputed steps sample what the first sweep sampled: only that one samples.
                if w.residual.is_empty() {
                    w.sampling.push(i, self.receivers.sample_later(exec, &s[1])?, &mut w.syn)?;
                }
                Ok(())
            },
            |w, i, first, s| {
                // (a, b): the scaled cotangents μ^{i+2} and μ^{i+1} of u^{i+2} and u^{i+1} (b
                // without the residuals sampled from u^{i+1} yet); t is free for μ^i. Each is zero
                // outside the forward range, as the scaled step needs: zeroed here, then written
                // only over the range.
                if first {
                    self.step(m, shot, wavelet, i, s, &mut w.scratch)?;
                    w.sampling.collect(&mut w.syn)?;
                    w.syn[i] = self.receivers.sample(exec, &w.scratch)?;
                    w.residual = w
                        .syn
                        .iter()
                        .zip(observed)
                        .map(|(s, o)| s.iter().zip(o).map(|(s, o)| s - o).collect())
                        .collect();
                    w.misfit = misfit_of(&w.syn, observed);
                    exec.copy(&mut w.a, &self.zeros)?;
                    exec.copy(&mut w.b, &self.zeros)?;
                }
                // The receivers sampled u^{i+1}: their residuals complete its cotangent, the
                // transpose of `sample` (one operation for all receivers' nodes), each node's
                // share divided by its scale.
                let residual = &w.residual[i];
                let amounts: Vec<f64> =
                    weights.iter().zip(&rho_at_nodes).map(|(&(p, wt), rho)| residual[p] * wt / rho).collect();
                nodes.inject(exec, &mut w.b, &amounts)?;
                for (node, amount) in source.spread(0, wavelet[i]) {
                    let args = (amount, dt2, m, &w.b, &mut *m_bar, &rho, &self.mask);
                    exec.run(&node, FwiInjectScaledGradient, args)?;
                    if wavelet_bar {
                        let (mu, mv) = (exec.read_range(&w.b, &node)?[0], exec.read_range(m, &node)?[0]);
                        let lambda = mu * exec.read_range(&rho, &node)?[0];
                        // ∂(weight · wavelet · Δt² / m)/∂wavelet: the injection's transpose.
                        w.wavelet_bar[i] += weight_of(source, &node) * dt2 / mv * lambda;
                    }
                }
                exec.run(
                    &self.range,
                    FwiWaveScaledGradient,
                    (c.c0, cx, cy, cz, dt2, m, &self.damp, &s[1], &s[0], &w.b, &mut *m_bar, &rho, &self.mask),
                )?;
                // μ^i from μ^{i+1} (b, read at neighbours) and μ^{i+2} (a): the steps i and i + 1
                // read u^i; t is written, not accumulated into.
                exec.run(
                    &self.range,
                    FwiWaveScaledAdjointStep,
                    (c.c0, cx, cy, cz, dt2, m, &self.damp, &mut w.t, &w.a, &w.b),
                )?;
                // (μ^{i+1}, μ^i) for step i − 1: (a, b); t is free.
                std::mem::swap(&mut w.a, &mut w.b);
                std::mem::swap(&mut w.b, &mut w.t);
                Ok(())
            },
        )?;
        Ok(ShotGradient { misfit: work.misfit, wavelet_bar: work.wavelet_bar, run })
    }
}

/// The weight of `node` (a one-point range) in point 0 of `points`.
fn weight_of(points: &SparsePoints<3>, node: &Loop3D) -> f64 {
    points.nodes(0).iter().find(|(n, _)| *n == node.begin()).map_or(0.0, |(_, w)| *w)
}

/// `½ ‖syn − obs‖²`.
pub fn misfit_of(syn: &Traces, obs: &Traces) -> f64 {
    syn.iter().flatten().zip(obs.iter().flatten()).map(|(s, o)| 0.5 * (s - o) * (s - o)).sum()
}

/// One model update: `out = clamp(m − alpha · mask · g, lo, hi)` (the bounds keep the velocity
/// positive and the scheme stable).
#[stencil]
#[rustfmt::skip]
pub fn fwi_update(
    idx: Idx3, alpha: f64, lo: f64, hi: f64,
    m: &Field3<f64>, g: &Field3<f64>, mask: &Field3<f64>, out: &mut Field3<f64>,
) {
    out[idx] = (m[idx] - alpha * mask[idx] * g[idx]).max(lo).min(hi);
}

/// The first trial update changes `m` by up to this fraction of its largest value.
pub const FIRST_STEP: f64 = 0.02;

/// Halvings of the step a line search tries before it gives up.
pub const MAX_TRIES: usize = 8;

/// What [`Fwi::invert`] produced.
pub struct Inversion {
    /// The final squared slowness.
    pub model: Field3<f64>,
    /// The gradient `∂Φ/∂m` at the starting model.
    pub first_gradient: Field3<f64>,
    /// `Φ` of the starting model, then after every iteration.
    pub misfits: Vec<f64>,
    /// Why it stopped before the iterations asked for, if it did.
    pub stopped: Option<String>,
}

impl<E: Executor> Fwi<'_, E> {
    /// Gradient descent from the squared slowness `m0` for `iterations` iterations: the masked
    /// gradient ([`Survey::update_mask`]) as the direction, a backtracking line search from a
    /// step that changes `m` by [`FIRST_STEP`] of its largest value at first (then 1.5 times the
    /// last accepted step), halving up to [`MAX_TRIES`] times until `Φ` decreases (Armijo,
    /// `c = 1e-4`). `after(k, Φ)` after iteration `k`.
    pub fn invert(
        &self,
        m0: &Field3<f64>,
        observed: &[Traces],
        iterations: usize,
        mut after: impl FnMut(usize, f64),
    ) -> Result<Inversion, Error> {
        let (exec, shape) = (self.exec, self.survey.shape());
        let mask_host = self.survey.update_mask()?;
        let mask = exec.upload(&mask_host)?;
        let (lo, hi) = (self.survey.v_limit().powi(-2), m0.to_vec().iter().fold(0.0, |a: f64, b| a.max(*b)) * 2.0);
        let mut m = exec.upload(m0)?;
        let mut trial = exec.alloc::<f64, 3>(shape)?;
        let mut g = exec.alloc::<f64, 3>(shape)?;
        let (mut misfits, mut first_gradient, mut stopped) = (Vec::new(), None, None);
        let mut fraction = FIRST_STEP;
        for k in 0..iterations {
            exec.copy(&mut g, &self.zeros)?;
            let phi = self.gradient(&m, observed, &mut g)?;
            if k == 0 {
                misfits.push(phi);
            }
            let g_host = exec.download(&g)?;
            let (gv, mv) = (g_host.to_vec(), mask_host.to_vec());
            let g_max = gv.iter().zip(&mv).fold(0.0, |a: f64, (g, w)| a.max((g * w).abs()));
            let descent: f64 = gv.iter().zip(&mv).map(|(g, w)| g * g * w).sum();
            first_gradient.get_or_insert(g_host);
            if g_max == 0.0 || !g_max.is_finite() {
                stopped = Some(format!("iteration {}: the gradient is {g_max} in the updated region", k + 1));
                break;
            }
            let m_max = exec.download(&m)?.to_vec().iter().fold(0.0, |a: f64, b| a.max(*b));
            let mut accepted = None;
            for _ in 0..MAX_TRIES {
                let alpha = fraction * m_max / g_max;
                exec.run(&self.range, FwiUpdate, (alpha, lo, hi, &m, &g, &mask, &mut trial))?;
                let phi_new = self.misfit(&trial, observed)?;
                if phi_new <= phi - 1e-4 * alpha * descent {
                    accepted = Some(phi_new);
                    break;
                }
                fraction *= 0.5;
            }
            let Some(phi_new) = accepted else {
                stopped = Some(format!("iteration {}: no step of {MAX_TRIES} tries decreased the misfit", k + 1));
                break;
            };
            std::mem::swap(&mut m, &mut trial);
            misfits.push(phi_new);
            after(k + 1, phi_new);
            fraction *= 1.5;
        }
        let first_gradient = first_gradient.map_or_else(|| Field3::try_zeros(shape), Ok)?;
        Ok(Inversion { model: exec.download(&m)?, first_gradient, misfits, stopped })
    }
}

/// Where the inversion put its largest velocity change, against the true anomaly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recovered {
    /// The point of the largest `|V_final − V_start|` in the updated region, metres.
    pub peak: [f64; 3],
    /// The velocity change there, m/s (the anomaly's sign if recovered).
    pub peak_dv: f64,
    /// Its distance from the anomaly's centre, metres.
    pub distance: f64,
    /// The correlation of the recovered change with the true one over the updated region.
    pub correlation: f64,
}

impl Survey {
    /// The velocity change of `model` from `start` (squared slownesses) against the anomaly.
    pub fn recovered(&self, start: &Field3<f64>, model: &Field3<f64>) -> Result<Recovered, Error> {
        let mask = self.update_mask()?;
        let (mut best, mut dot, mut n_rec, mut n_true) = ((0.0f64, [0isize; 3]), 0.0, 0.0, 0.0);
        let shape = self.shape();
        for g in shape.storage_points().map(|s| shape.to_global(s)) {
            if mask.get(g) != Some(1.0) {
                continue;
            }
            let v = |f: &Field3<f64>| f.get(g).map_or(0.0, |m| m.powf(-0.5));
            let (dv, dv_true) = (v(model) - v(start), self.velocity(g, true) - self.velocity(g, false));
            if dv.abs() > best.0.abs() {
                best = (dv, g);
            }
            (dot, n_rec, n_true) = (dot + dv * dv_true, n_rec + dv * dv, n_true + dv_true * dv_true);
        }
        let peak = self.metres(best.1);
        let distance = (0..3).map(|a| (peak[a] - self.anomaly.centre[a]).powi(2)).sum::<f64>().sqrt();
        let correlation = if n_rec > 0.0 { dot / (n_rec * n_true).sqrt() } else { 0.0 };
        Ok(Recovered { peak, peak_dv: best.0, distance, correlation })
    }

    /// The xz section through the anomaly's centre of the physical domain: `(values, width)`,
    /// depth downwards, `f` of each point's squared slowness (or gradient) value.
    pub fn section(&self, field: &Field3<f64>, f: impl Fn(f64) -> f64) -> (Vec<f32>, usize) {
        let p = self.sponge as isize;
        let y = p + (self.anomaly.centre[1] / self.h).round() as isize;
        let [nx, _, nz] = self.n.map(|n| n as isize);
        let values = (p..p + nz).flat_map(|z| (p..p + nx).map(move |x| [x, y, z]));
        (values.map(|g| f(field.get(g).unwrap_or(0.0)) as f32).collect(), nx as usize)
    }

    /// Writes the models, the first gradient and the misfit curve under `dir`: `.npy` (the
    /// velocities `v_true`, `v_start`, `v_final`, `gradient` in `∂Φ/∂m`, `misfit`) and `.png` (their
    /// xz sections through the anomaly, the update `v_final − v_start`, the misfit curve).
    pub fn write(&self, dir: &std::path::Path, start: &Field3<f64>, inv: &Inversion) -> Result<(), Error> {
        use crate::output::{write_png_curve, write_png_image};
        use stencil_runtime::io::npy;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let velocity = |m: &Field3<f64>| Field3::try_from_fn(self.shape(), |g| m.get(g).map_or(0.0, |m| m.powf(-0.5)));
        let truth = self.slowness(true)?;
        let (lo, hi) = (self.velocity([0; 3], false) * 0.9, self.v_limit() / 1.2);
        for (name, m) in [("v_true", &truth), ("v_start", start), ("v_final", &inv.model)] {
            npy::write(dir.join(format!("{name}.npy")), &velocity(m)?)?;
            let (values, width) = self.section(m, |m| m.powf(-0.5));
            write_png_image(dir.join(format!("{name}.png")), &values, width, lo as f32, hi as f32)?;
        }
        npy::write(dir.join("gradient.npy"), &inv.first_gradient)?;
        let signed = |path: &str, values: Vec<f32>, width: usize| -> Result<(), Error> {
            let peak = values.iter().fold(0.0f32, |a, v| a.max(v.abs())).max(f32::MIN_POSITIVE);
            let cells: Vec<f32> = values.iter().map(|v| v / peak).collect();
            Ok(crate::output::write_png_signed(dir.join(path), &cells, width)?)
        };
        let (g, width) = self.section(&inv.first_gradient, |g| -g);
        signed("gradient.png", g, width)?;
        let dv = Field3::try_from_fn(self.shape(), |p| {
            inv.model.get(p).map_or(0.0, |m| m.powf(-0.5)) - start.get(p).map_or(0.0, |m| m.powf(-0.5))
        })?;
        let (u, width) = self.section(&dv, |v| v);
        signed("update.png", u, width)?;
        let curve = Field::try_from_fn(Shape::new([inv.misfits.len()]).halo(0), |[k]| inv.misfits[k as usize])?;
        npy::write(dir.join("misfit.npy"), &curve)?;
        write_png_curve(dir.join("misfit.png"), &inv.misfits)?;
        Ok(())
    }
}
