//! [`Gpu`] as an [`Executor`]: device fields, stencil launches through a per-device table of
//! prepared kernels, one-kernel halo fills, and steps recorded as CUDA graphs.
//!
//! The launch path: the first launch of a (stencil, strategy, geometry) prints the kernel,
//! compiles it (or loads the cubin from the disk cache) and keeps the loaded function with its
//! launch shape under a small key; every later launch checks the arguments, looks the key up and
//! calls `cuLaunchKernel`: no string is built and no source is hashed.

use super::compile::KERNEL_OPTIONS;
use super::context::Gpu;
use super::error::CudaError;
use super::halo::{self, fill_halo_sides, DeclaredJobs};
use super::held::DeviceHeld;
use super::kernel::{LaunchKey, Prepared};
use super::launch::{scalar_or_field, KernelArg};
use super::memory::{DeviceField, HostRegistration};
use super::tune::{LaunchPlan, WrittenField};
use crate::comm::gpu_buffer::{self as message, GpuBuffer};
use crate::comm::peer::enable_peer_access;
use crate::error::LaunchError;
use crate::executor::{BoxPart, Executor, HostCopy, Messages, Readback, Record, Reduced, Same, SideJob, Stencil};
use crate::field::{Element, Field, HaloFill, Shape};
use crate::gpu::source::{geometry, layout_lengths, max_elem_bytes};
use crate::range::Loop;
use crate::stencil::args::{ArgValue, FieldStorage};
use crate::stencil::launch::validate;
use crate::stencil::FieldInfo;
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;
use std::sync::{Arc, PoisonError};
use stencil_codegen::analysis::field_accesses;
use stencil_codegen::printer::cuda::Strategy;
use stencil_codegen::StencilIr;

/// A CUDA graph recorded from a [`Gpu`]'s stream (see [`crate::Recorded`]).
pub struct GpuGraph {
    graph: CudaGraph,
}

// SAFETY: a graph is only launched through `Record::replay`, which takes `&GpuGraph` from
// `Recorded::replay(&mut self)`: one thread at a time, as the driver requires.
unsafe impl Send for GpuGraph {}

impl<T: Element, const D: usize> FieldStorage<T, D> for DeviceField<T, D> {
    fn shape(&self) -> &Shape<D> {
        DeviceField::shape(self)
    }
    fn address(&self) -> u64 {
        self.device_ptr()
    }
    fn home(&self) -> usize {
        self.gpu().home()
    }
}

impl Gpu {
    /// Fills the declared boundaries of the fields a launch of `S` with `args` wrote.
    fn fill_declared<S: Stencil<D>, const D: usize>(&self, args: &mut S::Args<'_, Gpu>) -> Result<(), LaunchError> {
        let declared = DeclaredJobs { gpu: self, jobs: std::cell::RefCell::new(Ok(Vec::new())) };
        S::map_args(args, &declared);
        halo::fill(self, declared.jobs.into_inner()?)
    }

    /// One launch of `S` over `range` with its erased arguments (checked first).
    fn launch_stencil<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        strategy: Option<Strategy>,
        values: Vec<ArgValue<'_, D>>,
    ) -> Result<(), LaunchError> {
        let shape = self.check_launch::<S, D>(range, &values)?;
        if range.points() == 0 {
            return Ok(());
        }
        let ir = S::ir();
        if ir.reduces() {
            return super::reduce::run::<S, D>(self, range, &shape, values);
        }
        let (len, origin, args) = kernel_args::<S, D>(&shape, range, &values)?;
        let plan = LaunchPlan {
            name: S::INFO.name,
            ir_text: S::IR,
            ir: S::source_ir(),
            geometry: geometry(&shape, range, max_elem_bytes(ir)),
            len,
            origin,
            args,
            written: &|| written_fields(ir, S::INFO.fields, &values),
            first_pass: &|| self.first_pass(S::IR, S::source_ir(), &shape, range),
        };
        let strategy = match strategy {
            Some(s) => s,
            None => self.choose_strategy(&plan)?,
        };
        tracing::trace!(target: "stencil::launch", stencil = S::INFO.name, on = self.ordinal(), ?strategy, points = range.points(), "run");
        self.launch_plan(&plan, strategy, &plan.args)
    }

    /// The identifier of this device context in [`FieldStorage::home`].
    pub(crate) fn home(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Kernels prepared for launches so far on this device (for tests and benchmarks: a repeat
    /// launch adds none).
    pub fn prepared_kernels(&self) -> usize {
        self.inner.launches.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// The prepared kernel for `key` (of stencil `name` with IR `ir`), printing and compiling
    /// it on first use.
    pub(crate) fn prepared(&self, ir: &StencilIr, name: &str, key: LaunchKey) -> Result<Arc<Prepared>, LaunchError> {
        if let Some(p) = self.inner.launches.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return Ok(p.clone());
        }
        let printed = key
            .kernel
            .print(ir, &key.geometry)
            .map_err(|e| CudaError::UnsupportedStrategy { stencil: name.to_string(), reason: e.to_string() })?;
        let (kernel, _) = self.kernel_with_stats(&printed.source, &printed.entry, KERNEL_OPTIONS)?;
        let prepared = Arc::new(Prepared {
            kernel,
            block: printed.block,
            points_per_block: printed.points_per_block,
            shared_bytes: printed.shared_bytes,
            line_points: printed.line_points,
        });
        self.inner.launches.lock().unwrap_or_else(PoisonError::into_inner).insert(key, prepared.clone());
        Ok(prepared)
    }

    /// The checks of every launch of `S` on this device: every field lives here, and the
    /// range with the stencil's reach fits in every field (which share one shape, returned).
    pub(crate) fn check_launch<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        values: &[ArgValue<'_, D>],
    ) -> Result<Shape<D>, LaunchError> {
        let home = self.home();
        let mut shapes = Vec::with_capacity(S::INFO.fields.len());
        let field_values = values.iter().filter_map(|v| match v {
            ArgValue::Field { shape, home, .. } => Some((*shape, *home)),
            _ => None,
        });
        for (info, (shape, field_home)) in S::INFO.fields.iter().zip(field_values) {
            if field_home != home {
                return Err(LaunchError::WrongDevice {
                    stencil: S::INFO.name,
                    field: info.name,
                    executor: self.describe(),
                });
            }
            shapes.push((info.name, shape));
        }
        // A held scalar is read through its address: it must live on this device too.
        for (param, v) in S::ir().params.iter().zip(values) {
            if matches!(v, ArgValue::Held { home: h, .. } if *h != home) {
                return Err(LaunchError::WrongDevice {
                    stencil: S::INFO.name,
                    field: param.name.as_str(),
                    executor: self.describe(),
                });
            }
        }
        validate(range, &S::INFO, &shapes)
    }
}

impl Executor for Gpu {
    type Field<T: Element, const D: usize> = DeviceField<T, D>;
    type HeldScalar<T: Element> = DeviceHeld<T>;

    fn held<T: Element>(&self, value: T) -> Result<DeviceHeld<T>, LaunchError> {
        let held = DeviceHeld { field: Gpu::alloc(self, Shape::new([1]))? };
        self.set_held(&held, value)?;
        Ok(held)
    }

    fn set_held<T: Element>(&self, held: &DeviceHeld<T>, value: T) -> Result<(), LaunchError> {
        Ok(held.set(self, value)?)
    }

    fn read_held<T: Element>(&self, held: &DeviceHeld<T>) -> Result<T, LaunchError> {
        let values = self.read_held_later(held)?.wait()?;
        Ok(values[0][0])
    }

    fn read_held_later<T: Element>(&self, held: &DeviceHeld<T>) -> Result<Readback<T>, LaunchError> {
        if held.field.home() != self.home() {
            return Err(LaunchError::WrongDevice {
                stencil: "read_held",
                field: "its held scalar",
                executor: self.describe(),
            });
        }
        let at = crate::executor::HeldStorage::address(held);
        // SAFETY: one element at the held scalar's live device allocation on this device.
        Ok(unsafe { super::memory::read_pinned::<T>(self, "reading a held scalar", &[(at, 1)], vec![1]) }?)
    }

    fn fold_held_from(
        &self,
        into: &DeviceHeld<f64>,
        op: crate::ReduceOp,
        elem: stencil_codegen::ir::ScalarType,
        sources: &[(&Gpu, &DeviceHeld<f64>)],
    ) -> Result<(), LaunchError> {
        if super::held::fold(self, into, op, elem, sources)? {
            return Ok(());
        }
        crate::executor::fold_on_host(self, into, op, elem, sources)
    }

    fn reduce_into<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Gpu>,
        into: &[&DeviceHeld<f64>],
    ) -> Result<(), LaunchError> {
        crate::executor::check_into::<S, D>(into.len())?;
        if !S::ir().reduces() {
            return self.run_with(range, stencil, strategy, args);
        }
        for h in into {
            if h.field.home() != self.home() {
                return Err(LaunchError::WrongDevice {
                    stencil: S::INFO.name,
                    field: "a held scalar of reduce_into",
                    executor: self.describe(),
                });
            }
        }
        let values = S::erase_args::<Gpu>(S::map_args(&mut args, &Same));
        let shape = self.check_launch::<S, D>(range, &values)?;
        if range.points() == 0 {
            // The reduction of no points is its identity.
            drop(values);
            let ops: Vec<_> = S::ir().reductions().map(|(_, r)| r.op).collect();
            return ops.iter().zip(into).try_for_each(|(op, h)| self.set_held(h, crate::reduce::identity::<f64>(*op)));
        }
        let targets: Vec<u64> = into.iter().map(|h| h.field.device_ptr()).collect();
        super::reduce::issue_into::<S, D>(self, range, &shape, &values, &targets)?;
        drop(values);
        self.fill_declared::<S, D>(&mut args)
    }

    fn describe(&self) -> String {
        format!("{self:?}")
    }

    fn alloc<T: Element, const D: usize>(&self, shape: Shape<D>) -> Result<DeviceField<T, D>, LaunchError> {
        Ok(Gpu::alloc(self, shape)?)
    }

    fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<DeviceField<T, D>, LaunchError> {
        Ok(Gpu::upload(self, host)?)
    }

    fn download<T: Element, const D: usize>(&self, field: &DeviceField<T, D>) -> Result<Field<T, D>, LaunchError> {
        Ok(field.download()?)
    }

    fn copy<T: Element, const D: usize>(
        &self,
        dst: &mut DeviceField<T, D>,
        src: &DeviceField<T, D>,
    ) -> Result<(), LaunchError> {
        dst.copy_from(src)?;
        let fills = dst.boundary.map(|f| f.map(|f| [f; 2]));
        fills.map_or(Ok(()), |fills| fill_halo_sides(self, &mut [(dst, fills)]))
    }

    fn save<T: Element, const D: usize>(&self, field: &DeviceField<T, D>) -> Result<HostCopy<T, D>, LaunchError> {
        Ok(HostCopy::whole(field.download()?))
    }

    /// Into a copy of a field of the same shape: its memory is page-locked for this handle's
    /// stream (once), and the copy is queued there without waiting (later work on the stream
    /// may overwrite the field: it runs after the copy).
    fn save_into<T: Element, const D: usize>(
        &self,
        field: &DeviceField<T, D>,
        saved: &mut HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        let Some((copy, lock)) = saved.whole_and_lock(field.shape()) else {
            *saved = self.save(field)?;
            return Ok(());
        };
        if locked_here(self, lock, copy.as_slice()).is_none() {
            // Locked for another stream, or not at all: its copies land first and the old lock
            // is released (memory is registered once at a time), then it is locked for this one.
            saved.settle()?;
            saved.unlock();
            let copy = saved.whole_mut(field.shape()).expect("checked above");
            // SAFETY: the registration is kept in `saved` beside the field whose memory it
            // locks, declared before it (dropped, waiting for the stream, before the memory is
            // freed), and the field is never resized.
            let lock = unsafe { HostRegistration::new(self, copy.as_slice()) }?;
            saved.set_lock(Box::new(lock));
        }
        let (copy, lock) = saved.whole_and_lock(field.shape()).expect("checked above");
        let lock = locked_here(self, lock, copy.as_slice()).expect("locked above");
        field.copy_to_locked_host(copy, lock)?;
        Ok(())
    }

    /// From a copy page-locked for this handle's stream: queued without waiting.
    fn restore<T: Element, const D: usize>(
        &self,
        field: &mut DeviceField<T, D>,
        saved: &HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        let copy = saved.only(field.shape())?;
        match locked_here(self, saved.lock(), copy.as_slice()) {
            Some(lock) => field.copy_from_locked_host(copy, lock)?,
            None => {
                saved.settle()?;
                field.copy_from_host(copy)?
            }
        }
        let fills = field.boundary.map(|f| f.map(|f| [f; 2]));
        fills.map_or(Ok(()), |fills| fill_halo_sides(self, &mut [(field, fills)]))
    }

    fn add_at<T: Element, const D: usize>(
        &self,
        field: &mut DeviceField<T, D>,
        points: &[[usize; D]],
        values: &[T],
    ) -> Result<(), LaunchError> {
        let offsets = crate::sparse::add_offsets(field.shape(), points, values.len())?;
        super::add_at::add_at(self, field, &offsets, values)?;
        let fills = field.boundary.map(|f| f.map(|f| [f; 2]));
        fills.map_or(Ok(()), |fills| fill_halo_sides(self, &mut [(field, fills)]))
    }

    fn read_range<T: Element, const D: usize>(
        &self,
        field: &DeviceField<T, D>,
        range: &Loop<D>,
    ) -> Result<Vec<T>, LaunchError> {
        Ok(field.read_range(range)?)
    }

    fn read_ranges_later<T: Element, const D: usize>(
        &self,
        field: &DeviceField<T, D>,
        ranges: &[Loop<D>],
    ) -> Result<Readback<T>, LaunchError> {
        Ok(field.read_ranges_later(ranges)?)
    }

    fn run_with<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        _stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Gpu>,
    ) -> Result<(), LaunchError> {
        self.launch_stencil::<S, D>(range, strategy, S::erase_args::<Gpu>(S::map_args(&mut args, &Same)))?;
        if range.points() == 0 {
            return Ok(());
        }
        self.fill_declared::<S, D>(&mut args)
    }

    fn reduce_later<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Gpu>,
    ) -> Result<Reduced, LaunchError> {
        if !S::ir().reduces() {
            self.run_with(range, stencil, strategy, args)?;
            return Ok(Reduced::ready::<S, D>(Vec::new()));
        }
        let values = S::erase_args::<Gpu>(S::map_args(&mut args, &Same));
        let shape = self.check_launch::<S, D>(range, &values)?;
        if range.points() == 0 {
            return Ok(Reduced::ready::<S, D>(Vec::new()));
        }
        let results = super::reduce::issue::<S, D>(self, range, &shape, &values)?;
        drop(values);
        self.fill_declared::<S, D>(&mut args)?;
        Ok(Reduced::from_readback::<S, D>(results))
    }

    fn run_regions<S: Stencil<D>, const D: usize>(
        &self,
        regions: &[Loop<D>],
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Gpu>,
    ) -> Result<(), LaunchError> {
        let regions: Vec<Loop<D>> = regions.iter().copied().filter(|r| r.points() > 0).collect();
        // Every range is checked before any runs: a refused call writes nothing.
        let values = S::erase_args::<Gpu>(S::map_args(&mut args, &Same));
        let mut shape = None;
        for r in &regions {
            shape = Some(self.check_launch::<S, D>(r, &values)?);
        }
        let fused = match shape {
            Some(shape) if strategy.is_none() => self.launch_regions::<S, D>(&regions, &shape, &values)?,
            _ => false,
        };
        drop(values);
        if !fused {
            return regions.iter().try_for_each(|r| self.run_with(r, stencil, strategy, S::map_args(&mut args, &Same)));
        }
        self.fill_declared::<S, D>(&mut args)
    }

    fn declare_boundary<T: Element, const D: usize>(
        &self,
        field: &mut DeviceField<T, D>,
        fills: [Option<HaloFill>; D],
    ) -> Result<(), LaunchError> {
        let sides = fills.map(|f| [f; 2]);
        let job = halo::job(self, field, &sides)?;
        field.boundary = Some(fills);
        halo::fill(self, vec![job])
    }

    fn fill_halo_sides<T: Element, const D: usize>(
        &self,
        jobs: &mut [SideJob<'_, DeviceField<T, D>, D>],
    ) -> Result<(), LaunchError> {
        fill_halo_sides(self, jobs)
    }

    fn synchronize(&self) -> Result<(), LaunchError> {
        Ok(Gpu::synchronize(self)?)
    }

    fn fork_join<R>(&self, n: usize, work: impl FnOnce(&[Self]) -> Result<R, LaunchError>) -> Result<R, LaunchError> {
        Gpu::fork_join(self, n, work)
    }
}

impl Messages for Gpu {
    type Buffer = GpuBuffer;

    fn alloc_buffer(&self, bytes: usize) -> Result<GpuBuffer, LaunchError> {
        Ok(GpuBuffer::new(self, bytes)?)
    }

    fn pack<const D: usize>(&self, parts: &[BoxPart<'_, D>], buffer: &mut GpuBuffer) -> Result<(), LaunchError> {
        message::pack(self, parts, buffer, false)
    }

    fn unpack<const D: usize>(&self, buffer: &GpuBuffer, parts: &[BoxPart<'_, D>]) -> Result<(), LaunchError> {
        message::pack(self, parts, buffer, true)
    }

    fn copy_buffer(
        &self,
        dst: &mut GpuBuffer,
        src_exec: &Gpu,
        src: &GpuBuffer,
        bytes: usize,
    ) -> Result<(), LaunchError> {
        message::copy_buffer(self, dst, src_exec, src, bytes)
    }

    fn buffer_to_host(&self, buffer: &mut GpuBuffer, bytes: usize) -> Result<(), LaunchError> {
        message::stage(self, buffer, bytes, true)
    }

    fn buffer_from_host(&self, buffer: &mut GpuBuffer, bytes: usize) -> Result<(), LaunchError> {
        message::stage(self, buffer, bytes, false)
    }

    type Mark = message::GpuMark;

    fn reaches(&self, src_exec: &Self) -> Result<bool, LaunchError> {
        Ok(src_exec.home() == self.home() || enable_peer_access(self, src_exec)?)
    }

    fn mark(&self) -> Result<message::GpuMark, LaunchError> {
        message::mark(self)
    }

    fn after(&self, mark: &message::GpuMark) -> Result<(), LaunchError> {
        message::after(self, mark)
    }

    fn copy_boxes<const D: usize>(
        &self,
        into: &[BoxPart<'_, D>],
        src_exec: &Self,
        from: &[BoxPart<'_, D>],
    ) -> Result<(), LaunchError> {
        message::copy_boxes(self, into, src_exec, from)
    }

    fn copy_boxes_from<const D: usize>(
        &self,
        sources: &[(&Self, &[BoxPart<'_, D>], &[BoxPart<'_, D>])],
    ) -> Result<(), LaunchError> {
        message::copy_boxes_from(self, sources)
    }
}

impl Record for Gpu {
    type Recording = GpuGraph;

    fn record(&self, step: &mut dyn FnMut(&Self) -> Result<(), LaunchError>) -> Result<Option<GpuGraph>, LaunchError> {
        let stream = self.stream().clone();
        // Relaxed: kernels compiled and loaded during the step are fine (they are not stream work).
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .map_err(|e| self.fail("beginning to record a step", e))?;
        let issued = step(self);
        // Each kernel keeps the priority of the stream it was recorded from (the exchange's and
        // the slabs' high priority over the inner region), not the replaying stream's.
        let ended = stream.end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
        issued.map_err(|e| match e {
            LaunchError::Cuda(c) => LaunchError::Cuda(CudaError::NotRecordable { error: Box::new(c) }),
            other => other,
        })?;
        let graph = ended.map_err(|e| self.fail("finishing the recording of a step", e))?;
        Ok(graph.map(|graph| GpuGraph { graph }))
    }

    fn replay(&self, recording: &GpuGraph) -> Result<(), LaunchError> {
        recording.graph.launch().map_err(|e| LaunchError::Cuda(self.fail("replaying a recorded step", e)))
    }

    fn record_group(
        &self,
        others: &[Self],
        step: &mut dyn FnMut() -> Result<(), LaunchError>,
    ) -> Result<Option<GpuGraph>, LaunchError> {
        let others = other_streams(self, others);
        // Over several GPUs a recorded step measured slower than the same step issued launch by
        // launch where the host keeps up (2 GPUs: 4–7%): on only when asked for.
        if others.iter().any(|o| o.ordinal() != self.ordinal()) && std::env::var("STENCIL_RECORD").as_deref() != Ok("1")
        {
            return Ok(None);
        }
        let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        self.record(&mut |_| {
            // The other streams (other GPUs too) join the capture: their work in the step comes
            // after the recording's start and before its end, as graph nodes of their devices.
            let start = self.stream().record_event(no_timing).map_err(|e| self.fail("recording an event", e))?;
            for o in &others {
                o.stream().wait(&start).map_err(|e| o.fail("joining a recording", e))?;
            }
            let issued = step();
            // Joined back even when the step failed, so that the capture ends on every stream.
            for o in &others {
                let done = o.stream().record_event(no_timing).map_err(|e| o.fail("recording an event", e));
                let joined =
                    done.and_then(|done| self.stream().wait(&done).map_err(|e| self.fail("ending a recording", e)));
                if issued.is_ok() {
                    joined?;
                }
            }
            issued
        })
    }

    fn replay_group(&self, others: &[Self], recording: &GpuGraph) -> Result<(), LaunchError> {
        let others = other_streams(self, others);
        let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        for o in &others {
            let before = o.stream().record_event(no_timing).map_err(|e| o.fail("recording an event", e))?;
            self.stream().wait(&before).map_err(|e| self.fail("waiting before a replay", e))?;
        }
        self.replay(recording)?;
        let after = self.stream().record_event(no_timing).map_err(|e| self.fail("recording an event", e))?;
        for o in &others {
            o.stream().wait(&after).map_err(|e| o.fail("waiting for a replay", e))?;
        }
        Ok(())
    }
}

/// The handles of `others` on streams other than `gpu`'s, one per stream.
fn other_streams<'a>(gpu: &Gpu, others: &'a [Gpu]) -> Vec<&'a Gpu> {
    let mut seen = vec![gpu.cu_stream()];
    others
        .iter()
        .filter(|o| {
            let new = !seen.contains(&o.cu_stream());
            seen.push(o.cu_stream());
            new
        })
        .collect()
}

/// The lengths of `range` along the layout axes, the element offset of its first point, and the
/// kernel arguments of a (non-reducing) launch of `S`: `values`, then the origin and lengths.
pub(crate) fn kernel_args<'v, S: Stencil<D>, const D: usize>(
    shape: &Shape<D>,
    range: &Loop<D>,
    values: &'v [ArgValue<'_, D>],
) -> Result<([usize; 3], i64, Vec<KernelArg<'v>>), LaunchError> {
    let len = layout_lengths(shape, range);
    let origin = shape.offset(range.begin()) as i64;
    let mut args: Vec<KernelArg> = Vec::with_capacity(values.len() + 4);
    args.extend(values.iter().map(|v| scalar_or_field(v).expect("reductions take the reduction path")));
    args.push(KernelArg::I64(origin));
    for n in len {
        let n = i32::try_from(n).map_err(|_| CudaError::TooLarge {
            what: format!("stencil `{}`: the range's points along one axis", S::INFO.name),
            value: n,
        })?;
        args.push(KernelArg::I32(n));
    }
    Ok((len, origin, args))
}

/// The fields `ir` writes (see [`WrittenField`]); `infos` are the stencil's fields in the order
/// of the field arguments among `values`.
fn written_fields<const D: usize>(
    ir: &StencilIr,
    infos: &[FieldInfo],
    values: &[ArgValue<'_, D>],
) -> Vec<WrittenField> {
    let accesses = field_accesses(ir);
    let fields = values.iter().enumerate().filter_map(|(i, v)| match v {
        ArgValue::Field { shape, .. } => Some((i, shape.len())),
        _ => None,
    });
    fields
        .zip(infos)
        .filter_map(|((i, len), info)| {
            let f = accesses.iter().find(|f| f.name == info.name)?;
            f.written.then(|| (i, info.name, len * f.elem.size_bytes(), f.is_read()))
        })
        .collect()
}

/// `lock`, if it page-locks `host` (a host copy's memory) for `gpu`'s stream.
fn locked_here<'s, T: Element>(
    gpu: &Gpu,
    lock: Option<&'s dyn crate::executor::PageLocked>,
    host: &[T],
) -> Option<&'s HostRegistration> {
    let lock = lock?.as_any().downcast_ref::<HostRegistration>()?;
    lock.holds(gpu, host).then_some(lock)
}
