//! One interface for where a model runs: the host ([`Host`], rayon) or a GPU
//! (`cuda::Gpu`, with the `cuda` feature). A model is written once against
//! [`Executor`]; its fields are `E::Field<T, D>`, and stencil launches, halo fills, copies,
//! synchronisation and recorded steps go through the executor.
//!
//! ```
//! use stencil_runtime::prelude::*;
//! use stencil_runtime::{Executor, HaloFill};
//!
//! #[stencil]
//! fn smooth(idx: Idx1, w: f32, u: &Field1<f32>, out: &mut Field1<f32>) {
//!     out[idx] = (1.0 - 2.0 * w) * u[idx] + w * (u[idx.ix::<-1>()] + u[idx.ix::<1>()]);
//! }
//!
//! /// Written once: runs wherever `exec` puts the fields.
//! fn smooth_twice<E: Executor>(exec: &E, u: &mut E::Field<f32, 1>, tmp: &mut E::Field<f32, 1>) -> Result<(), LaunchError> {
//!     let range = Loop1D::interior(exec.shape_of(u));
//!     for _ in 0..2 {
//!         exec.fill_halos(&mut [(&mut *u, [Some(HaloFill::Periodic)])])?;
//!         exec.run(&range, Smooth, (0.25, &*u, &mut *tmp))?;
//!         exec.copy(u, tmp)?;
//!     }
//!     Ok(())
//! }
//!
//! let exec = Host;
//! let shape = Shape1::new([8]).halo(1);
//! let mut u = exec.upload(&Field1::from_fn(shape, |[i]| (i * i) as f32))?;
//! let mut tmp = exec.alloc(shape)?;
//! smooth_twice(&exec, &mut u, &mut tmp)?;
//! // i² smoothed twice at i = 3: 9 → 9.5 → 10.
//! assert_eq!(exec.download(&u)?.get([3]), Some(10.0));
//! # Ok::<(), LaunchError>(())
//! ```

pub(crate) mod held;
mod host;
mod host_steps;
mod readback;
mod record;

pub(crate) use crate::comm::buffer::{check_pairs, check_parts, from_le_bytes, rows, to_le_bytes};
pub use crate::comm::buffer::{BoxPart, ErasedField, HostBuffer, MessageBuffer};
pub use held::{Held, HeldStorage, HostHeld, PartsHeld};
pub use host::Host;
pub use host_steps::HostTiling;
#[cfg_attr(not(feature = "cuda"), allow(unused_imports))]
pub(crate) use readback::Pending;
pub use readback::{Readback, Reduced};
pub use record::Recorded;

pub use crate::stencil::args::FieldStorage;

use crate::domain::DistributionError;
use crate::error::LaunchError;
use crate::field::{Element, Field, HaloError, HaloFill, Shape};
use crate::range::Loop;
use crate::stencil::args::ArgValue;
use crate::stencil::StencilInfo;
use std::fmt;
use stencil_codegen::printer::cuda::Strategy;
use stencil_codegen::StencilIr;

/// A `D`-dimensional point-update functor, implemented by `#[stencil]`.
///
/// Not meant to be implemented by hand: the macro checks the body for races, prints the loop
/// nest that `run_host` runs and embeds the IR (from which the CUDA executor prints kernels).
pub trait Stencil<const D: usize>: Copy + Send + Sync + 'static {
    /// The arguments after the point index, as a tuple in parameter order: scalars by value,
    /// fields as `&E::Field<T, D>` (read) or `&mut E::Field<T, D>` (written).
    type Args<'a, E: Executor>;
    /// Name and field accesses.
    const INFO: StencilInfo;
    /// The IR in its serialised form ([`StencilIr::decode`]), point functions included.
    const IR: &'static str;

    /// The stencil's IR as written, decoded from [`Stencil::IR`] on first use and kept: its
    /// point functions are separate (what the depot kernel keeps on chip).
    fn source_ir() -> &'static StencilIr;

    /// The stencil's IR with its point functions inlined (`pipeline::Target::Facts`; the same
    /// as [`Stencil::source_ir`] without point functions), computed on first use and kept: what
    /// the launch checks and most kernels see.
    fn ir() -> &'static StencilIr;

    /// Runs the point update over `range` on the CPU (rayon), after checking the launch.
    fn run_host(range: &Loop<D>, args: Self::Args<'_, Host>) -> Result<(), LaunchError>;

    /// Erases the arguments for a kernel launch, in parameter order.
    fn erase_args<E: Executor>(args: Self::Args<'_, E>) -> Vec<ArgValue<'_, D>>;

    /// The arguments with every field taken through `map` (scalars copied, reductions
    /// reborrowed): how the distributed executor hands one launch's arguments to each part, and
    /// (with the identity map) a reborrow.
    #[doc(hidden)]
    fn map_args<'m, 'b: 'm, X: Executor, Y: Executor, M: FieldMap<X, Y>>(
        args: &'m mut Self::Args<'b, X>,
        map: &M,
    ) -> Self::Args<'m, Y>;
}

/// Takes fields of executor `X` to fields of executor `Y` (a distributed field to one of its
/// parts, or a field to itself): what [`Stencil::map_args`] applies to each field argument.
#[doc(hidden)]
pub trait FieldMap<X: Executor, Y: Executor> {
    /// A read field.
    fn field<'a, T: Element, const D: usize>(&self, field: &'a X::Field<T, D>) -> &'a Y::Field<T, D>;
    /// A written field.
    fn field_mut<'a, T: Element, const D: usize>(&self, field: &'a mut X::Field<T, D>) -> &'a mut Y::Field<T, D>;
    /// A held scalar.
    fn held<'a, T: Element>(&self, held: &'a X::HeldScalar<T>) -> &'a Y::HeldScalar<T>;
}

/// The identity [`FieldMap`]: [`Stencil::map_args`] with it reborrows a launch's arguments.
pub(crate) struct Same;

impl<X: Executor> FieldMap<X, X> for Same {
    fn field<'a, T: Element, const D: usize>(&self, field: &'a X::Field<T, D>) -> &'a X::Field<T, D> {
        field
    }
    fn field_mut<'a, T: Element, const D: usize>(&self, field: &'a mut X::Field<T, D>) -> &'a mut X::Field<T, D> {
        field
    }
    fn held<'a, T: Element>(&self, held: &'a X::HeldScalar<T>) -> &'a X::HeldScalar<T> {
        held
    }
}

/// One field's halo fills: per axis, the fill of both ends of that axis, or `None` to leave it.
pub type HaloJob<'a, F, const D: usize> = (&'a mut F, [Option<HaloFill>; D]);

/// One field's halo fills per side: per axis, `[low end, high end]`, `None` to leave a side.
pub type SideJob<'a, F, const D: usize> = (&'a mut F, [[Option<HaloFill>; 2]; D]);

/// Where fields live and stencils run. Implemented by [`Host`] and, with the `cuda` feature, by
/// `cuda::Gpu`. Work is issued in order; on a GPU it runs asynchronously, and
/// [`Executor::download`], [`Executor::read_range`] and [`Executor::synchronize`] wait for it.
pub trait Executor: Clone + Send + Sync + 'static + Messages + Record {
    /// A `D`-dimensional field of `T` on this executor.
    type Field<T: Element, const D: usize>: FieldStorage<T, D> + Send + Sync + 'static;
    /// A scalar held in this executor's memory ([`Executor::held`], [`Held`]).
    type HeldScalar<T: Element>: HeldStorage<T>;

    /// A short description (`host (rayon, 8 threads)`, `Gpu(0: NVIDIA H200, sm_90)`).
    fn describe(&self) -> String;

    /// A field of `shape` with every element (halo and padding included) zero.
    fn alloc<T: Element, const D: usize>(&self, shape: Shape<D>) -> Result<Self::Field<T, D>, LaunchError>;

    /// A copy of a host field on this executor.
    fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<Self::Field<T, D>, LaunchError>;

    /// A host copy of a field; waits for earlier work.
    fn download<T: Element, const D: usize>(&self, field: &Self::Field<T, D>) -> Result<Field<T, D>, LaunchError>;

    /// Overwrites `dst` with `src` (same shape), after earlier work.
    fn copy<T: Element, const D: usize>(
        &self,
        dst: &mut Self::Field<T, D>,
        src: &Self::Field<T, D>,
    ) -> Result<(), LaunchError>;

    /// A copy of `field` in host memory that [`Executor::restore`] writes back, halos included;
    /// waits for earlier work. A distributed executor keeps each subdomain's part as it is,
    /// with no gather: what a checkpoint held on the host needs ([`crate::revolve`]).
    fn save<T: Element, const D: usize>(&self, field: &Self::Field<T, D>) -> Result<HostCopy<T, D>, LaunchError>;

    /// [`Executor::save`] into the memory of an earlier copy of a field of the same shape (no
    /// allocation); otherwise (another shape, or another executor's copy) a new copy. A GPU
    /// page-locks that memory the first time and then only queues the copy on its stream,
    /// without waiting: later work on the stream runs after it, and [`Executor::restore`] or
    /// dropping the copy waits for it.
    fn save_into<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        saved: &mut HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        *saved = self.save(field)?;
        Ok(())
    }

    /// Overwrites `field` with `saved` (from [`Executor::save`] of a field of the same shape,
    /// on an executor like this one); returns once it is copied, or on a GPU, from a copy that
    /// [`Executor::save_into`] page-locked for it, once the copy is queued ahead of later work.
    /// Refused ([`LaunchError::CopyShape`]) when the shapes or the parts differ.
    fn restore<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        saved: &HostCopy<T, D>,
    ) -> Result<(), LaunchError>;

    /// The values at the points of `range` (axis 0 fastest), as [`Field::read_range`] returns
    /// them; waits for earlier work.
    fn read_range<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        range: &Loop<D>,
    ) -> Result<Vec<T>, LaunchError>;

    /// [`Executor::read_range`] of each of `ranges`, issued in order with the executor's work
    /// but without waiting for it where the executor can: a GPU copies the values into
    /// page-locked host memory on its stream and [`Readback::wait`] waits for that copy alone.
    /// The values are those after the work issued before this call, whatever later work
    /// writes. Every range is checked first: an error reads nothing. The default reads at once.
    fn read_ranges_later<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        ranges: &[Loop<D>],
    ) -> Result<Readback<T>, LaunchError> {
        let values = ranges.iter().map(|r| self.read_range(field, r)).collect::<Result<_, _>>()?;
        Ok(Readback::ready(values))
    }

    /// Adds `values[i]` to point `points[i]` of `field` (storage coordinates inside its
    /// interior), in order: a point listed twice gets both values, the first first, so the bits
    /// are those of one launch per point adding its value. One operation for many points (the
    /// sources or residuals of [`SparsePoints::inject`](crate::SparsePoints::inject)) where a
    /// launch per point costs a launch each. Refused ([`SparseError`](crate::SparseError),
    /// nothing added): a point outside the interior, or another number of values than points. A
    /// declared boundary is filled again, as after a launch that writes the field.
    fn add_at<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        points: &[[usize; D]],
        values: &[T],
    ) -> Result<(), LaunchError>;

    /// [`Executor::run_with`] of a stencil that reduces, without waiting for its results where
    /// the executor can: a GPU copies them into page-locked host memory on its stream, and
    /// [`Reduced::fold_into`] waits for that copy alone and folds the launch's value into
    /// reduction parameters: the bits `run_with` leaves in a parameter holding the identity.
    /// The reduction parameters in `args` are left as they were (a sum holding −0.0 comes back
    /// as +0.0). The default runs at once.
    fn reduce_later<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
    ) -> Result<Reduced, LaunchError> {
        reduce_now(self, range, stencil, strategy, S::map_args(&mut args, &Same))
    }

    /// A scalar held in this executor's memory, holding `value`: what a stencil's `Held<T>`
    /// parameter takes, read by each launch when it runs (by a recorded step at each replay).
    fn held<T: Element>(&self, value: T) -> Result<Self::HeldScalar<T>, LaunchError>;

    /// Makes `held` hold `value`, in order after the work issued so far (on a GPU a copy on the
    /// stream; not inside a recorded step, whose work is the executor's own).
    fn set_held<T: Element>(&self, held: &Self::HeldScalar<T>, value: T) -> Result<(), LaunchError>;

    /// The value `held` holds after the work issued so far (waits for it).
    fn read_held<T: Element>(&self, held: &Self::HeldScalar<T>) -> Result<T, LaunchError>;

    /// [`Executor::read_held`] issued without waiting: the value after the work issued so far,
    /// once [`Readback::wait`] returns (on a GPU a copy into page-locked memory on the stream;
    /// the default reads at once).
    fn read_held_later<T: Element>(&self, held: &Self::HeldScalar<T>) -> Result<Readback<T>, LaunchError> {
        Ok(Readback::ready(vec![vec![self.read_held(held)?]]))
    }

    /// Runs the reducing `stencil` over `range` and leaves each reduction's result in the held
    /// scalar of `into` (one per reduction parameter, in order), on the executor: a GPU writes
    /// them on its stream without the host, so this may be part of a recorded step. The
    /// reduction parameters in `args` are left as they were. A held scalar the same launch reads
    /// may be written: every point reads it before the result is written. The default waits for
    /// the result. The distributed executor folds its parts' pieces on the devices in one
    /// process, and between ranks over NCCL folds minima and maxima by an all-reduce on the
    /// streams; otherwise (sums between ranks, host-staged ranks) on the host.
    fn reduce_into<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        args: S::Args<'_, Self>,
        into: &[&Self::HeldScalar<f64>],
    ) -> Result<(), LaunchError> {
        check_into::<S, D>(into.len())?;
        let values = self.reduce_later(range, stencil, strategy, args)?.values()?;
        into.iter().zip(values).try_for_each(|(h, v)| self.set_held(h, v))
    }

    /// Folds the values of held scalars of several executors (`sources` in order, each with its
    /// executor) with `op` in `elem`'s precision, as a reduction folds its pieces (from the
    /// identity, one after the other), into `into`, after the work issued so far on each
    /// source's executor. The default reads each value on the host (waits); a GPU folds on its
    /// stream, reading the sources of its own device or of peers. What the distributed executor
    /// folds its parts' results with.
    #[doc(hidden)]
    fn fold_held_from(
        &self,
        into: &Self::HeldScalar<f64>,
        op: crate::ReduceOp,
        elem: stencil_codegen::ir::ScalarType,
        sources: &[(&Self, &Self::HeldScalar<f64>)],
    ) -> Result<(), LaunchError> {
        fold_on_host(self, into, op, elem, sources)
    }

    /// Runs `stencil` over `range` with the executor's choice of kernel strategy. The checks are
    /// those of every launch: nothing is written when it returns an error.
    fn run<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        args: S::Args<'_, Self>,
    ) -> Result<(), LaunchError> {
        self.run_with(range, stencil, None, args)
    }

    /// [`Executor::run`] with a CUDA strategy for this launch (`None`: the default for the
    /// stencil). The host ignores it.
    fn run_with<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        args: S::Args<'_, Self>,
    ) -> Result<(), LaunchError>;

    /// Runs `stencil` over each of `regions` with the same arguments: the same as one
    /// [`Executor::run_with`] per non-empty region, in order, for regions that share no point.
    /// A GPU runs up to eight of them as one launch where the stencil allows it (no point
    /// functions, not a reduction or a column sweep; `STENCIL_FUSE_SLABS=0` turns it off): the
    /// distributed executor runs a part's boundary slabs this way.
    #[doc(hidden)]
    fn run_regions<S: Stencil<D>, const D: usize>(
        &self,
        regions: &[Loop<D>],
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
    ) -> Result<(), LaunchError> {
        for r in regions.iter().filter(|r| r.points() > 0) {
            self.run_with(r, stencil, strategy, S::map_args(&mut args, &Same))?;
        }
        Ok(())
    }

    /// Runs `steps` time steps of a stencil that reads one field of a pair and writes the other:
    /// the same as `steps` calls of `run(range, stencil, args(&a, &mut b, fixed))`, each followed
    /// by `std::mem::swap(a, b)`, so that `a` holds the last step's result. `args` builds one
    /// step's arguments from the step's input and output and `fixed`, the arguments that stay
    /// the same (other fields: `&(&kappa, &rho)`, or `&()`; scalars may also be captured):
    /// `exec.run_steps(&range, Heat, 100, (&mut u, &mut tmp), &kappa, |u, out, kappa| (c, kappa, u, out))`.
    ///
    /// Points outside `range` keep their values, in both fields, for all the steps: fill halos
    /// between calls, not within them. Both executors run the steps one by one; several steps
    /// per pass over the grid (temporal blocking) are [`Host::run_steps_with`] (both fields get
    /// the same bits) and, on a GPU, `Gpu::run_steps_with` (`a` gets the same bits, while `b`
    /// then holds the step before the last sweep, which is the one before the last only where
    /// the last sweep is a single step).
    fn run_steps<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        pair: (&mut Self::Field<T, D>, &mut Self::Field<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f Self::Field<T, D>, &'f mut Self::Field<T, D>, &'f X) -> S::Args<'f, Self>,
    {
        let (a, b) = pair;
        for _ in 0..steps {
            self.run(range, stencil, args(&*a, &mut *b, fixed))?;
            std::mem::swap(a, b);
        }
        Ok(())
    }

    /// [`Executor::run_steps`] in passes of up to `per_pass` steps over the grid (temporal
    /// blocking) where the executor has them, for models written once for every executor: the
    /// host runs [`Host::run_steps_with`] with [`HostTiling::new`]`(per_pass)` (and refuses what
    /// it refuses, `S0109`); the other executors run the steps one by one (a GPU's sweeps need a
    /// tiling measured on the card: `Gpu::run_steps_with`). The same bits either way; `per_pass`
    /// 0 or 1 is one step per launch.
    #[allow(clippy::too_many_arguments)]
    fn run_steps_in_passes<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        per_pass: usize,
        pair: (&mut Self::Field<T, D>, &mut Self::Field<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f Self::Field<T, D>, &'f mut Self::Field<T, D>, &'f X) -> S::Args<'f, Self>,
    {
        let _ = per_pass;
        self.run_steps(range, stencil, steps, pair, fixed, args)
    }

    /// Fills the halos of several fields of one element type, each along the axes it names
    /// (both ends of an axis by one [`HaloFill`]), as if by [`Field::fill_halo`] for each field
    /// and each named axis in increasing order; on a GPU all of it is one kernel.
    fn fill_halos<T: Element, const D: usize>(
        &self,
        jobs: &mut [HaloJob<'_, Self::Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        let mut sides: Vec<SideJob<'_, Self::Field<T, D>, D>> =
            jobs.iter_mut().map(|(f, fills)| (&mut **f, fills.map(|fill| [fill; 2]))).collect();
        self.fill_halo_sides(&mut sides)
    }

    /// [`Executor::fill_halos`] with a fill per side (`[low, high]`) of each axis, `None` to
    /// leave a side: e.g. the physical-boundary sides of a subdomain
    /// ([`Domains::fill_boundary`](crate::Domains::fill_boundary)). As if by
    /// [`Field::fill_halo_sides`] for each field and axis in increasing order.
    fn fill_halo_sides<T: Element, const D: usize>(
        &self,
        jobs: &mut [SideJob<'_, Self::Field<T, D>, D>],
    ) -> Result<(), LaunchError>;

    /// Declares the physical boundary of `field`, once: per axis, the fill of both ends of its
    /// halo (`None`: the halo keeps the values it holds, a fixed boundary). The executor fills
    /// the halo now, and again after every launch or copy that writes the field, before anything
    /// reads it: as if [`Executor::fill_halos`] with these fills followed each write, so a model
    /// calls no fill. On a [`Distributed`](crate::Distributed) executor it fills the sides on the
    /// grid's edge (and exchanges across the cuts), when a launch first needs them. An error when
    /// the halo is too narrow for a fill, or (distributed) a fill contradicts the periodicity of
    /// the decomposition.
    fn declare_boundary<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        fills: [Option<HaloFill>; D],
    ) -> Result<(), LaunchError>;

    /// Waits for everything issued so far.
    fn synchronize(&self) -> Result<(), LaunchError>;

    /// Runs `work` with `n` executors whose work may overlap (on a GPU: handles on side streams
    /// that start after everything issued so far, and that work issued afterwards waits for;
    /// on the host: `n` copies of itself, which run each call to completion; on a
    /// [`Distributed`](crate::Distributed) executor: handles whose launches run on side handles
    /// of every part's executor, see its `fork_join`). Work given to
    /// different handles must not write what another reads or writes, e.g. the regions of
    /// [`Loop::split_boundary`].
    fn fork_join<R>(&self, n: usize, work: impl FnOnce(&[Self]) -> Result<R, LaunchError>) -> Result<R, LaunchError>;

    /// The shape of one of this executor's fields (a convenience for generic code).
    fn shape_of<'f, T: Element, const D: usize>(&self, field: &'f Self::Field<T, D>) -> &'f Shape<D> {
        field.shape()
    }

    /// Fills the halo of one field along one axis (see [`Executor::fill_halos`]).
    fn fill_halo<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        axis: usize,
        fill: HaloFill,
    ) -> Result<(), LaunchError> {
        let mut fills = [None; D];
        if axis >= D {
            return Err(HaloError::NoSuchAxis { axis, dims: D }.into());
        }
        fills[axis] = Some(fill);
        self.fill_halos(&mut [(field, fills)])
    }
}

/// [`Executor::fold_held_from`] with each source read on the host (waits for each).
pub(crate) fn fold_on_host<E: Executor>(
    exec: &E,
    into: &E::HeldScalar<f64>,
    op: crate::ReduceOp,
    elem: stencil_codegen::ir::ScalarType,
    sources: &[(&E, &E::HeldScalar<f64>)],
) -> Result<(), LaunchError> {
    let mut acc = crate::reduce::reducer(op, elem);
    for (source, held) in sources {
        acc.fold_f64(source.read_held(held)?);
    }
    exec.set_held(into, acc.value_f64())
}

/// Refuses a [`Executor::reduce_into`] whose held scalars are not one per reduction of `S`.
pub(crate) fn check_into<S: Stencil<D>, const D: usize>(given: usize) -> Result<(), LaunchError> {
    let expected = S::ir().reductions().count();
    if given != expected {
        return Err(LaunchError::Reductions { stencil: S::INFO.name, expected, given });
    }
    Ok(())
}

/// [`Executor::reduce_later`] that runs at once: the launch's results taken out of its reduction
/// parameters, which get their values back.
pub(crate) fn reduce_now<E: Executor, S: Stencil<D>, const D: usize>(
    exec: &E,
    range: &Loop<D>,
    stencil: S,
    strategy: Option<Strategy>,
    mut args: S::Args<'_, E>,
) -> Result<Reduced, LaunchError> {
    let mut before = Vec::new();
    for v in S::erase_args::<E>(S::map_args(&mut args, &Same)) {
        if let ArgValue::Reduction(r) = v {
            before.push(r.value_f64());
            r.reset_value();
        }
    }
    let ran = exec.run_with(range, stencil, strategy, S::map_args(&mut args, &Same));
    let mut results = Vec::with_capacity(before.len());
    let mut before = before.into_iter();
    for v in S::erase_args::<E>(S::map_args(&mut args, &Same)) {
        if let ArgValue::Reduction(r) = v {
            results.push(r.value_f64());
            r.reset_value();
            r.fold_f64(before.next().expect("one value per reduction"));
        }
    }
    ran?;
    Ok(Reduced::ready::<S, D>(if results.is_empty() { Vec::new() } else { vec![results] }))
}

/// A field saved in host memory by [`Executor::save`]: its storage, halos included, or (a
/// distributed executor's field) the copy of each part. Not `Clone`: a copy queued into it by
/// [`Executor::save_into`] may still be landing; [`Executor::restore`] is the way back.
#[derive(Debug)]
pub struct HostCopy<T: Element, const D: usize> {
    // Declared first, so dropped first: it waits for copies in flight and unlocks the pages
    // before `whole`'s memory is freed.
    locked: PageLock,
    whole: Option<Field<T, D>>,
    parts: Vec<HostCopy<T, D>>,
}

/// What keeps a [`HostCopy`]'s memory page-locked for an executor's asynchronous copies (on a
/// GPU: the registration, which waits for the copies in flight and unregisters when dropped);
/// none for a copy that is not.
#[derive(Default)]
pub(crate) struct PageLock(Option<Box<dyn PageLocked>>);

/// A page-locked region of host memory held by an executor.
pub(crate) trait PageLocked: Send + Sync + std::any::Any {
    /// Waits until no queued copy reads or writes the memory.
    fn wait(&self) -> Result<(), LaunchError>;
    /// As [`std::any::Any`], to tell which executor locked it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn as_any(&self) -> &dyn std::any::Any;
}

impl fmt::Debug for PageLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "page-locked" } else { "pageable" })
    }
}

impl<T: Element, const D: usize> HostCopy<T, D> {
    /// The copy of one field's storage.
    pub(crate) fn whole(field: Field<T, D>) -> Self {
        HostCopy { locked: PageLock::default(), whole: Some(field), parts: Vec::new() }
    }

    /// The copy of a field of several parts, each saved by its executor.
    pub(crate) fn of_parts(parts: Vec<HostCopy<T, D>>) -> Self {
        HostCopy { locked: PageLock::default(), whole: None, parts }
    }

    /// The page lock of its memory, if an executor locked it.
    pub(crate) fn lock(&self) -> Option<&dyn PageLocked> {
        self.locked.0.as_deref()
    }

    /// Keeps its memory locked by `lock`; release any earlier lock first ([`HostCopy::unlock`]):
    /// memory cannot be locked twice.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn set_lock(&mut self, lock: Box<dyn PageLocked>) {
        debug_assert!(self.locked.0.is_none(), "a host copy is locked once at a time");
        self.locked = PageLock(Some(lock));
    }

    /// Releases the lock of its memory, if any, after the copies in flight (dropping it waits).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn unlock(&mut self) {
        self.locked = PageLock(None);
    }

    /// Waits for the copies in flight into or out of its memory (none unless page-locked).
    pub(crate) fn settle(&self) -> Result<(), LaunchError> {
        self.lock().map_or(Ok(()), PageLocked::wait)?;
        self.parts.iter().try_for_each(HostCopy::settle)
    }

    /// The host memory it holds, bytes.
    pub fn bytes(&self) -> usize {
        let whole = self.whole.as_ref().map_or(0, |f| std::mem::size_of_val(f.as_slice()));
        whole + self.parts.iter().map(HostCopy::bytes).sum::<usize>()
    }

    /// The copies of its parts, in the order of the subdomains (none for a whole field).
    pub(crate) fn parts(&self) -> &[HostCopy<T, D>] {
        &self.parts
    }

    /// [`HostCopy::parts`], to be overwritten.
    pub(crate) fn parts_mut(&mut self) -> &mut [HostCopy<T, D>] {
        &mut self.parts
    }

    /// The field of a copy of a whole field of `shape`, to be overwritten (`None` otherwise).
    pub(crate) fn whole_mut(&mut self, shape: &Shape<D>) -> Option<&mut Field<T, D>> {
        self.whole.as_mut().filter(|f| f.shape() == shape)
    }

    /// [`HostCopy::whole_mut`] with the page lock of its memory, if any.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn whole_and_lock(&mut self, shape: &Shape<D>) -> Option<(&mut Field<T, D>, Option<&dyn PageLocked>)> {
        let lock = self.locked.0.as_deref();
        self.whole.as_mut().filter(|f| f.shape() == shape).map(|f| (f, lock))
    }

    /// The field of a copy of a whole field, checked against the shape it is restored into;
    /// its copies in flight may not have landed yet (read it only by copies queued after them).
    pub(crate) fn only(&self, shape: &Shape<D>) -> Result<&Field<T, D>, LaunchError> {
        match &self.whole {
            Some(f) if f.shape() == shape => Ok(f),
            _ => Err(LaunchError::CopyShape { source_shape: self.describe(), destination_shape: shape.describe() }),
        }
    }

    /// What it holds, for errors.
    pub(crate) fn describe(&self) -> String {
        match &self.whole {
            Some(f) => f.shape().describe(),
            None => format!("{} saved parts", self.parts.len()),
        }
    }
}

/// The halo-message half of an executor: contiguous buffers, packing boxes of fields into them
/// and out of them, and moving them between executors and to and from the host. What
/// [`HaloExchange`](crate::domain::HaloExchange) is built on; every [`Executor`] has it.
pub trait Messages: Sized {
    /// A contiguous buffer for halo messages ([`HostBuffer`]; device memory on a GPU).
    type Buffer: MessageBuffer;

    /// A message buffer of `bytes` bytes (contents unspecified until packed).
    fn alloc_buffer(&self, bytes: usize) -> Result<Self::Buffer, LaunchError>;

    /// Copies each part's box of its field into `buffer` at the part's offset, after earlier
    /// work (on a GPU: one kernel for all parts).
    fn pack<const D: usize>(&self, parts: &[BoxPart<'_, D>], buffer: &mut Self::Buffer) -> Result<(), LaunchError>;

    /// Copies each part's bytes from `buffer` into its field's box: [`Messages::pack`] reversed.
    fn unpack<const D: usize>(&self, buffer: &Self::Buffer, parts: &[BoxPart<'_, D>]) -> Result<(), LaunchError>;

    /// Copies the first `bytes` bytes of `src` (a buffer of `src_exec`) into `dst`, after the
    /// earlier work of both executors and before their later work (between GPUs: a peer copy).
    fn copy_buffer(
        &self,
        dst: &mut Self::Buffer,
        src_exec: &Self,
        src: &Self::Buffer,
        bytes: usize,
    ) -> Result<(), LaunchError>;

    /// Makes the first `bytes` bytes of `buffer` readable through
    /// [`MessageBuffer::host_bytes`] (on a GPU: a copy to its pinned mirror); waits.
    fn buffer_to_host(&self, buffer: &mut Self::Buffer, bytes: usize) -> Result<(), LaunchError>;

    /// Makes the first `bytes` bytes written through [`MessageBuffer::host_bytes`] the
    /// buffer's, before later work (on a GPU: a copy from the mirror, which must not be written
    /// again before the executor has passed it: [`Executor::synchronize`]).
    fn buffer_from_host(&self, buffer: &mut Self::Buffer, bytes: usize) -> Result<(), LaunchError>;

    /// A point in this executor's issued work that other executors' work can be ordered after
    /// ([`Messages::mark`], [`Messages::after`]): an event on a GPU, nothing on the host.
    #[doc(hidden)]
    type Mark: Send + Sync;

    /// Whether [`Messages::copy_boxes`] reads the fields of `src_exec` directly (one memory, or
    /// peer access between GPUs).
    #[doc(hidden)]
    fn reaches(&self, _src_exec: &Self) -> Result<bool, LaunchError> {
        Ok(false)
    }

    /// Marks the work issued so far.
    #[doc(hidden)]
    fn mark(&self) -> Result<Self::Mark, LaunchError>;

    /// Orders this executor's later work after `mark` (of this or another executor).
    #[doc(hidden)]
    fn after(&self, mark: &Self::Mark) -> Result<(), LaunchError>;

    /// Copies each box of `from` (fields of `src_exec`) into the box of `into` at the same index,
    /// field to field without a buffer, in this executor's order; the caller orders it after
    /// `src_exec`'s writes and before its later writes ([`Messages::mark`]). Only where
    /// [`Messages::reaches`] says so.
    #[doc(hidden)]
    fn copy_boxes<const D: usize>(
        &self,
        _into: &[BoxPart<'_, D>],
        _src_exec: &Self,
        _from: &[BoxPart<'_, D>],
    ) -> Result<(), LaunchError> {
        Err(DistributionError::NoDirectCopy { executor: std::any::type_name::<Self>() }.into())
    }

    /// [`Messages::copy_boxes`] from several executors at once (each source with the boxes it
    /// fills and the boxes of its fields it reads), in as few operations as this executor can
    /// issue them (on a GPU: one kernel for every box, where they are more than one).
    #[doc(hidden)]
    fn copy_boxes_from<const D: usize>(
        &self,
        sources: &[(&Self, &[BoxPart<'_, D>], &[BoxPart<'_, D>])],
    ) -> Result<(), LaunchError> {
        sources.iter().try_for_each(|(src, into, from)| self.copy_boxes(into, src, from))
    }
}

/// The recording half of an executor: a step's work recorded once and replayed without the
/// host issuing it again (CUDA graphs); every [`Executor`] has it (the host records nothing).
/// [`Recorded`] is built on it.
pub trait Record: Sized {
    /// A recorded step that replays without the host issuing its work again (a CUDA graph);
    /// `()` where recording brings nothing (the host).
    type Recording: Send;

    /// Records the work `step` issues, without running it, for [`Record::replay`]. `None`
    /// when this executor does not record (the host): the caller runs `step` each time.
    fn record(
        &self,
        step: &mut dyn FnMut(&Self) -> Result<(), LaunchError>,
    ) -> Result<Option<Self::Recording>, LaunchError>;

    /// Issues a recording's work again, in order after earlier work.
    fn replay(&self, recording: &Self::Recording) -> Result<(), LaunchError>;

    /// Records, as one recording, the work `step` issues on this executor and on `others` (on
    /// GPUs: one graph over every device, started from this executor's stream); `None` where
    /// this executor does not record. What a distributed executor records a step with.
    #[doc(hidden)]
    fn record_group(
        &self,
        _others: &[Self],
        _step: &mut dyn FnMut() -> Result<(), LaunchError>,
    ) -> Result<Option<Self::Recording>, LaunchError> {
        Ok(None)
    }

    /// Replays a [`Record::record_group`] recording after the earlier work of this executor
    /// and of `others`, and before their later work.
    #[doc(hidden)]
    fn replay_group(&self, _others: &[Self], recording: &Self::Recording) -> Result<(), LaunchError> {
        self.replay(recording)
    }
}

impl<const D: usize> Loop<D> {
    /// Runs `stencil` over this range on host fields: `range.run(Diffusion3d, (c, &f, &mut g))`,
    /// the same as `Host.run(&range, ...)`.
    ///
    /// Returns an error (and touches nothing) if the range and the stencil's reach do not fit in
    /// every field, or if the fields differ in shape.
    pub fn run<S: Stencil<D>>(&self, stencil: S, args: S::Args<'_, Host>) -> Result<(), LaunchError> {
        Host.run(self, stencil, args)
    }

    /// Runs `stencil` over this range on `exec`'s fields: `range.run_on(&gpu, F, (c, &df, &mut dg))`.
    pub fn run_on<E: Executor, S: Stencil<D>>(
        &self,
        exec: &E,
        stencil: S,
        args: S::Args<'_, E>,
    ) -> Result<(), LaunchError> {
        exec.run(self, stencil, args)
    }

    /// This range with an explicit CUDA strategy instead of [`Strategy::default_for`].
    pub fn with_strategy(self, strategy: Strategy) -> StrategyLoop<D> {
        StrategyLoop { range: self, strategy }
    }
}

/// A range with an explicit CUDA strategy: `range.with_strategy(s).run_on(&gpu, F, args)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrategyLoop<const D: usize> {
    range: Loop<D>,
    strategy: Strategy,
}

impl<const D: usize> StrategyLoop<D> {
    /// Runs `stencil` over the range on `exec` with this strategy (the host ignores it).
    pub fn run_on<E: Executor, S: Stencil<D>>(
        &self,
        exec: &E,
        stencil: S,
        args: S::Args<'_, E>,
    ) -> Result<(), LaunchError> {
        exec.run_with(&self.range, stencil, Some(self.strategy), args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Decomposition, Distributed};

    #[test]
    fn a_saved_field_restores_only_into_a_field_of_its_shape_and_parts() {
        let shape = Shape::new([8, 6]).halo(1);
        let field = Field::<f64, 2>::from_fn(shape, |[i, j]| (i + 10 * j) as f64);
        let saved = Host.save(&field).unwrap();
        assert_eq!(saved.bytes(), shape.len() * 8);
        // Another shape: refused, nothing written.
        let mut other = Field::<f64, 2>::filled(Shape::new([8, 5]).halo(1), -1.0);
        match Host.restore(&mut other, &saved) {
            Err(LaunchError::CopyShape { source_shape, destination_shape }) => {
                assert!(source_shape.contains("[8, 6]") && destination_shape.contains("[8, 5]"))
            }
            r => panic!("restored into another shape: {r:?}"),
        }
        assert!(other.to_vec().iter().all(|&x| x == -1.0));
        // A distributed field of two parts from a copy of a whole field: refused.
        let exec = Distributed::host(Decomposition::new([8, 6], [2, 1], [false; 2], [1; 2]).unwrap()).unwrap();
        let mut split = exec.upload(&field).unwrap();
        let e = exec.restore(&mut split, &saved).unwrap_err();
        assert!(matches!(e, LaunchError::CopyShape { .. }), "{e}");
        // Its own copy, part by part: the same field back, after it was overwritten.
        let own = exec.save(&split).unwrap();
        exec.copy(&mut split, &exec.upload(&Field::filled(shape, 7.0)).unwrap()).unwrap();
        exec.restore(&mut split, &own).unwrap();
        assert_eq!(
            exec.download(&split).unwrap().to_vec(),
            exec.download(&exec.upload(&field).unwrap()).unwrap().to_vec()
        );
    }

    #[test]
    fn an_executor_that_does_not_reach_refuses_a_direct_copy_and_says_to_use_buffers() {
        let shape = Shape::new([8, 6]).halo(1);
        let (mut a, mut b) =
            (Field::<f64, 2>::zeros(shape), Field::<f64, 2>::from_fn(shape, |[i, j]| (i + 10 * j) as f64));
        let (into, from) = (ErasedField::of(&mut a), ErasedField::of(&mut b));
        let written = [into.part([0, 1], [1, 6], 0).unwrap()];
        let read = [from.part([8, 1], [1, 6], 0).unwrap()];
        // The host reaches its own memory and copies these boxes.
        assert!(Host.reaches(&Host).unwrap());
        Host.copy_boxes(&written, &Host, &read).unwrap();
        // A distributed executor reaches no other executor's fields (its subdomains' executors
        // exchange) and keeps the refusing default.
        let exec = Distributed::host(Decomposition::new([8, 6], [2, 1], [false; 2], [1; 2]).unwrap()).unwrap();
        assert!(!exec.reaches(&exec).unwrap());
        match exec.copy_boxes(&written, &exec, &read) {
            Err(LaunchError::Decomposition(e @ DistributionError::NoDirectCopy { executor })) => {
                assert_eq!(executor, std::any::type_name::<Distributed<Host, 2>>());
                let text = e.to_string();
                assert!(
                    text.contains(&format!("{executor} cannot read another executor's fields directly"))
                        && text.contains("exchange its halos through message buffers (set STENCIL_DIRECT_HALOS=0)"),
                    "{text}"
                );
            }
            other => panic!("expected DistributionError::NoDirectCopy, got {other:?}"),
        }
        assert_eq!(a.read_box([0, 1], [1, 6]).unwrap(), b.read_box([8, 1], [1, 6]).unwrap());
    }
}
