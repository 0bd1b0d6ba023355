//! Launches under a two-pass strategy ([`Strategy::TwoPass`], [`Strategy::TwoPassStream`]): the
//! first kernel writes the values a stencil's body reads at neighbours into scratch fields over
//! the range grown by their offsets, the second runs the body reading them back
//! (`stencil_codegen::passes::materialise`). Where the stencil has a point pass, it runs over the
//! range first (the parts of the sums at the point, and the values there), and the first kernel
//! covers only the rest of the grown range, as up to `2 D` slabs. The scratch fields have the launch's field shape;
//! they are allocated on first use per (stream, size) and kept by the device for later launches
//! (and for recorded steps, which hold their addresses), freed with the device handle's last clone.

use super::context::{Gpu, PassReach, TwoPassInfo};
use super::error::CudaError;
use super::kernel::{KernelChoice, LaunchKey};
use super::launch::KernelArg;
use super::memory::DeviceAlloc;
use super::tune::{FirstPass, LaunchPlan, Part};
use crate::error::LaunchError;
use crate::field::Shape;
use crate::gpu::source::{first_pass_range, geometry, layout_lengths, max_elem_bytes};
use crate::range::Loop;
use std::sync::{Arc, PoisonError};
use stencil_codegen::printer::cuda::Strategy;
use stencil_codegen::StencilIr;

impl Gpu {
    /// The split's facts for the stencil whose serialised IR is `ir_text` (`ir` its IR); `None`
    /// when it cannot be split (no point function read at a neighbour).
    fn two_pass_info(&self, ir_text: &'static str, ir: &StencilIr) -> Option<Arc<TwoPassInfo>> {
        let key = ir_text.as_ptr() as usize;
        let mut cache = self.inner.two_pass.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .entry(key)
            .or_insert_with(|| {
                let split = stencil_codegen::passes::materialise(ir).ok()?;
                let n = ir.params.len();
                let params = &split.first[0].ir;
                let elem_bytes = (n..params.params.len())
                    .map(|p| params.field(p).expect("a scratch field").elem.size_bytes())
                    .collect();
                let passes = (split.first.iter())
                    .map(|f| PassReach { lo: f.lo, hi: f.hi, reads_lo: f.reads_lo, reads_hi: f.reads_hi })
                    .collect();
                Some(Arc::new(TwoPassInfo { passes, elem_bytes, point: split.point.is_some() }))
            })
            .clone()
    }

    /// The first pass of a launch of the stencil (`ir_text`, `ir`) over `range` of fields of
    /// `shape`; `None` when the stencil cannot be split or the grown range leaves the fields
    /// (a two-pass strategy then reports that it cannot run).
    pub(crate) fn first_pass<const D: usize>(
        &self,
        ir_text: &'static str,
        ir: &StencilIr,
        shape: &Shape<D>,
        range: &Loop<D>,
    ) -> Option<FirstPass> {
        if ir.point_fns.is_empty() || ir.sweep.is_some() || ir.reduces() {
            return None;
        }
        let info = self.two_pass_info(ir_text, ir)?;
        let mut parts = Vec::new();
        for (pass, reach) in info.passes.iter().enumerate() {
            // Where the pass reads the fields must lie inside them (not only where it writes).
            first_pass_range(shape, range, reach.reads_lo, reach.reads_hi)?;
            let grown = first_pass_range(shape, range, reach.lo, reach.hi)?;
            let boxes = if info.point { shell(&grown, range) } else { vec![grown] };
            for b in boxes.iter().filter(|b| b.points() > 0) {
                let len = layout_lengths(shape, b);
                if len.iter().any(|&n| i32::try_from(n).is_err()) {
                    return None;
                }
                let geometry = geometry(shape, b, max_elem_bytes(ir));
                parts.push((pass, Part { len, origin: shape.offset(b.begin()) as i64, geometry }));
            }
        }
        Some(FirstPass {
            parts,
            point: info.point,
            scratch_bytes: info.elem_bytes.iter().map(|b| b * shape.len()).collect(),
        })
    }

    /// The scratch fields of `bytes` (one address each) for this handle's stream, allocated on
    /// first use.
    fn scratch(&self, bytes: &[usize]) -> Result<Vec<u64>, CudaError> {
        let stream = self.cu_stream() as usize;
        let mut out = Vec::with_capacity(bytes.len());
        let mut pool = self.inner.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        for (i, &b) in bytes.iter().enumerate() {
            let nth = bytes[..i].iter().filter(|&&x| x == b).count();
            let list = pool.entry((stream, b)).or_default();
            while list.len() <= nth {
                let alloc = DeviceAlloc::new(self, b, || format!("a scratch field of a two-pass launch ({b} bytes)"))?;
                list.push(alloc.into_raw());
            }
            out.push(list[nth]);
        }
        Ok(out)
    }

    /// One launch of `plan` under `strategy` with `args` (the plan's arguments, or scratch copies
    /// of them while tuning): one kernel, or the two of a two-pass strategy.
    pub(crate) fn launch_plan(
        &self,
        plan: &LaunchPlan<'_>,
        strategy: Strategy,
        args: &[KernelArg<'_>],
    ) -> Result<(), LaunchError> {
        if !strategy.is_two_pass() {
            let prepared = self.prepared(plan.ir, plan.name, plan.key(strategy))?;
            return Ok(self.launch_prepared(&prepared, plan.len, plan.origin, args)?);
        }
        let Some(first) = (plan.first_pass)() else {
            return Err(CudaError::UnsupportedStrategy {
                stencil: plan.name.to_string(),
                reason: format!(
                    "strategy {strategy}: the stencil reads no point function at a neighbour, or the range grown by \
                     their offsets (plus the reach of the values there) leaves the fields: shrink the range or \
                     widen the halo"
                ),
            }
            .into());
        };
        let stencil = plan.ir_text.as_ptr() as usize;
        let second_kernel = self.prepared(plan.ir, plan.name, plan.key(strategy))?;
        let scratch = self.scratch(&first.scratch_bytes)?;
        // The stencil's own arguments, then the scratch fields, then the range (origin, lengths).
        let own = &args[..args.len() - 4];
        let with = |origin: i64, len: [usize; 3]| -> Vec<KernelArg<'_>> {
            let mut a: Vec<KernelArg> = own.to_vec();
            a.extend(scratch.iter().map(|&p| KernelArg::Ptr(p)));
            a.push(KernelArg::I64(origin));
            a.extend(len.map(|n| KernelArg::I32(n as i32)));
            a
        };
        if first.point {
            let key = LaunchKey { stencil, kernel: KernelChoice::PointPass, geometry: plan.geometry };
            let point = self.prepared(plan.ir, plan.name, key)?;
            self.launch_prepared(&point, plan.len, plan.origin, &with(plan.origin, plan.len))?;
        }
        for (pass, part) in &first.parts {
            let key = LaunchKey { stencil, kernel: KernelChoice::FirstPass(*pass), geometry: part.geometry };
            let kernel = self.prepared(plan.ir, plan.name, key)?;
            self.launch_prepared(&kernel, part.len, part.origin, &with(part.origin, part.len))?;
        }
        Ok(self.launch_prepared(&second_kernel, plan.len, plan.origin, &with(plan.origin, plan.len))?)
    }
}

/// `grown` without `inner` (which it contains), as up to `2 D` disjoint boxes: along each axis
/// in turn, the slabs below and above `inner`, spanning `inner` along the earlier axes and
/// `grown` along the later ones.
fn shell<const D: usize>(grown: &Loop<D>, inner: &Loop<D>) -> Vec<Loop<D>> {
    let (gb, ge, ib, ie) = (grown.begin(), grown.end(), inner.begin(), inner.end());
    let mut out = Vec::with_capacity(2 * D);
    for a in 0..D {
        let span = |lo_a: usize, hi_a: usize| {
            let begin: [usize; D] = std::array::from_fn(|x| match x.cmp(&a) {
                std::cmp::Ordering::Less => ib[x],
                std::cmp::Ordering::Equal => lo_a,
                std::cmp::Ordering::Greater => gb[x],
            });
            let end: [usize; D] = std::array::from_fn(|x| match x.cmp(&a) {
                std::cmp::Ordering::Less => ie[x] as usize,
                std::cmp::Ordering::Equal => hi_a,
                std::cmp::Ordering::Greater => ge[x] as usize,
            });
            Loop::from_bounds(grown.extent(), begin, end).expect("inside the grown range")
        };
        out.push(span(gb[a], ib[a]));
        out.push(span(ie[a] as usize, ge[a] as usize));
    }
    out
}
