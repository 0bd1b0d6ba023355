//! The constant-density acoustic isotropic wave equation of seed paper 002 (section III.A):
//!
//! ```text
//! (1/V²) ∂²u/∂t² − ∇²u = f,   discretised as   u⁺ = 2u − u⁻ + Δt²V² (∇²u + f)
//! ```
//!
//! 8th order in space (the 25-point star, radius 4, standard coefficients), 2nd order in time,
//! over a velocity model given as a field, with a Ricker-wavelet point source.
//!
//! **Regions** (section III.B): the grid is the physical domain surrounded by an absorbing layer
//! (PML) of `pml` points on every side. [`Loop::split_boundary`](stencil_runtime::Loop) cuts it
//! into the inner region, where [`AcousticInner`] applies the equation above, and six slabs
//! (top, bottom, front, back, left, right), where [`AcousticPml`] applies the damped equation
//! below. Each region is its own launch (with its own CUDA strategy on a GPU), so no kernel
//! branches on "am I in the PML".
//!
//! **PML.** A scalar damping profile `η(x)` (zero inside, growing quadratically into the
//! layer) stretches every coordinate as `∂ → ∂ / (1 + η/(iω))`. Multiplying the stretched
//! equation out gives
//!
//! ```text
//! ∂²u/∂t² + 2η ∂u/∂t + η² u = V² (∇²u + φ),     ∂φ/∂t = −η φ − ∇η·∇u
//! ```
//!
//! with one auxiliary field `φ`. The paper's `eta` field holds `η Δt` and the term `∇η·∇u` is
//! its 7-point stencil (central differences, radius 1, on `eta` and `u`). Centred differences
//! in time give
//!
//! ```text
//! u⁺ = ((2 − e²) u − (1 − e) u⁻ + Δt²V² (∇²u + φ)) / (1 + e),   e = η Δt
//! φ⁺ = ((1 − e/2) φ − ∇e·∇u) / (1 + e/2)
//! ```
//!
//! Both stencils update in place: `u_prev` holds `u⁻` on entry and `u⁺` on exit (each point
//! reads only its own old value), so a step is one pass and a swap of `u` and `u_prev`.
//!
//! The outer boundary is `u = 0` in the halo (never written): what the PML lets through is
//! reflected there and damped again on its way back.
//!
//! The model is written once, against [`Executor`]: [`run`] and [`Wave::step`] take the host
//! ([`Host`]) or a GPU (`stencil_runtime::cuda::Gpu`, with the `cuda`
//! feature).
//!
//! [`run_decomposed`] runs the same steps over subdomains ([`Domains`]: host subdomains or one
//! GPU per subdomain): before each step the halos of the fields the stencils read around a point
//! are exchanged ([`ExchangePlan`], from the stencils' recorded reach), then every global region
//! is run on its part in each subdomain. Its results are those of [`run`], bit for bit.

use stencil_runtime::domain::ReachError;
use stencil_runtime::prelude::*;
use stencil_runtime::{
    CompCommBinder, Decomposition, Domains, Element, ErasedField, Executor, HaloExchange, HaloWidths, Halos, Loop,
    Overlap, Regions, Stencil, Strategy, Subdomain,
};

/// The 8th-order central coefficients of `∂²/∂x²` on a unit grid: centre, then offsets 1..4.
pub const LAPLACIAN_8TH: [f64; 5] = [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0];

/// Halo width of every field: the reach of the 25-point star.
pub const HALO: usize = 4;

/// Largest stable Courant number `V Δt / h` of the scheme on a cubic grid: leapfrog is stable
/// while `Δt² V² λ_max ≤ 4`, where `λ_max = 3 (−c₀ + 2 Σ |c_m|) / h²` is the largest eigenvalue
/// of the discrete `−∇²` (the checkerboard mode).
pub fn courant_limit() -> f64 {
    let c = LAPLACIAN_8TH;
    let one_axis = -c[0] + 2.0 * (c[1] - c[2] + c[3] - c[4]);
    2.0 / (3.0 * one_axis).sqrt()
}

// The three stencils of a time step, each generic over its element type: `f32` for the model,
// `f64` for the order-of-accuracy test.

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

/// A PML slab: the damped update of the module docs, with `eta = η Δt` and `g[a] = 1 / (4 h_a²)`
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

impl<T: Element> State<Field3<T>> {
    /// A copy of this host state on `exec`.
    pub fn upload<E: Executor>(&self, exec: &E) -> Result<State<E::Field<T, 3>>, LaunchError> {
        Ok(State {
            u: exec.upload(&self.u)?,
            u_prev: exec.upload(&self.u_prev)?,
            vdt2: exec.upload(&self.vdt2)?,
            eta: exec.upload(&self.eta)?,
            phi: exec.upload(&self.phi)?,
        })
    }
}

/// The fields of a [`State`] by the names the stencils give their parameters.
pub const FIELDS: [&str; 5] = ["u", "u_prev", "vdt2", "eta", "phi"];

impl<F> State<F> {
    /// The field the stencils call `name` (one of [`FIELDS`]).
    pub fn field_mut(&mut self, name: &str) -> Option<&mut F> {
        match name {
            "u" => Some(&mut self.u),
            "u_prev" => Some(&mut self.u_prev),
            "vdt2" => Some(&mut self.vdt2),
            "eta" => Some(&mut self.eta),
            "phi" => Some(&mut self.phi),
            _ => None,
        }
    }

    /// The fields the stencils call `names`, in that order (each name once; unknown names are
    /// skipped).
    pub fn fields_mut(&mut self, names: &[&str]) -> Vec<&mut F> {
        let mut all = [
            ("u", Some(&mut self.u)),
            ("u_prev", Some(&mut self.u_prev)),
            ("vdt2", Some(&mut self.vdt2)),
            ("eta", Some(&mut self.eta)),
            ("phi", Some(&mut self.phi)),
        ];
        names.iter().filter_map(|n| all.iter_mut().find(|(m, _)| m == n)?.1.take()).collect()
    }

    /// Host copies of `u` and `u_prev` of a state on `exec` (waits for earlier work).
    pub fn wavefields<E: Executor<Field<T, 3> = F>, T: Element>(&self, exec: &E) -> Result<Wavefields<T>, LaunchError> {
        Ok(Wavefields { u: exec.download(&self.u)?, u_prev: exec.download(&self.u_prev)? })
    }
}

impl<F> State<Vec<F>> {
    /// The states of every subdomain from the per-field lists (subdomain order).
    fn into_parts(self) -> Vec<State<F>> {
        let State { u, u_prev, vdt2, eta, phi } = self;
        u.into_iter()
            .zip(u_prev)
            .zip(vdt2)
            .zip(eta)
            .zip(phi)
            .map(|((((u, u_prev), vdt2), eta), phi)| State { u, u_prev, vdt2, eta, phi })
            .collect()
    }
}

/// Which stencil a region runs: the inner update or the PML update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The physical domain: [`AcousticInner`].
    Inner,
    /// One of the six slabs of the absorbing layer: [`AcousticPml`].
    Pml,
}

impl RegionKind {
    /// The kind of every region of [`Regions::all`]: the inner one, then six slabs.
    pub const ALL: [RegionKind; 7] = [
        RegionKind::Inner,
        RegionKind::Pml,
        RegionKind::Pml,
        RegionKind::Pml,
        RegionKind::Pml,
        RegionKind::Pml,
        RegionKind::Pml,
    ];
}

/// The CUDA strategy of each region, in [`Regions::all`] order (the inner region, then top,
/// bottom, front, back, left, right); `None` is the stencil's default. Thin slabs want other
/// blocks than the inner region (e.g. a 16-point-wide left slab wastes most of a 128-point-wide
/// z-marching block), which is what per-region launches make possible. The host ignores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStrategies(pub [Option<Strategy>; 7]);

impl RegionStrategies {
    /// The same strategy for every region.
    pub fn uniform(strategy: Option<Strategy>) -> Self {
        RegionStrategies([strategy; 7])
    }
}

/// A field element the model runs in (`f32` for the model, `f64` for tests), with the launches
/// of its three stencils on any [`Executor`].
pub trait Wave: Element + Into<f64> {
    /// The value nearest to `v`.
    fn from_f64(v: f64) -> Self;

    /// One region's update on `exec` with `strategy` (`None`: the stencil's default; the host
    /// ignores it).
    fn region<E: Executor>(
        exec: &E,
        strategy: Option<Strategy>,
        kind: RegionKind,
        range: &Loop3D,
        c: &Coefficients<Self>,
        state: &mut State<E::Field<Self, 3>>,
    ) -> Result<(), LaunchError>;

    /// The source term at one point on `exec`.
    fn inject<E: Executor>(
        exec: &E,
        point: &Loop3D,
        amount: Self,
        state: &mut State<E::Field<Self, 3>>,
    ) -> Result<(), LaunchError>;

    /// One step on `exec`: every region with its stencil and strategy, then the source (if
    /// any), then `u` and `u_prev` swap. The regions are disjoint, so on a GPU the seven
    /// region launches go to seven streams ([`Executor::fork_join`]) and may run concurrently.
    fn step<E: Executor>(
        exec: &E,
        strategies: &RegionStrategies,
        regions: &Regions<3>,
        c: &Coefficients<Self>,
        state: &mut State<E::Field<Self, 3>>,
        source: &[(Loop3D, Self)],
    ) -> Result<(), LaunchError> {
        let regions: Vec<_> =
            RegionKind::ALL.into_iter().zip(regions.all()).zip(strategies.0).map(|((k, r), s)| (k, r, s)).collect();
        step_regions(exec, &regions, c, state, source)
    }

    /// The halo the stencils of a step need around field `field` (a parameter name, one of
    /// [`FIELDS`]): the widest reach of its reads over the three stencils, as the macro
    /// recorded it. An error when no stencil has a parameter of that name.
    fn reach(field: &str) -> Result<HaloWidths<3>, ReachError>;

    /// Whether one of the stencils of a step writes field `field`.
    fn writes(field: &str) -> bool;
}

/// One step on `exec` over the given regions (each with its stencil and strategy; disjoint, so
/// they go to [`Executor::fork_join`]'s handles), then the source terms, then the swap of `u`
/// and `u_prev`: [`Wave::step`] for any list of regions (a subdomain's parts of the global ones).
pub fn step_regions<E: Executor, T: Wave>(
    exec: &E,
    regions: &[(RegionKind, Loop3D, Option<Strategy>)],
    c: &Coefficients<T>,
    state: &mut State<E::Field<T, 3>>,
    source: &[(Loop3D, T)],
) -> Result<(), LaunchError> {
    exec.fork_join(regions.len(), |handles| {
        for ((kind, range, strategy), handle) in regions.iter().zip(handles) {
            T::region(handle, *strategy, *kind, range, c, state)?;
        }
        Ok(())
    })?;
    for (point, amount) in source {
        T::inject(exec, point, *amount, state)?;
    }
    std::mem::swap(&mut state.u, &mut state.u_prev);
    Ok(())
}

/// `widths` widened by the reads of `field` by stencil `S`, if `S` has a parameter of that name
/// (`None` in, `None` out while no stencil has had it).
fn widen<S: Stencil<3>>(widths: Option<HaloWidths<3>>, field: &str) -> Result<Option<HaloWidths<3>>, ReachError> {
    if S::INFO.fields.iter().any(|f| f.name == field) {
        Ok(Some(widths.unwrap_or_else(HaloWidths::none).read_by::<S>(field)?))
    } else {
        Ok(widths)
    }
}

/// Whether stencil `S` writes its parameter `field`.
fn written_by<S: Stencil<3>>(field: &str) -> bool {
    S::INFO.fields.iter().any(|f| f.name == field && f.writable)
}

/// Implements [`Wave`] for `$t` with the stencils' instantiations for it.
macro_rules! impl_wave {
    ($t:ident) => {
        impl Wave for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }

            fn region<E: Executor>(
                exec: &E,
                strategy: Option<Strategy>,
                kind: RegionKind,
                range: &Loop3D,
                c: &Coefficients<Self>,
                s: &mut State<E::Field<Self, 3>>,
            ) -> Result<(), LaunchError> {
                let [cx, cy, cz] = c.c;
                let (u, vdt2) = (&s.u, &s.vdt2);
                match kind {
                    RegionKind::Inner => {
                        let args = (c.c0, cx, cy, cz, u, vdt2, &mut s.u_prev);
                        exec.run_with(range, AcousticInner::<$t>::new(), strategy, args)
                    }
                    RegionKind::Pml => {
                        let args = (c.c0, cx, cy, cz, c.g, u, vdt2, &s.eta, &mut s.u_prev, &mut s.phi);
                        exec.run_with(range, AcousticPml::<$t>::new(), strategy, args)
                    }
                }
            }

            fn inject<E: Executor>(
                exec: &E,
                point: &Loop3D,
                amount: Self,
                s: &mut State<E::Field<Self, 3>>,
            ) -> Result<(), LaunchError> {
                exec.run(point, AcousticInject::<$t>::new(), (amount, &s.vdt2, &mut s.u_prev))
            }

            fn reach(field: &str) -> Result<HaloWidths<3>, ReachError> {
                let widths = widen::<AcousticInner<$t>>(None, field)?;
                let widths = widen::<AcousticPml<$t>>(widths, field)?;
                match widen::<AcousticInject<$t>>(widths, field)? {
                    Some(widths) => Ok(widths),
                    // No stencil has it: the PML stencil (which has every field) says so.
                    None => HaloWidths::of::<AcousticPml<$t>>(field),
                }
            }

            fn writes(field: &str) -> bool {
                written_by::<AcousticInner<$t>>(field)
                    || written_by::<AcousticPml<$t>>(field)
                    || written_by::<AcousticInject<$t>>(field)
            }
        }
    };
}

impl_wave!(f32);
impl_wave!(f64);

/// A layer of the velocity model: from `top` (metres of depth below the top of the physical
/// domain) down to the next layer's top, velocity `v` (m/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layer {
    /// Depth of the layer's top, metres.
    pub top: f64,
    /// P-wave velocity, m/s.
    pub v: f64,
}

/// A velocity model given point by point (m/s) on the physical grid (a field of its interior,
/// e.g. read from a `.npy` or NetCDF file), shared between clones of a [`Model`].
#[derive(Clone)]
pub struct VelocityGrid(pub std::sync::Arc<Field3<f64>>);

impl PartialEq for VelocityGrid {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_array() == other.0.to_array()
    }
}

impl std::fmt::Debug for VelocityGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VelocityGrid({:?})", self.0.shape().interior())
    }
}

impl VelocityGrid {
    /// The interior's values.
    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.0.interior_view().into_iter().copied()
    }
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
    /// The default demonstration: a 128³ physical domain (10 m spacing) of two layers (1500 m/s
    /// over 2500 m/s at half depth), a 10 Hz Ricker source near the surface, receivers along
    /// x just below it, a 16-point PML, Courant number 0.4 and 700 steps (1.12 s: the
    /// reflection from the interface is back at the surface).
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

    /// The largest stable time step.
    pub fn dt_limit(&self) -> f64 {
        courant_limit() * self.h / self.v_max()
    }

    /// Checks the parameters: stability (CFL), a non-empty grid, the source and receivers
    /// inside the physical domain, layers present and positive.
    pub fn check(&self) -> Result<(), ModelError> {
        let invalid = |m: String| Err(ModelError::Invalid(m));
        if self.n.contains(&0) {
            return invalid(format!("the physical grid {:?} has an empty axis; give every axis points", self.n));
        }
        if self.layers.is_empty() || self.layers.iter().any(|l| l.v.is_nan() || l.v <= 0.0 || !l.top.is_finite()) {
            return invalid(format!("the layers {:?} need at least one layer, each with a velocity > 0", self.layers));
        }
        if let Some(g) = &self.velocity_grid {
            if g.0.shape().interior() != self.n {
                return invalid(format!(
                    "the velocity grid has {:?} points, but the physical grid is {:?}: give one velocity per point",
                    g.0.shape().interior(),
                    self.n
                ));
            }
            if let Some(v) = g.values().find(|v| !(v.is_finite() && *v > 0.0)) {
                return invalid(format!("the velocity grid holds {v}: every velocity must be a number > 0"));
            }
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
        if self.dt > self.dt_limit() {
            return Err(ModelError::Unstable { dt: self.dt, limit: self.dt_limit(), v_max: self.v_max(), h: self.h });
        }
        Ok(())
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

    /// Storage coordinates of a point of the physical domain.
    pub fn storage_of(&self, physical: [usize; 3]) -> [usize; 3] {
        physical.map(|p| p + self.pml + HALO)
    }

    /// The one-point ranges of the source's nodes with their weights: the grid point `source`
    /// with weight 1, or the nodes of `source_position`'s cell ([`Model::interpolation`]).
    pub fn source_nodes(&self) -> Result<Vec<(Loop3D, f64)>, LaunchError> {
        let nodes = match self.source_position {
            Some(p) => self.interpolation(p),
            None => vec![(self.source, 1.0)],
        };
        nodes
            .into_iter()
            .map(|(node, w)| {
                let s = self.storage_of(node);
                Ok((Loop::from_bounds(self.shape().extent(), s, s.map(|v| v + 1))?, w))
            })
            .collect()
    }

    /// The points read after every step: the receiver line along x through the physical domain
    /// at the source's y and the receiver depth, or, with `receiver_positions`, the box of the
    /// nodes the receivers interpolate from ([`Model::receiver_traces`] turns its values into
    /// the receivers' values).
    pub fn receiver_range(&self) -> Result<Loop3D, LaunchError> {
        let (begin, end) = match &self.receiver_positions {
            None => {
                let begin = self.storage_of([0, self.source[1], self.receiver_depth]);
                (begin, [begin[0] + self.n[0], begin[1] + 1, begin[2] + 1])
            }
            Some(positions) => {
                let (mut lo, mut hi) = ([usize::MAX; 3], [0; 3]);
                for (node, _) in positions.iter().flat_map(|p| self.interpolation(*p)) {
                    for a in 0..3 {
                        (lo[a], hi[a]) = (lo[a].min(node[a]), hi[a].max(node[a] + 1));
                    }
                }
                (self.storage_of(lo), self.storage_of(hi))
            }
        };
        Ok(Loop::from_bounds(self.shape().extent(), begin, end)?)
    }

    /// The nodes (physical indices) of the cell holding `position` (metres from the first
    /// physical point) and their trilinear weights, the zero weights left out: one node of
    /// weight 1 when the position is a node. The nodes come in a fixed order (x fastest).
    pub fn interpolation(&self, position: [f64; 3]) -> Vec<([usize; 3], f64)> {
        let per_axis: [Vec<(usize, f64)>; 3] = std::array::from_fn(|a| {
            let g = position[a] / self.h;
            let i0 = (g.floor().max(0.0) as usize).min(self.n[a] - 1);
            let frac = g - i0 as f64;
            if frac <= 0.0 || i0 + 1 >= self.n[a] {
                vec![(i0, 1.0)]
            } else {
                vec![(i0, 1.0 - frac), (i0 + 1, frac)]
            }
        });
        let mut nodes = Vec::with_capacity(8);
        for &(k, wz) in &per_axis[2] {
            for &(j, wy) in &per_axis[1] {
                for &(i, wx) in &per_axis[0] {
                    nodes.push(([i, j, k], wx * wy * wz));
                }
            }
        }
        nodes
    }

    /// The receivers' traces from the values of [`Model::receiver_range`] after every step
    /// (`raw[s]`, axis 0 fastest): unchanged for the receiver line; with `receiver_positions`,
    /// each receiver's trilinear interpolation (in the order of [`Model::interpolation`]; a
    /// receiver on a node reads that node's value exactly).
    pub fn receiver_traces<T: Wave>(&self, raw: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, LaunchError> {
        let Some(positions) = &self.receiver_positions else { return Ok(raw) };
        let range = self.receiver_range()?;
        let (begin, len) = (range.begin(), range.len_per_axis());
        let weights: Vec<Vec<(usize, f64)>> = positions
            .iter()
            .map(|p| {
                let at = |node: [usize; 3]| {
                    let s = self.storage_of(node);
                    (s[0] - begin[0]) + len[0] * ((s[1] - begin[1]) + len[1] * (s[2] - begin[2]))
                };
                self.interpolation(*p).into_iter().map(|(node, w)| (at(node), w)).collect()
            })
            .collect();
        Ok(raw
            .into_iter()
            .map(|row| {
                weights
                    .iter()
                    .map(|nodes| match nodes.as_slice() {
                        [(at, _)] => row[*at],
                        _ => T::from_f64(nodes.iter().map(|&(at, w)| w * row[at].into()).sum()),
                    })
                    .collect()
            })
            .collect())
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

    /// `η Δt` at a global coordinate: `η_max Σ_a (d_a / w)²`, where `d_a` is how far the point
    /// lies into the layer along axis `a` (0 inside the physical domain; it keeps growing into
    /// the halo so that `∇eta` is defined on the outermost PML points) and
    /// `η_max = 3 V_max ln(1/R) / (2 w h)` (the usual choice for a quadratic profile).
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

    /// The Ricker wavelet `(1 − 2π²f0²τ²) exp(−π²f0²τ²)`, `τ = t − 1.2/f0`.
    pub fn ricker(&self, t: f64) -> f64 {
        let a = (std::f64::consts::PI * self.f0 * (t - 1.2 / self.f0)).powi(2);
        (1.0 - 2.0 * a) * (-a).exp()
    }

    /// What the source adds at step `step` (whose time is `step · Δt`): the wavelet per unit
    /// volume, as the injection stencil takes it.
    pub fn source_amount(&self, step: usize) -> f64 {
        self.ricker(step as f64 * self.dt) / self.h.powi(3)
    }

    /// The initial state: the wavefield at rest, `V²Δt²` and `η Δt` from the model, `φ = 0`.
    ///
    /// Errors when the host memory for the five fields cannot be had
    /// ([`FieldError::OutOfMemory`](stencil_runtime::FieldError::OutOfMemory): the bytes a field
    /// needs and the memory available).
    pub fn initial<T: Wave>(&self) -> Result<State<Field3<T>>, LaunchError> {
        let shape = self.shape();
        let dt2 = self.dt * self.dt;
        Ok(State {
            u: Field3::try_zeros(shape)?,
            u_prev: Field3::try_zeros(shape)?,
            vdt2: Field3::try_from_fn(shape, |g| T::from_f64(self.velocity(g).powi(2) * dt2))?,
            eta: Field3::try_from_fn(shape, |g| T::from_f64(self.eta(g)))?,
            phi: Field3::try_zeros(shape)?,
        })
    }

    /// The discrete energy in the physical domain,
    /// `Σ ((u − u_prev)/Δt)² / V² + |∇u|²` (central differences), times the cell volume.
    /// Call it between steps (`u` the current field, `u_prev` the previous one).
    pub fn energy<T: Wave>(&self, u: &Field3<T>, u_prev: &Field3<T>) -> f64 {
        let at = |f: &Field3<T>, g: [isize; 3]| f.get(g).map_or(0.0, Into::into);
        let p = self.pml as isize;
        let mut total = 0.0;
        for k in p..p + self.n[2] as isize {
            for j in p..p + self.n[1] as isize {
                for i in p..p + self.n[0] as isize {
                    let g = [i, j, k];
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
            }
        }
        total * self.h.powi(3)
    }

    /// The source terms of step `step` as the injection stencil takes them: per node of the
    /// source, its one-point range and the amount times the node's weight (none once the wavelet
    /// has died out, so no launch is spent on it).
    pub fn source_at<T: Wave>(&self, step: usize) -> Result<Vec<(Loop3D, T)>, LaunchError> {
        let amount = self.source_amount(step);
        if step as f64 * self.dt >= 3.0 / self.f0 {
            return Ok(Vec::new());
        }
        let weighted = |w: f64| if w == 1.0 { amount } else { amount * w };
        Ok(self.source_nodes()?.into_iter().map(|(range, w)| (range, T::from_f64(weighted(w)))).collect())
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
    /// The wavefields after the snapshot step, if one was asked for.
    pub snapshot: Option<Wavefields<T>>,
    /// The receiver traces: `traces[s][r]` is receiver `r` after step `s + 1`.
    pub traces: Vec<Vec<T>>,
    /// Seconds spent in the time loop (set-up, the snapshot and the final download excluded).
    pub seconds: f64,
    /// Steps [`Outcome::seconds`] covers: all but the first (which prepares the kernels), or the
    /// one step of a one-step run.
    pub timed_steps: usize,
}

impl<T: Element> Outcome<T> {
    /// Point updates per second in billions (every point of the grid, PML included).
    pub fn gpts_per_s(&self, model: &Model) -> f64 {
        let points = Loop3D::interior(&model.shape()).points();
        (points * self.timed_steps) as f64 / self.seconds / 1e9
    }
}

/// Runs `model` on `exec` with a CUDA strategy per region (`strategies`; the host ignores
/// them), recording the receivers after every step (one small read each) and the wavefields
/// after step `snapshot` (1-based, if given); `after_step(s)` is called after step `s`, e.g. for
/// a progress bar. The time covers the steps and the receiver reads; not the snapshot (the
/// steps before it are finished first, then its download is left out of the time), the set-up
/// or the final download.
pub fn run<E: Executor, T: Wave>(
    exec: &E,
    strategies: &RegionStrategies,
    model: &Model,
    snapshot: Option<usize>,
    mut after_step: impl FnMut(usize),
) -> Result<Outcome<T>, Box<dyn std::error::Error>> {
    model.check()?;
    let (regions, c) = (model.regions(), Coefficients::new([model.h; 3]).to::<T>());
    let receivers = model.receiver_range()?;
    let mut state = model.initial::<T>()?.upload(exec)?;
    let mut traces = Vec::with_capacity(model.steps);
    let mut snap = None;
    let mut start = std::time::Instant::now();
    for s in 0..model.steps {
        T::step(exec, strategies, &regions, &c, &mut state, &model.source_at(s)?)?;
        traces.push(exec.read_range(&state.u, &receivers)?);
        if snapshot == Some(s + 1) {
            exec.synchronize()?;
            let pause = std::time::Instant::now();
            snap = Some(state.wavefields(exec)?);
            start += pause.elapsed();
        }
        after_step(s + 1);
        if s == 0 && model.steps > 1 {
            // The first step prepares the kernels (compiles them on a GPU): not timed.
            exec.synchronize()?;
            start = std::time::Instant::now();
        }
    }
    exec.synchronize()?;
    let seconds = start.elapsed().as_secs_f64();
    let timed_steps = model.steps.saturating_sub(1).max(1);
    let traces = model.receiver_traces(traces)?;
    Ok(Outcome { last: state.wavefields(exec)?, snapshot: snap, traces, seconds, timed_steps })
}

/// The fields a decomposed run exchanges between subdomains, from the stencils' recorded reach
/// ([`Wave::reach`]): a field read only at offset 0 needs no halo; one read around a point needs
/// its neighbours' values there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangePlan {
    /// Fields read around a point that a step changes (written by a stencil, or `u`, which the
    /// swap makes the written `u_prev`): exchanged before every step.
    pub every_step: Vec<&'static str>,
    /// Fields read around a point that no step changes: exchanged once, before the first step.
    pub once: Vec<&'static str>,
    /// The halo all these reads need: the widest reach per axis over every field.
    pub halo: [usize; 3],
}

impl ExchangePlan {
    /// The plan for the stencils of element type `T`.
    pub fn of<T: Wave>() -> Result<Self, ReachError> {
        let mut plan = ExchangePlan { every_step: Vec::new(), once: Vec::new(), halo: [0; 3] };
        for name in FIELDS {
            let reach = T::reach(name)?.0;
            for (h, r) in plan.halo.iter_mut().zip(reach) {
                *h = (*h).max(r);
            }
            if reach == [0; 3] {
                continue;
            }
            let changes = T::writes(name) || (name == "u" && T::writes("u_prev"));
            if changes { &mut plan.every_step } else { &mut plan.once }.push(name);
        }
        Ok(plan)
    }
}

impl Model {
    /// The decomposition of the model's grid (the physical domain and the PML, [`Model::shape`]'s
    /// interior) over `domains` subdomains: over process grid `grid` when given (its product
    /// must be `domains`), else the grid of least halo surface ([`Decomposition::auto`]). No
    /// axis wraps around (the outer boundary is the zero halo); every subdomain is at least as
    /// thick as the fields' halo, which an exchange copies whole.
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, LaunchError> {
        let shape = self.shape();
        Ok(Decomposition::with_grid(shape.interior(), domains, grid, [false; 3], shape.halo_widths())?)
    }
}

/// The part of `range` (storage coordinates of a field of the global shape `like`) in the
/// interior of subdomain `s`, in the storage coordinates of `s`'s fields; `None` when empty.
fn local_range(range: &Loop3D, s: &Subdomain<3>, like: &Shape3) -> Option<Loop3D> {
    let halo = like.halo_widths();
    let (begin, end) = (range.begin(), range.end());
    let (mut local_begin, mut local_end) = ([0; 3], [0; 3]);
    for a in 0..3 {
        // The subdomain's interior in global storage coordinates.
        let lo = s.offset[a] + halo[a];
        let hi = lo + s.extent[a];
        let (b, e) = (begin[a].max(lo), usize::try_from(end[a]).unwrap_or(0).min(hi));
        if e <= b {
            return None;
        }
        (local_begin[a], local_end[a]) = (b - s.offset[a], e - s.offset[a]);
    }
    // Inside the subdomain's interior by construction.
    Loop::from_bounds(s.shape(like).extent(), local_begin, local_end).ok()
}

/// What one subdomain runs: its parts of the global regions (with their stencils and strategies)
/// and its part of the receiver range, with where each of its values goes in a trace.
struct Part {
    regions: Vec<(RegionKind, Loop3D, Option<Strategy>)>,
    receivers: Option<(Loop3D, Vec<usize>)>,
}

impl Part {
    fn new(model: &Model, strategies: &RegionStrategies, s: &Subdomain<3>) -> Result<Self, LaunchError> {
        let like = model.shape();
        let regions = model.regions();
        let regions = RegionKind::ALL
            .into_iter()
            .zip(regions.all())
            .zip(strategies.0)
            .filter_map(|((kind, range), strategy)| Some((kind, local_range(&range, s, &like)?, strategy)))
            .collect();
        let global = model.receiver_range()?;
        let receivers = local_range(&global, s, &like).map(|local| {
            // Position of each local point (axis 0 fastest, as `read_range` returns them) in the
            // global range's order.
            let (gb, lb, ll, gl) = (global.begin(), local.begin(), local.len_per_axis(), global.len_per_axis());
            let mut at = Vec::with_capacity(local.points());
            for k in 0..ll[2] {
                for j in 0..ll[1] {
                    for i in 0..ll[0] {
                        let g: [usize; 3] = std::array::from_fn(|a| lb[a] + [i, j, k][a] + s.offset[a] - gb[a]);
                        at.push(g[0] + gl[0] * (g[1] + gl[1] * g[2]));
                    }
                }
            }
            (local, at)
        });
        Ok(Part { regions, receivers })
    }
}

/// A [`HaloExchange`] of the fields `names` (each `depth` deep) over `domains`.
fn exchange_of<E: Executor, T: Element>(
    domains: &Domains<E, 3>,
    names: &[&str],
    depth: [usize; 3],
) -> HaloExchange<E, 3> {
    let mut ex = HaloExchange::new(domains);
    for name in names {
        ex.append::<T>(name, HaloWidths(depth));
    }
    ex
}

/// Runs `exchange` (built by [`exchange_of`] with `names`) on every local subdomain's state.
fn exchange_fields<E: Executor, T: Element>(
    exchange: &mut HaloExchange<E, 3>,
    parts: &mut [State<E::Field<T, 3>>],
    names: &[&str],
) -> Result<(), LaunchError> {
    let mut fields: Vec<Vec<ErasedField<'_, 3>>> =
        parts.iter_mut().map(|p| p.fields_mut(names).into_iter().map(|f| ErasedField::of(f)).collect()).collect();
    exchange.exchange(&mut fields)
}

/// The global wavefields gathered on rank 0 from the subdomains' states (`None` on other ranks;
/// downloads wait for their work).
fn gather_wavefields<E: Executor, T: Element>(
    domains: &Domains<E, 3>,
    like: &Shape3,
    parts: &mut [State<E::Field<T, 3>>],
) -> Result<Option<Wavefields<T>>, LaunchError> {
    let mut gather = |name: &str| {
        let fields: Vec<&E::Field<T, 3>> = parts.iter_mut().flat_map(|p| p.fields_mut(&[name])).map(|f| &*f).collect();
        domains.gather(like, &fields)
    };
    let (u, u_prev) = (gather("u")?, gather("u_prev")?);
    Ok(u.zip(u_prev).map(|(u, u_prev)| Wavefields { u, u_prev }))
}

/// [`run`] over the subdomains of `domains` (host subdomains, or GPUs): the same results, bit for
/// bit, for any process grid (every point is updated by the same stencil from the same values;
/// only where a halo value comes from differs).
///
/// The decomposition splits the model's grid, PML included ([`Model::decompose`]). The initial
/// state is cut into the subdomains' fields ([`Domains::scatter`]: interiors, and halos that lie
/// inside the global fields) on each subdomain's executor; the fields read around a point that no
/// step changes (`eta`) are exchanged once, those a step changes (`u`) before every step, each
/// set by one [`HaloExchange`] ([`ExchangePlan`]; the fields' halo is checked against the reach).
/// A step then runs, on every subdomain, each global region (the inner one and the six PML
/// slabs) intersected with its interior, with the region's stencil and strategy, injects the
/// source on the subdomain that owns the source point, and swaps `u` and `u_prev`; the exchange
/// is laid against it as `overlap` says ([`CompCommBinder`]: each region's parts in the binder's
/// inner block and boundary slabs run in the mode's order). The receivers are read
/// from the subdomains that own a part of the receiver line, and put in global receiver order.
/// Snapshots, the final wavefields and the traces are gathered on rank 0 ([`Domains::gather`]);
/// the outcome is `None` on the other ranks. Times as [`run`] (the exchanges included).
///
/// Errors: those of [`run`]; a decomposition of another grid than [`Model::shape`]'s interior, a
/// periodic axis, fields whose halo is narrower than the stencils read.
pub fn run_decomposed<E: Executor, T: Wave>(
    domains: &Domains<E, 3>,
    strategies: &RegionStrategies,
    overlap: Overlap,
    model: &Model,
    snapshot: Option<usize>,
    after_step: impl FnMut(usize),
) -> Result<Option<Outcome<T>>, Box<dyn std::error::Error>> {
    run_decomposed_from(domains, strategies, overlap, model, snapshot, None, after_step, |_, _, _| Ok(()))
}

/// Where a decomposed run resumes ([`run_decomposed_from`]; `crate::checkpoint` reads it from a
/// checkpoint's parts): the steps already taken, and per local subdomain (in order) its state on
/// the host and its receivers' values of those steps (step after step, each step's values in
/// the order of [`receivers_in`]'s range).
pub struct Resume<T: Element> {
    /// Steps already taken.
    pub step: usize,
    /// Each local subdomain's state.
    pub states: Vec<State<Field3<T>>>,
    /// Each local subdomain's receiver values so far.
    pub traces: Vec<Vec<T>>,
}

/// How many receiver points lie in subdomain `s` of a decomposition of `model`'s grid.
pub fn receivers_in(model: &Model, s: &Subdomain<3>) -> Result<usize, LaunchError> {
    Ok(local_range(&model.receiver_range()?, s, &model.shape()).map_or(0, |r| r.points()))
}

/// [`run_decomposed`] from `resume` (`None`: the model's initial state, step 0) to step
/// `model.steps`, calling `save(step, states, traces)` after every step with the local
/// subdomains' states and receiver values so far (as [`Resume`] holds them): a checkpoint
/// writer. The steps are those of [`run_decomposed`], so a run resumed from what `save` saw
/// after step `s` ends as the run that went on, bit for bit. The traces of the outcome cover
/// every step, those before `resume.step` included; the time covers the steps run but the
/// first.
#[allow(clippy::too_many_arguments)]
pub fn run_decomposed_from<E: Executor, T: Wave>(
    domains: &Domains<E, 3>,
    strategies: &RegionStrategies,
    overlap: Overlap,
    model: &Model,
    snapshot: Option<usize>,
    resume: Option<Resume<T>>,
    mut after_step: impl FnMut(usize),
    mut save: impl FnMut(usize, &[State<E::Field<T, 3>>], &[Vec<T>]) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<Option<Outcome<T>>, Box<dyn std::error::Error>> {
    model.check()?;
    let like = model.shape();
    let d = domains.decomposition();
    let plan = ExchangePlan::of::<T>()?;
    if (0..3).any(|a| like.halo_widths()[a] < plan.halo[a]) {
        return Err(LaunchError::Decomposition(format!(
            "the model's fields have a halo of {:?}, but the stencils read {:?} around a point: give the fields \
             at least the stencils' reach",
            like.halo_widths(),
            plan.halo
        ))
        .into());
    }
    if d.global() != like.interior() {
        return Err(LaunchError::Decomposition(format!(
            "the decomposition splits a {:?} grid, but the model's grid (physical domain and PML) is {:?}: \
             decompose it with `Model::decompose`",
            d.global(),
            like.interior()
        ))
        .into());
    }
    if d.periodic().contains(&true) {
        return Err(LaunchError::Decomposition(format!(
            "the decomposition wraps around axes {:?}, but the model's outer boundary is a zero halo: decompose \
             with no periodic axis",
            d.periodic()
        ))
        .into());
    }
    let c = Coefficients::new([model.h; 3]).to::<T>();
    let subdomains: Vec<Subdomain<3>> = domains.subdomains().collect();
    let work: Vec<Part> = subdomains.iter().map(|s| Part::new(model, strategies, s)).collect::<Result<_, _>>()?;
    let receivers = model.receiver_range()?.points();

    let (mut parts, start, mut local_traces) = match resume {
        None => {
            let initial = model.initial::<T>()?;
            let all = State {
                u: domains.scatter(&initial.u)?,
                u_prev: domains.scatter(&initial.u_prev)?,
                vdt2: domains.scatter(&initial.vdt2)?,
                eta: domains.scatter(&initial.eta)?,
                phi: domains.scatter(&initial.phi)?,
            };
            (all.into_parts(), 0, vec![Vec::new(); subdomains.len()])
        }
        Some(Resume { step, states, traces }) => {
            if states.len() != subdomains.len() || traces.len() != subdomains.len() {
                return Err(LaunchError::Decomposition(format!(
                    "a resumed run needs the states and traces of this process's {} subdomains, not {} and {}",
                    subdomains.len(),
                    states.len(),
                    traces.len()
                ))
                .into());
            }
            let parts = states.iter().zip(domains.execs()).map(|(s, e)| s.upload(e)).collect::<Result<_, _>>()?;
            (parts, step, traces)
        }
    };
    if start > model.steps {
        return Err(format!("the run resumes after step {start}, past its last step {}", model.steps).into());
    }
    for (i, (values, part)) in local_traces.iter().zip(&work).enumerate() {
        let n = part.receivers.as_ref().map_or(0, |(_, at)| at.len());
        if values.len() != n * start {
            return Err(format!(
                "local subdomain {i} resumes with {} receiver values, but its {n} receivers over {start} steps are {}",
                values.len(),
                n * start
            )
            .into());
        }
    }
    exchange_fields(&mut exchange_of::<E, T>(domains, &plan.once, plan.halo), &mut parts, &plan.once)?;
    let mut every_step = exchange_of::<E, T>(domains, &plan.every_step, plan.halo);
    // The fields a step changes that are read around a point, as the step leaves them (`u` is
    // written as `u_prev`, which the swap after the step makes `u`).
    let written: Vec<&str> = plan.every_step.iter().map(|&n| if n == "u" { "u_prev" } else { n }).collect();
    let mut fill = |parts: &mut Vec<State<E::Field<T, 3>>>, halos: Halos| {
        let names = if halos == Halos::Read { &plan.every_step } else { &written };
        exchange_fields(&mut every_step, parts, names)
    };
    let ranges = subdomains.iter().map(|s| Loop3D::interior(&s.shape(&like))).collect();
    let binder =
        CompCommBinder::new(domains, ranges, plan.halo, overlap)?.contiguous_axis(like.element_order().axes::<3>()[0]);
    binder.prime(&mut parts, &mut fill)?;

    // The global receiver index of each of this process's receivers (subdomain after subdomain).
    let owned: Vec<usize> =
        work.iter().filter_map(|p| p.receivers.as_ref()).flat_map(|(_, at)| at.iter().copied()).collect();
    for (values, part) in local_traces.iter_mut().zip(&work) {
        values.reserve(model.steps.saturating_sub(start) * part.receivers.as_ref().map_or(0, |(_, at)| at.len()));
    }
    let mut snap = None;
    let mut clock = std::time::Instant::now();
    for s in start..model.steps {
        let source = model.source_at::<T>(s)?;
        let sources: Vec<Vec<(Loop3D, T)>> = subdomains
            .iter()
            .map(|sub| {
                source.iter().filter_map(|(range, amount)| Some((local_range(range, sub, &like)?, *amount))).collect()
            })
            .collect();
        // The part of the step in `range` of subdomain `i`: each region's share of it, then the
        // source terms that lie there.
        let update = |exec: &E, i: usize, range: &Loop3D, parts: &mut Vec<State<E::Field<T, 3>>>| {
            // The regions' parts are disjoint: one handle each, as in the one-domain step.
            let pieces: Vec<_> =
                work[i].regions.iter().filter_map(|(k, region, s)| Some((*k, region.intersect(range)?, *s))).collect();
            exec.fork_join(pieces.len(), |handles| {
                for ((kind, r, strategy), handle) in pieces.iter().zip(handles) {
                    T::region(handle, *strategy, *kind, r, &c, &mut parts[i])?;
                }
                Ok(())
            })?;
            for (point, amount) in sources[i].iter().filter_map(|(p, a)| Some((p.intersect(range)?, *a))) {
                T::inject(exec, &point, amount, &mut parts[i])?;
            }
            Ok(())
        };
        binder.step(domains, &mut parts, &mut fill, update)?;
        for state in &mut parts {
            std::mem::swap(&mut state.u, &mut state.u_prev);
        }
        for (i, (part, state)) in work.iter().zip(&parts).enumerate() {
            if let Some((range, _)) = &part.receivers {
                local_traces[i].extend(domains.exec(i).read_range(&state.u, range)?);
            }
        }
        if snapshot == Some(s + 1) {
            // Left out of the time, as in the one-domain run.
            domains.synchronize()?;
            let pause = std::time::Instant::now();
            snap = gather_wavefields(domains, &like, &mut parts)?;
            clock += pause.elapsed();
        }
        after_step(s + 1);
        save(s + 1, &parts, &local_traces)?;
        if s == start && model.steps > start + 1 {
            // The first step prepares the kernels (compiles them on a GPU): not timed.
            domains.synchronize()?;
            clock = std::time::Instant::now();
        }
    }
    domains.synchronize()?;
    let seconds = clock.elapsed().as_secs_f64();
    let timed_steps = (model.steps - start).saturating_sub(1).max(1);
    let last = gather_wavefields(domains, &like, &mut parts)?;
    // Every step's values of this process, step after step, in the order of `owned`.
    let counts: Vec<usize> = work.iter().map(|p| p.receivers.as_ref().map_or(0, |(_, at)| at.len())).collect();
    let mut values = Vec::with_capacity(model.steps * owned.len());
    for s in 0..model.steps {
        for (v, &n) in local_traces.iter().zip(&counts) {
            values.extend_from_slice(&v[s * n..(s + 1) * n]);
        }
    }
    let traces = gather_traces(domains, &owned, &values, model.steps, receivers)?;
    let traces = traces.map(|raw| model.receiver_traces(raw)).transpose()?;
    Ok(last.zip(traces).map(|(last, traces)| Outcome { last, snapshot: snap, traces, seconds, timed_steps }))
}

/// The receiver traces on rank 0 (`traces[s][r]`), from every process's values: `owned` gives
/// the global receiver index of each of its receivers, `values` their values step after step.
fn gather_traces<E: Executor, T: Element>(
    domains: &Domains<E, 3>,
    owned: &[usize],
    values: &[T],
    steps: usize,
    receivers: usize,
) -> Result<Option<Vec<Vec<T>>>, LaunchError> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&(owned.len() as u64).to_le_bytes());
    owned.iter().for_each(|&r| bytes.extend_from_slice(&(r as u64).to_le_bytes()));
    values.iter().for_each(|v| v.put_le(&mut bytes));
    let Some(all) = domains.world().gather_bytes(&bytes) else { return Ok(None) };
    let mut traces = vec![vec![T::default(); receivers]; steps];
    let size = std::mem::size_of::<T>();
    for rank in all {
        let word = |i: usize| u64::from_le_bytes(rank[8 * i..8 * i + 8].try_into().expect("8 bytes")) as usize;
        let n = word(0);
        let at: Vec<usize> = (1..=n).map(word).collect();
        let values = rank[8 * (n + 1)..].chunks_exact(size).map(T::get_le);
        for (k, v) in values.enumerate() {
            let (s, r) = (k / n.max(1), at[k % n.max(1)]);
            if s < steps && r < receivers {
                traces[s][r] = v;
            }
        }
    }
    Ok(Some(traces))
}
