//! [`CompCommBinder`]: one time step of a decomposed model with its halo exchange laid against
//! the computation in one of three ways ([`Overlap`], ASUCA's `CompCommBinder`):
//!
//! - [`Overlap::None`]: exchange the halos the update reads, then update each subdomain's range.
//! - [`Overlap::OneDivided`]: each subdomain's range is split into an inner region (every point
//!   farther than the reach from the range's ends, so it reads no halo) and `2·D` boundary slabs
//!   ([`Loop::split_boundary`]). The inner region runs on a side stream of each executor while
//!   the halos travel on the main stream; then the slabs run.
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
}

impl Overlap {
    /// Every mode, for benchmarks and tests.
    pub const ALL: [Overlap; 3] = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided];

    /// The mode named `none`, `one` (or `one-divided`) or `two` (or `two-divided`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Overlap::None),
            "one" | "one-divided" => Ok(Overlap::OneDivided),
            "two" | "two-divided" => Ok(Overlap::TwoDivided),
            _ => Err(format!("`{s}` is not an overlap mode: give none, one (one-divided) or two (two-divided)")),
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
#[derive(Clone, Debug)]
pub struct CompCommBinder<const D: usize> {
    mode: Overlap,
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
            return Err(LaunchError::Decomposition(format!(
                "CompCommBinder: {} ranges for the {} subdomains of rank {}: give one range per local subdomain",
                ranges.len(),
                domains.execs().len(),
                domains.world().rank()
            )));
        }
        let widths = BoundaryWidths { lo: reach, hi: reach };
        let regions = ranges.iter().map(|r| r.split_boundary(widths).ok()).collect();
        Ok(CompCommBinder { mode, ranges, regions })
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
            Overlap::None | Overlap::OneDivided => Ok(()),
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
        mut exchange: impl FnMut(&mut S, Halos) -> Result<(), LaunchError>,
        mut update: impl FnMut(&E, usize, &Loop<D>, &mut S) -> Result<(), LaunchError>,
    ) -> Result<(), LaunchError> {
        let execs = domains.execs();
        // The slabs of subdomain `i` (its whole range when it is not split), and its inner region.
        let slabs = |i: usize| -> Vec<Loop<D>> {
            match &self.regions[i] {
                Some(r) => r.boundary().map(|(_, r)| r).filter(|r| r.points() > 0).collect(),
                None => vec![self.ranges[i]],
            }
        };
        let inner = |i: usize| self.regions[i].as_ref().map(|r| r.inner).filter(|r| r.points() > 0);
        match self.mode {
            Overlap::None => {
                exchange(state, Halos::Read)?;
                for (i, exec) in execs.iter().enumerate() {
                    update(exec, i, &self.ranges[i], state)?;
                }
            }
            Overlap::OneDivided => {
                with_side_handles(execs, &mut Vec::new(), &mut |sides| {
                    for (i, side) in sides.iter().enumerate() {
                        if let Some(inner) = inner(i) {
                            update(side, i, &inner, state)?;
                        }
                    }
                    exchange(state, Halos::Read)
                })?;
                for (i, exec) in execs.iter().enumerate() {
                    for slab in slabs(i) {
                        update(exec, i, &slab, state)?;
                    }
                }
            }
            Overlap::TwoDivided => {
                for (i, exec) in execs.iter().enumerate() {
                    for slab in slabs(i) {
                        update(exec, i, &slab, state)?;
                    }
                }
                with_side_handles(execs, &mut Vec::new(), &mut |sides| {
                    for (i, side) in sides.iter().enumerate() {
                        if let Some(inner) = inner(i) {
                            update(side, i, &inner, state)?;
                        }
                    }
                    exchange(state, Halos::Written)
                })?;
            }
        }
        Ok(())
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
