//! [`CompCommBinder`]: one time step of a decomposed model with its halo exchange laid against
//! the computation in one of three ways ([`Overlap`], ASUCA's `CompCommBinder`):
//!
//! - [`Overlap::None`]: exchange the halos the update reads, then update each subdomain's range.
//! - [`Overlap::OneDivided`]: each subdomain's range is split into an inner region (every point
//!   farther than the reach from the sides whose halo the exchange fills, so it reads none of
//!   them) and boundary slabs on those sides ([`Loop::split_boundary`]): the sides with a
//!   neighbouring subdomain, and the physical-boundary sides too when the exchange closure fills
//!   them ([`CompCommBinder::filling_boundary`]). Along the contiguous axis a slab is 32 points
//!   wide where the range allows (a warp's row: one-point-wide slabs across the contiguous axis waste most of
//!   each memory access). The inner region runs on a side stream of each executor while the halos
//!   travel on the main stream; then the slabs run.
//! - [`Overlap::TwoDivided`]: the slabs run first; then the inner region runs on a side stream
//!   while the halos of what the slabs wrote travel (for the next step). The halos of the
//!   inputs must be filled once before the first step ([`CompCommBinder::prime`]).
//!
//! On a GPU the side streams run concurrently with the main stream (event-ordered by
//! [`Executor::fork_join`]): the inner kernel overlaps the pack, copy and unpack work and, between
//! ranks, the host's MPI calls. On the host every call runs to completion, so the modes give the
//! same results in sequence. Results are bit-equal in every mode: every point is updated by the
//! same stencil from the same values.

use super::domains::Domains;
use super::refusal::DistributionError;
use crate::error::LaunchError;
use crate::executor::Executor;
use crate::range::Loop;
use crate::regions::{BoundaryWidths, Regions};

/// How a step's exchange is laid against its computation (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overlap {
    /// Exchange, then compute.
    #[default]
    None,
    /// Inner region during the exchange, then the boundary slabs.
    OneDivided,
    /// Boundary slabs, then the inner region during the exchange of what they wrote.
    TwoDivided,
    /// The distributed executor's choice per launch site, measured: no overlap or one-divided,
    /// whichever ran faster in its first launches (see [`Distributed`](super::Distributed)).
    Auto,
}

impl Overlap {
    /// Every mode, for benchmarks and tests.
    pub const ALL: [Overlap; 3] = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided];

    /// The modes a [`CompCommBinder`] takes: every one but [`Overlap::Auto`], which only the
    /// distributed executor chooses from.
    pub(crate) fn is_binder_mode(self) -> bool {
        self != Overlap::Auto
    }

    /// The mode named `none`, `one` (or `one-divided`) or `two` (or `two-divided`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Overlap::None),
            "one" | "one-divided" => Ok(Overlap::OneDivided),
            "two" | "two-divided" => Ok(Overlap::TwoDivided),
            "auto" => Ok(Overlap::Auto),
            _ => Err(format!(
                "`{s}` is not an overlap mode: give none, one (one-divided), two (two-divided) or auto (measured per \
                 launch)"
            )),
        }
    }
}

/// Which fields an exchange closure of [`CompCommBinder::step`] must fill the halos of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Halos {
    /// The fields the update reads (this step's inputs).
    Read,
    /// The fields the update wrote (the next step's inputs; [`Overlap::TwoDivided`]).
    Written,
}

/// The regions of every local subdomain's range and the overlap mode (see the module docs).
///
/// ```
/// use stencil_runtime::prelude::*;
/// use stencil_runtime::{CompCommBinder, Decomposition, Domains, ErasedField, HaloExchange, HaloWidths, Halos, Overlap};
///
/// #[stencil]
/// fn smooth(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
///     out[idx] = 0.25 * u[idx.ix::<-1>()] + 0.5 * u[idx] + 0.25 * u[idx.ix::<1>()];
/// }
///
/// // A periodic line of 64 points over two subdomains, ten two-divided steps.
/// let d = Decomposition::new([64], [2], [true], [1])?;
/// let domains = Domains::new(d, vec![Host; 2])?;
/// let like = Shape1::new([64]).halo(1);
/// let start = Field1::from_fn(like, |[i]| (i * i % 7) as f64);
/// type Pair = (Vec<Field1<f64>>, Vec<Field1<f64>>);
/// let mut state: Pair = (domains.scatter(&start)?, domains.scatter(&start)?);
/// let ranges = domains.subdomains().map(|s| Loop1D::interior(&s.shape(&like))).collect();
/// let binder = CompCommBinder::new(&domains, ranges, [1], Overlap::TwoDivided)?;
/// let mut ex = HaloExchange::new(&domains);
/// ex.append::<f64>("u", HaloWidths([1]));
/// let mut fill = |(u, out): &mut Pair, halos: Halos| {
///     let fields = if halos == Halos::Read { u } else { out };
///     ex.exchange(&mut fields.iter_mut().map(|f| vec![ErasedField::of(f)]).collect::<Vec<_>>())
/// };
/// let update = |exec: &Host, i: usize, r: &Loop1D, (u, out): &mut Pair| exec.run(r, Smooth, (&u[i], &mut out[i]));
/// binder.prime(&mut state, &mut fill)?;
/// for _ in 0..10 {
///     binder.step(&domains, &mut state, &mut fill, update)?;
///     std::mem::swap(&mut state.0, &mut state.1);
/// }
///
/// // The same bits as ten steps of the whole line with periodic halo fills.
/// let (mut whole, mut next) = (start.clone(), Field1::zeros(like));
/// for _ in 0..10 {
///     Host.fill_halos(&mut [(&mut whole, [Some(HaloFill::Periodic)])])?;
///     Loop1D::interior(&like).run(Smooth, (&whole, &mut next))?;
///     std::mem::swap(&mut whole, &mut next);
/// }
/// let got = domains.gather(&like, &state.0)?.expect("one process is rank 0");
/// assert!((0..64).all(|i| got.get([i]).map(f64::to_bits) == whole.get([i]).map(f64::to_bits)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct CompCommBinder<const D: usize> {
    mode: Overlap,
    reach: [usize; D],
    /// Per subdomain and axis, `[low, high]`: whether the exchange fills that side's halo.
    exchanged: Vec<[[bool; 2]; D]>,
    /// Per subdomain and axis, `[low, high]`: whether it lies on the physical boundary.
    physical: Vec<[[bool; 2]; D]>,
    contiguous: Vec<usize>,
    ranges: Vec<Loop<D>>,
    /// Per subdomain: the inner region and the slabs; `None` where the range is too thin to
    /// split (it then runs whole where the slabs run).
    regions: Vec<Option<Regions<D>>>,
}

impl<const D: usize> CompCommBinder<D> {
    /// The binder for updates of `ranges` (one per local subdomain of `domains`, in order) by
    /// stencils that read `reach` points around a point (per axis, both sides; for
    /// [`Overlap::TwoDivided`] also at least the depth the exchange sends, so that no point it
    /// packs is written by the inner region). A range too thin to split runs whole where the
    /// slabs run (before the exchange in two-divided steps, after it in one-divided ones).
    pub fn new<E: Executor>(
        domains: &Domains<E, D>,
        ranges: Vec<Loop<D>>,
        reach: [usize; D],
        mode: Overlap,
    ) -> Result<Self, LaunchError> {
        if ranges.len() != domains.execs().len() {
            return Err(DistributionError::RangeCount {
                given: ranges.len(),
                local: domains.execs().len(),
                rank: domains.world().rank(),
            }
            .into());
        }
        if !mode.is_binder_mode() {
            return Err(DistributionError::BinderAuto.into());
        }
        let d = domains.decomposition();
        let sides = |on_boundary: bool| -> Vec<[[bool; 2]; D]> {
            domains
                .subdomains()
                .map(|s| {
                    std::array::from_fn(|a| {
                        [-1i8, 1].map(|side| {
                            let mut dir = [0i8; D];
                            dir[a] = side;
                            (d.neighbour(&s, dir) == super::Neighbour::Boundary) == on_boundary
                        })
                    })
                })
                .collect()
        };
        let contiguous = domains.subdomains().map(|_| 0).collect();
        let mut binder = CompCommBinder {
            mode,
            reach,
            exchanged: sides(false),
            physical: sides(true),
            contiguous,
            ranges,
            regions: Vec::new(),
        };
        binder.split();
        Ok(binder)
    }

    /// This binder for an exchange closure that also fills the physical-boundary halos (e.g.
    /// with [`Domains::fill_boundary`]): the slabs on those sides wait for it too.
    pub fn filling_boundary(mut self) -> Self {
        for (e, p) in self.exchanged.iter_mut().zip(&self.physical) {
            for a in 0..D {
                for side in 0..2 {
                    e[a][side] |= p[a][side];
                }
            }
        }
        self.split();
        self
    }

    /// This binder with axis `axis` taken as the fields' contiguous one (default 0, as in
    /// [`Order::Ijk`](crate::Order)): its slabs are widened to 32 points.
    pub fn contiguous_axis(mut self, axis: usize) -> Self {
        self.contiguous.iter_mut().for_each(|c| *c = axis.min(D.saturating_sub(1)));
        self.split();
        self
    }

    /// Splits every range on its exchanged sides.
    fn split(&mut self) {
        self.regions = self
            .ranges
            .iter()
            .zip(&self.exchanged)
            .zip(&self.contiguous)
            .map(|((r, sides), &c)| {
                // Wide slabs along the contiguous axis where the range allows, else the reach.
                let split = |wide: usize| {
                    let width = |a: usize, side: usize| match (sides[a][side], a == c) {
                        (false, _) => 0,
                        (true, true) => self.reach[a].max(wide),
                        (true, false) => self.reach[a],
                    };
                    let lo = std::array::from_fn(|a| width(a, 0));
                    r.split_boundary(BoundaryWidths { lo, hi: std::array::from_fn(|a| width(a, 1)) }).ok()
                };
                split(32).or_else(|| split(0))
            })
            .collect();
    }

    /// The mode.
    pub fn mode(&self) -> Overlap {
        self.mode
    }

    /// Fills the halos the first step reads where the mode needs it ([`Overlap::TwoDivided`]:
    /// its steps exchange what they write). Call once before the first [`CompCommBinder::step`].
    pub fn prime<S>(
        &self,
        state: &mut S,
        mut exchange: impl FnMut(&mut S, Halos) -> Result<(), LaunchError>,
    ) -> Result<(), LaunchError> {
        match self.mode {
            Overlap::TwoDivided => exchange(state, Halos::Read),
            Overlap::None | Overlap::OneDivided | Overlap::Auto => Ok(()),
        }
    }

    /// One step: `update(exec, i, range, state)` issues the update of `range` (the whole range,
    /// its inner region or one slab) of local subdomain `i` on `exec` (the subdomain's executor
    /// or a side handle of it); `exchange(state, halos)` fills the halos of the fields `halos`
    /// names on every local subdomain (a [`HaloExchange`](super::HaloExchange) and the physical
    /// boundary fills), issuing its work on the subdomains' executors.
    pub fn step<E: Executor, S>(
        &self,
        domains: &Domains<E, D>,
        state: &mut S,
        exchange: impl FnMut(&mut S, Halos) -> Result<(), LaunchError>,
        mut update: impl FnMut(&E, usize, &Loop<D>, &mut S) -> Result<(), LaunchError>,
    ) -> Result<(), LaunchError> {
        self.step_phases(domains, state, exchange, |state, execs, regions| {
            for (i, (exec, regions)) in execs.iter().zip(regions).enumerate() {
                regions.iter().try_for_each(|r| update(exec, i, r, state))?;
            }
            Ok(())
        })
    }

    /// One step as [`CompCommBinder::step`] takes it, a phase at a time:
    /// `phase(state, execs, regions)` issues `regions[i]` of every local subdomain `i` on
    /// `execs[i]` (its executor, or a side handle of it while the halos travel), so that the
    /// caller may issue the subdomains' work at once.
    pub(crate) fn step_phases<E: Executor, S>(
        &self,
        domains: &Domains<E, D>,
        state: &mut S,
        mut exchange: impl FnMut(&mut S, Halos) -> Result<(), LaunchError>,
        mut phase: impl FnMut(&mut S, &[E], &[Vec<Loop<D>>]) -> Result<(), LaunchError>,
    ) -> Result<(), LaunchError> {
        let execs = domains.execs();
        match self.mode {
            // `new` refuses `Auto`.
            Overlap::None | Overlap::Auto => {
                exchange(state, Halos::Read)?;
                let whole: Vec<Vec<Loop<D>>> = self.ranges.iter().map(|r| vec![*r]).collect();
                phase(state, execs, &whole)
            }
            Overlap::OneDivided => {
                self.inner_during_exchange(execs, state, &mut exchange, &mut phase, Halos::Read)?;
                phase(state, execs, &self.slabs())
            }
            Overlap::TwoDivided => {
                phase(state, execs, &self.slabs())?;
                self.inner_during_exchange(execs, state, &mut exchange, &mut phase, Halos::Written)
            }
        }
    }
}

impl<const D: usize> CompCommBinder<D> {
    /// Every subdomain's boundary slabs (its whole range when it is not split).
    fn slabs(&self) -> Vec<Vec<Loop<D>>> {
        (0..self.ranges.len())
            .map(|i| match &self.regions[i] {
                Some(r) => r.boundary().map(|(_, r)| r).filter(|r| r.points() > 0).collect(),
                None => vec![self.ranges[i]],
            })
            .collect()
    }

    /// Updates every subdomain's inner region on a side handle of its executor while
    /// `exchange(state, halos)` issues its work on the executors.
    fn inner_during_exchange<E: Executor, S>(
        &self,
        execs: &[E],
        state: &mut S,
        exchange: &mut impl FnMut(&mut S, Halos) -> Result<(), LaunchError>,
        phase: &mut impl FnMut(&mut S, &[E], &[Vec<Loop<D>>]) -> Result<(), LaunchError>,
        halos: Halos,
    ) -> Result<(), LaunchError> {
        let inner: Vec<Vec<Loop<D>>> = (0..self.ranges.len())
            .map(|i| self.regions[i].as_ref().map(|r| r.inner).filter(|r| r.points() > 0).into_iter().collect())
            .collect();
        with_side_handles(execs, &mut Vec::new(), &mut |sides| {
            phase(state, sides, &inner)?;
            exchange(state, halos)
        })
    }
}

/// Runs `work` with one side handle of every executor (nested [`Executor::fork_join`]s): work
/// on a side handle overlaps the work issued on the executors meanwhile, and everything issued
/// after this returns waits for both.
fn with_side_handles<E: Executor>(
    execs: &[E],
    sides: &mut Vec<E>,
    work: &mut dyn FnMut(&[E]) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    match execs.split_first() {
        None => work(sides),
        Some((first, rest)) => first.fork_join(1, |side| {
            sides.push(side[0].clone());
            with_side_handles(rest, sides, work)
        }),
    }
}
