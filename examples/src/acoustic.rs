//! The constant-density acoustic isotropic wave equation of Sai et al. 2020 (section III.A),
//! `(1/V²) ∂²u/∂t² − ∇²u = f`: 8th order in space (the 25-point star), 2nd order in time, over a
//! velocity model given as a field, with a Ricker-wavelet source, receivers, and an absorbing
//! layer (PML) of `pml` points on every side. The grid is cut into the inner region
//! ([`AcousticInner`]) and six PML slabs ([`AcousticPml`]), each its own launch, so no kernel
//! branches on "am I in the PML". The model is written once against [`Executor`] ([`run`]): the
//! host, a GPU or subdomains ([`Distributed`](stencil_runtime::Distributed)) give the same bits.
//! The scheme, the PML's equations and the regions are derived on the acoustic3d page of the
//! examples docs.

use stencil_runtime::io::IoElement;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Element, Executor, Regions, SparsePoints, Strategy};

use crate::checkpoint::{self, Error, Plan};
use crate::driver::{self, End, Identity, Named, Record, Restart, Spec};
use crate::velocity::VelocityGrid;

/// The 8th-order central coefficients of `∂²/∂x²` on a unit grid: centre, then offsets 1..4.
pub const LAPLACIAN_8TH: [f64; 5] = [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0];

/// Halo width of every field: the reach of the 25-point star.
pub const HALO: usize = 4;

/// Steps a run's clock leaves out: they compile (on a GPU, tune) the kernels; on subdomains,
/// steps 2 to 9 are `auto` overlap's trials, whose first split launch compiles the split ranges.
pub const WARM_UP: usize = 10;

/// Largest stable Courant number `V Δt / h` of the scheme on a cubic grid (`Δt² V² λ_max ≤ 4`,
/// `λ_max` the largest eigenvalue of the discrete `−∇²`).
pub fn courant_limit() -> f64 {
    let c = LAPLACIAN_8TH;
    let one_axis = -c[0] + 2.0 * (c[1] - c[2] + c[3] - c[4]);
    2.0 / (3.0 * one_axis).sqrt()
}

/// The inner region: `u_prev ← 2u − u_prev + vdt2 · ∇²u` with the 25-point star (`c0` is the
/// centre coefficient summed over axes; `cx[m - 1]` is `c_m / h_x²`).
#[stencil]
#[rustfmt::skip]
pub fn acoustic_inner<T>(
    idx: Idx3, c0: T, cx: [T; 4], cy: [T; 4], cz: [T; 4], u: &Field3<T>, vdt2: &Field3<T>, u_prev: &mut Field3<T>,
) {
    // The 25-point star, summed axis by axis from the centre out (unrolled: constant offsets).
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
    u_prev[idx] = 2.0 * u[idx] - u_prev[idx] + vdt2[idx] * lap;
}

/// A PML slab: the damped update of the acoustic3d docs page, with `eta = η Δt` and `g[a] = 1 / (4 h_a²)`
/// for `∇eta·∇u`.
#[stencil]
#[rustfmt::skip]
pub fn acoustic_pml<T>(
    idx: Idx3, c0: T, cx: [T; 4], cy: [T; 4], cz: [T; 4], g: [T; 3],
    u: &Field3<T>, vdt2: &Field3<T>, eta: &Field3<T>, u_prev: &mut Field3<T>, phi: &mut Field3<T>,
) {
    // The 25-point star, summed axis by axis from the centre out (unrolled: constant offsets).
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
    let grad = g[0]
        * (eta[idx.ix::<1, 0, 0>()] - eta[idx.ix::<-1, 0, 0>()])
        * (u[idx.ix::<1, 0, 0>()] - u[idx.ix::<-1, 0, 0>()])
        + g[1] * (eta[idx.ix::<0, 1, 0>()] - eta[idx.ix::<0, -1, 0>()])
            * (u[idx.ix::<0, 1, 0>()] - u[idx.ix::<0, -1, 0>()])
        + g[2] * (eta[idx.ix::<0, 0, 1>()] - eta[idx.ix::<0, 0, -1>()])
            * (u[idx.ix::<0, 0, 1>()] - u[idx.ix::<0, 0, -1>()]);
    let e = eta[idx];
    let p = phi[idx];
    u_prev[idx] = ((2.0 - e * e) * u[idx] - (1.0 - e) * u_prev[idx] + vdt2[idx] * (lap + p)) / (1.0 + e);
    phi[idx] = ((1.0 - 0.5 * e) * p - grad) / (1.0 + 0.5 * e);
}

/// The source term at one point: `u_prev += amount · vdt2` (`amount` is the source's value per
/// unit volume at this step).
#[stencil]
pub fn acoustic_inject<T>(idx: Idx3, amount: T, vdt2: &Field3<T>, u_prev: &mut Field3<T>) {
    u_prev[idx] = u_prev[idx] + amount * vdt2[idx];
}

/// The scalar arguments of the stencils for one grid spacing and element type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients<T> {
    /// Centre coefficient of `∇²`, summed over the three axes.
    pub c0: T,
    /// `c_m / h_a²` for offsets `m = 1..4`, per axis `a`.
    pub c: [[T; 4]; 3],
    /// `1 / (4 h_a²)` per axis: the weight of `∇eta·∇u` with central differences.
    pub g: [T; 3],
}

impl Coefficients<f64> {
    /// The coefficients for grid spacings `h` (metres per axis).
    pub fn new(h: [f64; 3]) -> Self {
        let c = LAPLACIAN_8TH;
        Coefficients {
            c0: h.iter().map(|h| c[0] / (h * h)).sum(),
            c: h.map(|h| [c[1], c[2], c[3], c[4]].map(|cm| cm / (h * h))),
            g: h.map(|h| 1.0 / (4.0 * h * h)),
        }
    }

    /// The same values in element type `T`.
    pub fn to<T: Wave>(&self) -> Coefficients<T> {
        Coefficients { c0: T::from_f64(self.c0), c: self.c.map(|a| a.map(T::from_f64)), g: self.g.map(T::from_f64) }
    }
}

/// The fields of the model, on the host or on a device (`F` is the field type).
pub struct State<F> {
    /// The wavefield at the current step.
    pub u: F,
    /// The wavefield at the previous step; overwritten with the next one by a step.
    pub u_prev: F,
    /// `V² Δt²` per point.
    pub vdt2: F,
    /// `η Δt` per point: zero in the inner region.
    pub eta: F,
    /// The PML's auxiliary field (zero in the inner region, where it is never touched).
    pub phi: F,
}

/// The fields' names in checkpoints.
const NAMES: State<&str> = State { u: "u", u_prev: "u_prev", vdt2: "vdt2", eta: "eta", phi: "phi" };

impl<F> State<F> {
    /// Each field through `f` (an upload, a download, a read from a checkpoint), in order.
    pub fn try_map<G, X>(&self, mut f: impl FnMut(&F) -> Result<G, X>) -> Result<State<G>, X> {
        Ok(State {
            u: f(&self.u)?,
            u_prev: f(&self.u_prev)?,
            vdt2: f(&self.vdt2)?,
            eta: f(&self.eta)?,
            phi: f(&self.phi)?,
        })
    }

    /// Host copies of `u` and `u_prev` of a state on `exec` (waits for earlier work).
    pub fn wavefields<E: Executor<Field<T, 3> = F>, T: Element>(&self, exec: &E) -> Result<Wavefields<T>, LaunchError> {
        Ok(Wavefields { u: exec.download(&self.u)?, u_prev: exec.download(&self.u_prev)? })
    }
}

/// The CUDA strategy of each region, in [`Regions::all`] order (thin slabs want other blocks than
/// the inner region); `None` is the stencil's default. The host ignores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStrategies(pub [Option<Strategy>; 7]);

impl RegionStrategies {
    /// The same strategy for every region.
    pub fn uniform(strategy: Option<Strategy>) -> Self {
        RegionStrategies([strategy; 7])
    }
}

/// A field element the model runs in (`f32`, `f64`), with the launches of its three stencils.
pub trait Wave: Element + IoElement + Into<f64> {
    /// The value nearest to `v`.
    fn from_f64(v: f64) -> Self;

    /// One step on `exec`: every region ([`AcousticInner`], then [`AcousticPml`] on the six
    /// slabs; disjoint, so on [`Executor::fork_join`]'s streams) with its strategy (`None`: the
    /// stencil's default), then the source terms ([`AcousticInject`]), then `u` and `u_prev` swap.
    fn step<E: Executor>(
        exec: &E,
        strategies: &RegionStrategies,
        regions: &Regions<3>,
        c: &Coefficients<Self>,
        state: &mut State<E::Field<Self, 3>>,
        source: &[(Loop3D, Self)],
    ) -> Result<(), LaunchError>;
}

/// Implements [`Wave`] for `$t` with the stencils' instantiations for it.
macro_rules! impl_wave {
    ($t:ident) => {
        impl Wave for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }

            fn step<E: Executor>(
                exec: &E,
                strategies: &RegionStrategies,
                regions: &Regions<3>,
                c: &Coefficients<Self>,
                s: &mut State<E::Field<Self, 3>>,
                source: &[(Loop3D, Self)],
            ) -> Result<(), LaunchError> {
                let [cx, cy, cz] = c.c;
                exec.fork_join(7, |handles| {
                    let regions = regions.all().into_iter().zip(strategies.0).zip(handles);
                    for (i, ((range, strategy), handle)) in regions.enumerate() {
                        let (u, vdt2) = (&s.u, &s.vdt2);
                        if i == 0 {
                            let args = (c.c0, cx, cy, cz, u, vdt2, &mut s.u_prev);
                            handle.run_with(&range, AcousticInner::<$t>::new(), strategy, args)?;
                        } else {
                            let args = (c.c0, cx, cy, cz, c.g, u, vdt2, &s.eta, &mut s.u_prev, &mut s.phi);
                            handle.run_with(&range, AcousticPml::<$t>::new(), strategy, args)?;
                        }
                    }
                    Ok(())
                })?;
                for (point, amount) in source {
                    exec.run(point, AcousticInject::<$t>::new(), (*amount, &s.vdt2, &mut s.u_prev))?;
                }
                std::mem::swap(&mut s.u, &mut s.u_prev);
                Ok(())
            }
        }
    };
}

impl_wave!(f32);
impl_wave!(f64);

/// A layer of the velocity model, from its top down to the next layer's top.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layer {
    /// Depth of the layer's top below the top of the physical domain, metres.
    pub top: f64,
    /// P-wave velocity, m/s.
    pub v: f64,
}

/// A run of the model: grid, layers, source, receivers, time step and PML.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Points of the physical domain per axis (x, y, z; z is depth).
    pub n: [usize; 3],
    /// Width of the absorbing layer on every side, in points (0: no layer, reflecting walls).
    pub pml: usize,
    /// Grid spacing, metres (the same on every axis).
    pub h: f64,
    /// The layers, shallowest first; the first starts at depth 0.
    pub layers: Vec<Layer>,
    /// Peak frequency of the Ricker wavelet, Hz.
    pub f0: f64,
    /// Source position: a point of the physical domain (x, y, z indices).
    pub source: [usize; 3],
    /// Depth index of the receiver line (along x, at the source's y).
    pub receiver_depth: usize,
    /// The source at any point of the physical domain (x, y, z in metres from its first point;
    /// replaces `source`): injected into the nodes of its cell with trilinear weights.
    pub source_position: Option<[f64; 3]>,
    /// Receivers at any points of the physical domain (metres; replace the line at
    /// `receiver_depth`): each samples `u` by trilinear interpolation of its cell's nodes.
    pub receiver_positions: Option<Vec<[f64; 3]>>,
    /// Time step, seconds.
    pub dt: f64,
    /// Time steps.
    pub steps: usize,
    /// Theoretical reflection coefficient of the PML at normal incidence (sets `η`'s peak).
    pub pml_reflection: f64,
    /// A velocity per point of the physical domain; when given, it replaces the layers.
    pub velocity_grid: Option<VelocityGrid>,
}

/// Why a model cannot run.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    /// The time step exceeds the stability limit.
    Unstable {
        /// The time step asked for, seconds.
        dt: f64,
        /// The largest stable one for this grid and the fastest layer, seconds.
        limit: f64,
        /// The fastest velocity, m/s.
        v_max: f64,
        /// The grid spacing, metres.
        h: f64,
    },
    /// Anything else that is wrong with the parameters (the message says what to change).
    Invalid(String),
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Unstable { dt, limit, v_max, h } => write!(
                f,
                "dt = {dt:.4e} s is unstable: the 8th-order leapfrog scheme needs V_max dt / h <= {:.4} \
                 (V_max = {v_max} m/s, h = {h} m), i.e. dt <= {limit:.4e} s; lower dt or coarsen the grid",
                courant_limit()
            ),
            ModelError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ModelError {}

impl Model {
    /// The demonstration on `n³` points (10 m): 1500 m/s over 2500 m/s from half depth, a 10 Hz
    /// source near the surface, receivers along x just below it, a 16-point PML, Courant 0.4.
    pub fn layered(n: usize, steps: usize) -> Self {
        let h = 10.0;
        let depth = n as f64 * h;
        let layers = vec![Layer { top: 0.0, v: 1500.0 }, Layer { top: 0.5 * depth, v: 2500.0 }];
        let mut model = Model {
            n: [n; 3],
            pml: 16,
            h,
            layers,
            f0: 10.0,
            source: [n / 2, n / 2, n / 16],
            receiver_depth: n / 32,
            dt: 0.0,
            steps,
            pml_reflection: 1e-4,
            velocity_grid: None,
            source_position: None,
            receiver_positions: None,
        };
        model.dt = 0.4 * h / model.v_max();
        model
    }

    /// The fastest layer's velocity (of the velocity grid, when given).
    pub fn v_max(&self) -> f64 {
        match &self.velocity_grid {
            Some(g) => g.values().fold(0.0, f64::max),
            None => self.layers.iter().map(|l| l.v).fold(0.0, f64::max),
        }
    }

    /// The slowest layer's velocity (of the velocity grid, when given).
    pub fn v_min(&self) -> f64 {
        match &self.velocity_grid {
            Some(g) => g.values().fold(f64::INFINITY, f64::min),
            None => self.layers.iter().map(|l| l.v).fold(f64::INFINITY, f64::min),
        }
    }

    /// Checks the parameters: stability (CFL), the grid, the velocities, source and receivers.
    pub fn check(&self) -> Result<(), ModelError> {
        let invalid = |m: String| Err(ModelError::Invalid(m));
        if self.n.contains(&0) {
            return invalid(format!("the physical grid {:?} has an empty axis; give every axis points", self.n));
        }
        if self.layers.is_empty() || self.layers.iter().any(|l| l.v.is_nan() || l.v <= 0.0 || !l.top.is_finite()) {
            return invalid(format!("the layers {:?} need at least one layer, each with a velocity > 0", self.layers));
        }
        if let Some(g) = &self.velocity_grid {
            g.check(self.n).map_err(ModelError::Invalid)?;
        }
        if !(self.h > 0.0 && self.f0 > 0.0 && self.dt > 0.0) {
            return invalid(format!("h = {}, f0 = {}, dt = {} must all be > 0", self.h, self.f0, self.dt));
        }
        if (0..3).any(|a| self.source[a] >= self.n[a]) || self.receiver_depth >= self.n[2] {
            return invalid(format!(
                "the source {:?} and the receiver depth {} must lie in the physical grid {:?}",
                self.source, self.receiver_depth, self.n
            ));
        }
        let extent = self.n.map(|n| (n - 1) as f64 * self.h);
        let outside = |p: &[f64; 3]| (0..3).any(|a| !(p[a] >= 0.0 && p[a] <= extent[a]));
        if let Some(p) = self.source_position.iter().find(|p| outside(p)) {
            return invalid(format!(
                "the source position {p:?} m lies outside the physical domain [0, {extent:?}] m: give x, y, z in metres from its first point"
            ));
        }
        if let Some((r, p)) = self.receiver_positions.iter().flatten().enumerate().find(|(_, p)| outside(p)) {
            return invalid(format!("receiver {r} at {p:?} m lies outside the physical domain [0, {extent:?}] m"));
        }
        if self.receiver_positions.as_ref().is_some_and(Vec::is_empty) {
            return invalid("the receiver list is empty: give at least one receiver".into());
        }
        let limit = courant_limit() * self.h / self.v_max();
        if self.dt > limit {
            return Err(ModelError::Unstable { dt: self.dt, limit, v_max: self.v_max(), h: self.h });
        }
        Ok(())
    }

    /// The decomposition of [`Model::shape`]'s interior over `domains` subdomains (over process
    /// grid `grid` when given, else [`Decomposition::auto`]'s); no axis wraps around.
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, LaunchError> {
        let shape = self.shape();
        Ok(Decomposition::with_grid(shape.interior(), domains, grid, [false; 3], shape.halo_widths())?)
    }

    /// The fields' shape: the physical domain plus the PML on every side, plus a halo of
    /// [`HALO`]. Global coordinate 0 is the first PML point.
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n.map(|n| n + 2 * self.pml)).halo(HALO)
    }

    /// The inner region (the physical domain) and the six PML slabs.
    pub fn regions(&self) -> Regions<3> {
        Loop3D::interior(&self.shape())
            .split_boundary(BoundaryWidths::uniform(self.pml))
            .expect("the interior is the physical domain plus a PML on each side")
    }

    /// The physical domain: the grid without the absorbing layer.
    pub fn physical(&self) -> Loop3D {
        Loop3D::interior(&self.shape()).shrink([self.pml; 3])
    }

    /// The storage index of a point of the physical domain.
    fn node(&self, p: [usize; 3]) -> [usize; 3] {
        p.map(|v| v + self.pml + HALO)
    }

    /// The source: the grid point `source`, or `source_position` spread over its cell's nodes.
    pub fn sources(&self) -> Result<SparsePoints<3>, LaunchError> {
        Ok(match self.source_position {
            Some(p) => SparsePoints::new(&self.physical(), [self.h; 3], &[p])?,
            None => SparsePoints::on_nodes(&self.physical(), &[self.node(self.source)])?,
        })
    }

    /// The receivers: the line along x through the physical domain at the source's y and the
    /// receiver depth, or the points `receiver_positions` (trilinear between nodes).
    pub fn receivers(&self) -> Result<SparsePoints<3>, LaunchError> {
        Ok(match &self.receiver_positions {
            Some(positions) => SparsePoints::new(&self.physical(), [self.h; 3], positions)?,
            None => {
                let line: Vec<_> =
                    (0..self.n[0]).map(|i| self.node([i, self.source[1], self.receiver_depth])).collect();
                SparsePoints::on_nodes(&self.physical(), &line)?
            }
        })
    }

    /// Velocity at a global coordinate (outside the physical domain, the nearest layer's, or the
    /// velocity grid's at the nearest physical point).
    pub fn velocity(&self, global: [isize; 3]) -> f64 {
        if let Some(g) = &self.velocity_grid {
            let at = std::array::from_fn(|a| (global[a] - self.pml as isize).clamp(0, self.n[a] as isize - 1));
            return g.0.get(at).expect("a point of the physical grid");
        }
        let depth = (global[2] - self.pml as isize) as f64 * self.h;
        self.layers.iter().rev().find(|l| depth >= l.top).unwrap_or(&self.layers[0]).v
    }

    /// `η Δt` at a global coordinate: `η_max Σ_a (d_a / w)²`, `d_a` how far the point lies into
    /// the layer along axis `a` (growing into the halo), `η_max = 3 V_max ln(1/R) / (2 w h)`.
    pub fn eta(&self, global: [isize; 3]) -> f64 {
        if self.pml == 0 {
            return 0.0;
        }
        let w = self.pml as f64;
        let eta_max = 3.0 * self.v_max() * (1.0 / self.pml_reflection).ln() / (2.0 * w * self.h);
        let depth_into = |a: usize| {
            let (g, last) = (global[a], (self.n[a] + self.pml) as isize - 1);
            (self.pml as isize - g).max(g - last).max(0) as f64
        };
        eta_max * self.dt * (0..3).map(|a| (depth_into(a) / w).powi(2)).sum::<f64>()
    }

    /// The initial state: the wavefield at rest, `V²Δt²` and `η Δt` from the model, `φ = 0` (an
    /// error where the host memory for it cannot be had).
    pub fn initial<T: Wave>(&self) -> Result<State<Field3<T>>, LaunchError> {
        let shape = self.shape();
        Ok(State {
            u: Field3::try_zeros(shape)?,
            u_prev: Field3::try_zeros(shape)?,
            vdt2: self.vdt2()?,
            eta: Field3::try_from_fn(shape, |g| T::from_f64(self.eta(g)))?,
            phi: Field3::try_zeros(shape)?,
        })
    }

    /// `V² Δt²` per point of the grid.
    pub fn vdt2<T: Wave>(&self) -> Result<Field3<T>, LaunchError> {
        let dt2 = self.dt * self.dt;
        Ok(Field3::try_from_fn(self.shape(), |g| T::from_f64(self.velocity(g).powi(2) * dt2))?)
    }

    /// The discrete energy in the physical domain, `Σ ((u − u_prev)/Δt)² / V² + |∇u|²` (central
    /// differences) times the cell volume, of the fields after a step and after the one before.
    pub fn energy<T: Wave>(&self, u: &Field3<T>, u_prev: &Field3<T>) -> f64 {
        let at = |f: &Field3<T>, g: [isize; 3]| f.get(g).map_or(0.0, Into::into);
        let (p, n) = (self.pml as isize, self.n.map(|n| n as isize));
        let points = (p..p + n[2]).flat_map(|k| (p..p + n[1]).flat_map(move |j| (p..p + n[0]).map(move |i| [i, j, k])));
        let mut total = 0.0;
        for g in points {
            let ut = (at(u, g) - at(u_prev, g)) / self.dt;
            let v = self.velocity(g);
            let mut grad2 = 0.0;
            for a in 0..3 {
                let (mut lo, mut hi) = (g, g);
                lo[a] -= 1;
                hi[a] += 1;
                grad2 += ((at(u, hi) - at(u, lo)) / (2.0 * self.h)).powi(2);
            }
            total += ut * ut / (v * v) + grad2;
        }
        total * self.h.powi(3)
    }

    /// The source terms of step `step`: per node of the source, its one-point range and what the
    /// source adds per unit volume, the Ricker wavelet `(1 − 2π²f0²τ²) exp(−π²f0²τ²)` with
    /// `τ = step · Δt − 1.2/f0`, times the node's weight (none once the wavelet has died out).
    pub fn source_at<T: Wave>(&self, step: usize) -> Result<Vec<(Loop3D, T)>, LaunchError> {
        if step as f64 * self.dt >= 3.0 / self.f0 {
            return Ok(Vec::new());
        }
        let a = (std::f64::consts::PI * self.f0 * (step as f64 * self.dt - 1.2 / self.f0)).powi(2);
        let amount = (1.0 - 2.0 * a) * (-a).exp() / self.h.powi(3);
        Ok(self.sources()?.spread(0, amount).map(|(range, a)| (range, T::from_f64(a))).collect())
    }
}

/// A pair of consecutive wavefields: `u` after some step and `u_prev` after the one before
/// (what [`Model::energy`] needs).
pub struct Wavefields<T: Element> {
    /// The wavefield after the step.
    pub u: Field3<T>,
    /// The wavefield one step earlier.
    pub u_prev: Field3<T>,
}

/// What a run produced.
pub struct Outcome<T: Element> {
    /// The wavefields after the last step.
    pub last: Wavefields<T>,
    /// The wavefields after the snapshot step, if one was asked for (and run after the restart).
    pub snapshot: Option<Wavefields<T>>,
    /// The receiver traces: `traces[s][r]` is receiver `r` after step `s + 1`.
    pub traces: Vec<Vec<T>>,
    /// The first step run: 0, or the step of the checkpoint it restarted from.
    pub start: usize,
}

/// Runs `model` on `exec` with a CUDA strategy per region (`strategies`; the host ignores
/// them), recording the receivers after every step and the wavefields after step `snapshot`
/// (1-based, if given); `after_step(s)` after step `s` is issued (its receivers are collected a
/// few steps later, without making the host wait for a GPU every step). Checkpoints
/// (the state and the traces so far) and restarts, on any placement, as `plan` says.
pub fn run<E: Executor, T: Wave>(
    exec: &E,
    strategies: &RegionStrategies,
    model: &Model,
    snapshot: Option<usize>,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<Outcome<T>, Error> {
    model.check()?;
    let receivers = model.receivers()?;
    let source = model.source_position.unwrap_or(model.source.map(|i| i as f64 * model.h));
    let line = [f64::NAN, model.source[1] as f64, model.receiver_depth as f64];
    let listening = model.receiver_positions.as_ref().map_or(line.to_vec(), |p| p.concat());
    let mut settings = vec![("dt", model.dt), ("h", model.h), ("f0", model.f0), ("pml", model.pml as f64)];
    settings.extend([("source_x", source[0]), ("source_y", source[1]), ("source_z", source[2])]);
    settings.push(("receivers", checkpoint::hash_setting(listening)));
    let fields = NAMES.fields().into_iter().copied().collect();
    let id = Identity { name: "acoustic3d".into(), grid: model.shape().interior().to_vec(), fields, settings };
    let records = Some(("traces", receivers.len()));
    let spec = Spec { id, shape: model.shape(), end: End::Steps(model.steps), records, warm_up: WARM_UP };
    let build = |restart: Option<Restart<T, 3>>| -> Result<State<E::Field<T, 3>>, Error> {
        let host = match restart {
            Some(r) => {
                let mut fields = r.fields.into_iter();
                let state = NAMES.try_map(|_| fields.next().ok_or("a field of the state is missing"))?;
                // The velocity model (layers or a grid) is this run's: V²Δt² as the run computes it.
                let vdt2 = model.vdt2()?;
                checkpoint::expect_same(r.checkpoint, "velocity model (V² Δt² per point)", &vdt2, &state.vdt2)?;
                checkpoint::within_run(r.checkpoint.step as usize, model.steps)?;
                state
            }
            None => model.initial::<T>()?,
        };
        Ok(host.try_map(|f| exec.upload(f))?)
    };
    let (regions, c) = (model.regions(), Coefficients::new([model.h; 3]).to::<T>());
    let mut snap = None;
    let step = |state: &mut State<E::Field<T, 3>>, s: usize, _| -> Result<(f64, Record<T>), Error> {
        T::step(exec, strategies, &regions, &c, state, &model.source_at(s)?)?;
        let samples = receivers.sample_later(exec, &state.u)?;
        let record = Record::Later(Box::new(move || Ok(samples.wait()?.into_iter().map(T::from_f64).collect())));
        if snapshot == Some(s + 1) {
            snap = Some(state.wavefields(exec)?);
        }
        Ok(((s + 1) as f64 * model.dt, record))
    };
    let plan = Plan { model: spec.id.name.clone(), ..plan.clone() };
    let end = driver::run_fields(exec, &spec, &plan, build, step, |s, _| after_step(s))?;
    Ok(Outcome { last: end.state.wavefields(exec)?, snapshot: snap, traces: end.records, start: end.start })
}

/// The state's fields as checkpoints hold them, in the order of their names (`NAMES`).
impl<F> Named<F> for State<F> {
    fn fields(&self) -> Vec<&F> {
        vec![&self.u, &self.u_prev, &self.vdt2, &self.eta, &self.phi]
    }
}
