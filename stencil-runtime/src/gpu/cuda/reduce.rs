//! Launches of stencils that reduce: pass 1 over the range with one partial result per block,
//! pass 2 in one block, and the results copied into page-locked host memory: a launch waits for
//! them and folds them into the reduction parameters (`Executor::reduce_later` does not wait). The kernels are printed by `stencil_codegen::printer::cuda::reduce`.
//!
//! The partial results live in stream-ordered memory (`cuMemAllocAsync`, from the device's pool:
//! no allocation cost per launch after the first, no synchronisation), freed after the read.
//!
//! The grid is fixed by the range and the device (`bx`: the smallest power of two from 32 to
//! 256 whose chunk of `bx · points_per_thread` points covers a row; blocks: chunks of a row along
//! x, row groups along y, as many as the multiprocessors hold at once, at most eight each), so every launch of one range on one device model adds in the same order.

use super::compile::KERNEL_OPTIONS;
use super::context::Gpu;
use super::error::CudaError;
use super::kernel::ReducePrepared;
use super::launch::{scalar_or_field, KernelArg, LaunchDims};
use super::memory::read_pinned;
use crate::error::LaunchError;
use crate::executor::{Readback, Stencil};
use crate::field::Shape;
use crate::gpu::source::{geometry, layout_lengths, max_elem_bytes};
use crate::range::Loop;
use crate::stencil::args::ArgValue;
use cudarc::driver::result;
use cudarc::driver::sys::CUdevice_attribute;
use std::sync::{Arc, PoisonError};
use stencil_codegen::printer::cuda::{print_reduce_kernel, Geometry, REDUCE_THREADS};

/// The most blocks per multiprocessor of pass 1 (2048 threads: a full H100/H200
/// multiprocessor); fewer where its registers allow fewer at once, so the grid is one wave.
const BLOCKS_PER_SM: usize = 8;

/// Stream-ordered device memory, freed (in stream order) on drop.
struct Scratch<'g> {
    gpu: &'g Gpu,
    ptr: u64,
}

impl<'g> Scratch<'g> {
    fn new(gpu: &'g Gpu, bytes: usize) -> Result<Self, CudaError> {
        gpu.bind()?;
        // SAFETY: plain stream-ordered allocation; pass 1 writes every byte pass 2 reads.
        let ptr = unsafe { result::malloc_async(gpu.cu_stream(), bytes) }
            .map_err(|e| gpu.fail("allocating the partial results of a reduction", e))?;
        Ok(Scratch { gpu, ptr })
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated on this stream by `malloc_async`; freed once, after the work queued
        // before it (the kernels and the copy that use it). An error is kept by the context.
        let freed = unsafe { result::free_async(self.ptr, self.gpu.cu_stream()) };
        self.gpu.inner.ctx.record_err(freed);
    }
}

/// Runs the reducing stencil `S` over `range` (validated, not empty) with the erased `values`
/// and folds each reduction's result into its parameter; returns once the results are read.
pub(super) fn run<S: Stencil<D>, const D: usize>(
    gpu: &Gpu,
    range: &Loop<D>,
    shape: &Shape<D>,
    mut values: Vec<ArgValue<'_, D>>,
) -> Result<(), LaunchError> {
    let results = issue::<S, D>(gpu, range, shape, &values)?.wait()?;
    let mut results = results.into_iter().flatten();
    for v in &mut values {
        if let ArgValue::Reduction(reducer) = v {
            reducer.fold_f64(results.next().expect("one result per reduction"));
        }
    }
    Ok(())
}

/// Issues the two passes of the reducing stencil `S` over `range` (validated, not empty) with
/// the erased `values`, and the copy of the results to the host, without waiting: one vector of
/// each reduction's result, in parameter order.
pub(super) fn issue<S: Stencil<D>, const D: usize>(
    gpu: &Gpu,
    range: &Loop<D>,
    shape: &Shape<D>,
    values: &[ArgValue<'_, D>],
) -> Result<Readback<f64>, LaunchError> {
    let name = S::INFO.name;
    gpu.refuse_while_recording(&format!(
        "stencil `{name}` folds into a reduction, whose result a launch reads back to the host; a launch of it"
    ))?;
    let (scratch, results, count) = passes::<S, D>(gpu, range, shape, values)?;
    // SAFETY: `count` doubles at `results` inside the scratch memory, copied after pass 2 on
    // the stream; the scratch is freed in stream order after the copy (its drop below).
    let read = unsafe { read_pinned::<f64>(gpu, "a reduction's results", &[(results, count)], vec![count]) }?;
    drop(scratch);
    Ok(read)
}

/// Issues the two passes of the reducing stencil `S` as [`issue`] does, and copies each
/// reduction's result into the device address of `into` (one `f64` each, in parameter order)
/// on the stream: nothing for the host to wait for, so it may be recorded.
pub(super) fn issue_into<S: Stencil<D>, const D: usize>(
    gpu: &Gpu,
    range: &Loop<D>,
    shape: &Shape<D>,
    values: &[ArgValue<'_, D>],
    into: &[u64],
) -> Result<(), LaunchError> {
    let (scratch, results, count) = passes::<S, D>(gpu, range, shape, values)?;
    debug_assert_eq!(count, into.len(), "one held scalar per reduction (checked by the caller)");
    for (r, &dst) in into.iter().enumerate() {
        // SAFETY: the source is result `r` (one double) inside the scratch memory, written by
        // pass 2 before this copy on the stream; the destination is a live held scalar's `f64`
        // on this device (the caller checked its home); the scratch is freed after it.
        unsafe { cudarc::driver::sys::cuMemcpyDtoDAsync_v2(dst, results + 8 * r as u64, 8, gpu.cu_stream()) }
            .result()
            .map_err(|e| gpu.fail("copying a reduction's result into a held scalar", e))?;
    }
    drop(scratch);
    Ok(())
}

/// The two passes of [`issue`]: the scratch memory they use (to be freed after the results are
/// copied out of it), the address of the results (one double per reduction) and their count.
fn passes<'g, S: Stencil<D>, const D: usize>(
    gpu: &'g Gpu,
    range: &Loop<D>,
    shape: &Shape<D>,
    values: &[ArgValue<'_, D>],
) -> Result<(Scratch<'g>, u64, usize), LaunchError> {
    let name = S::INFO.name;
    let ir = S::ir();
    let geo = geometry(shape, range, max_elem_bytes(ir));
    let prepared = prepared::<S, D>(gpu, geo)?;
    let len = layout_lengths(shape, range);
    let too_large = |n: usize| CudaError::TooLarge {
        what: format!("stencil `{name}`: the range's points along one axis"),
        value: n,
    };
    let n: Vec<i32> = len.iter().map(|&n| i32::try_from(n).map_err(|_| too_large(n))).collect::<Result<_, _>>()?;
    if len[1] * len[2] > u32::MAX as usize {
        return Err(CudaError::TooLarge {
            what: format!("stencil `{name}`: the range's rows"),
            value: len[1] * len[2],
        }
        .into());
    }
    // The grid: bx threads per row, chunks of bx * per points, one wave of blocks.
    let threads = REDUCE_THREADS as usize;
    let per = prepared.points_per_thread;
    let bx = len[0].div_ceil(per).next_power_of_two().clamp(32, threads);
    let chunks = len[0].div_ceil(bx * per);
    let groups = (len[1] * len[2]).div_ceil(threads / bx);
    let sms = gpu
        .inner
        .ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| gpu.fail("reading the multiprocessor count", e))?;
    let target = (sms.max(1) as usize) * prepared.blocks_per_sm;
    let gx = chunks.min(target).max(1);
    let gy = groups.min((target / gx).max(1)).clamp(1, 65535);
    let blocks = gx * gy;
    let count = ir.reductions().count();
    // Scratch: each reduction's partials (8 bytes a block), then one double per result.
    let result_at = count * blocks * 8;
    let bytes = result_at + count * 8;
    let scratch = Scratch::new(gpu, bytes)?;
    let base = scratch.ptr;
    let partial = |r: usize| base + (r * blocks * 8) as u64;
    let mut args: Vec<KernelArg> = Vec::with_capacity(values.len() + 5);
    let mut r = 0;
    for v in values {
        args.push(scalar_or_field(v).unwrap_or_else(|| {
            r += 1;
            KernelArg::Ptr(partial(r - 1))
        }));
    }
    args.push(KernelArg::I64(shape.offset(range.begin()) as i64));
    args.extend(n.iter().map(|&n| KernelArg::I32(n)));
    args.push(KernelArg::I32(bx as i32));
    let dims = LaunchDims { grid: [gx as u32, gy as u32, 1], block: [REDUCE_THREADS, 1, 1], shared_bytes: 0 };
    // SAFETY: pass 1 was printed for this stencil and geometry: its parameters are the stencil's
    // (a reduction as a pointer to `blocks` partials of at most 8 bytes, inside the scratch
    // memory, which is held until the results are read) then origin, the lengths and bx, as
    // `args` holds; `validate` checked that the range plus the stencil's reach lies inside every
    // field, all of which live on this device.
    unsafe { gpu.launch(&prepared.pass1, dims, &args) }?;
    let mut final_args: Vec<KernelArg> = (0..count).map(|r| KernelArg::Ptr(partial(r))).collect();
    final_args.push(KernelArg::Ptr(base + result_at as u64));
    final_args.push(KernelArg::I32(blocks as i32));
    let one = LaunchDims { grid: [1, 1, 1], block: [REDUCE_THREADS, 1, 1], shared_bytes: 0 };
    // SAFETY: pass 2 takes each reduction's partials (`blocks` of them, written by pass 1), the
    // result slots (one double each) and `blocks`, all inside the scratch memory.
    unsafe { gpu.launch(&prepared.pass2, one, &final_args) }?;
    Ok((scratch, base + result_at as u64, count))
}

/// The loaded kernels of `S` for `geo`, printed and compiled on first use.
fn prepared<S: Stencil<D>, const D: usize>(gpu: &Gpu, geo: Geometry) -> Result<Arc<ReducePrepared>, LaunchError> {
    let key = (S::IR.as_ptr() as usize, geo);
    let table = &gpu.inner.reductions;
    if let Some(p) = table.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return Ok(p.clone());
    }
    let printed = print_reduce_kernel(S::ir(), &geo);
    let (pass1, _) = gpu.kernel_with_stats(&printed.kernel.source, &printed.kernel.entry, KERNEL_OPTIONS)?;
    let (pass2, _) = gpu.kernel_with_stats(&printed.kernel.source, &printed.final_entry, KERNEL_OPTIONS)?;
    // As many blocks as the multiprocessors hold at once (one wave), at most 8 per multiprocessor.
    let resident = pass1
        .function()
        .occupancy_max_active_blocks_per_multiprocessor(REDUCE_THREADS, 0, None)
        .map_err(|e| gpu.fail("reading the occupancy of a reduction kernel", e))?;
    let prepared = Arc::new(ReducePrepared {
        pass1,
        pass2,
        points_per_thread: printed.points_per_thread as usize,
        blocks_per_sm: (resident as usize).clamp(1, BLOCKS_PER_SM),
    });
    table.lock().unwrap_or_else(PoisonError::into_inner).insert(key, prepared.clone());
    Ok(prepared)
}
