//! Launches under a two-pass strategy ([`Strategy::TwoPass`], [`Strategy::TwoPassStream`]): the
//! first kernel writes the values a stencil's body reads at neighbours into scratch fields over
//! the range grown by their offsets, the second runs the body reading them back
//! (`stencil_codegen::passes::materialise`). The scratch fields have the launch's field shape;
//! they are allocated on first use per (stream, size) and kept by the device for later launches
//! (and for recorded steps, which hold their addresses), freed with the device handle's last clone.

use super::context::Gpu;
use super::error::CudaError;
use super::kernel::{KernelChoice, LaunchKey};
use super::launch::KernelArg;
use super::memory::DeviceAlloc;
use super::tune::LaunchPlan;
use crate::error::LaunchError;
use crate::field::Shape;
use crate::gpu::source::{first_pass_range, geometry, layout_lengths, max_elem_bytes};
use crate::range::Loop;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use stencil_codegen::printer::cuda::{Geometry, Strategy};
use stencil_codegen::StencilIr;

/// What a launch needs of a stencil's split: the reach of the written-out values and the
/// element size of each scratch field. Cached per stencil.
pub(crate) struct TwoPassInfo {
    lo: [i32; 3],
    hi: [i32; 3],
    elem_bytes: Vec<usize>,
}

/// The first pass of one launch: its range (lengths along the layout axes, first element) and
/// geometry, and the bytes of each scratch field.
pub(crate) struct FirstPass {
    pub(crate) len: [usize; 3],
    pub(crate) origin: i64,
    pub(crate) geometry: Geometry,
    pub(crate) scratch_bytes: Vec<usize>,
}

/// Scratch fields by (stream, bytes): device addresses, freed when the device is dropped.
pub(crate) type Scratch = HashMap<(usize, usize), Vec<u64>>;

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
                let elem_bytes = (n..split.first.params.len())
                    .map(|p| split.first.field(p).expect("a scratch field").elem.size_bytes())
                    .collect();
                Some(Arc::new(TwoPassInfo { lo: split.lo, hi: split.hi, elem_bytes }))
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
        let grown = first_pass_range(shape, range, info.lo, info.hi)?;
        let len = layout_lengths(shape, &grown);
        if len.iter().any(|&n| i32::try_from(n).is_err()) {
            return None;
        }
        Some(FirstPass {
            len,
            origin: shape.offset(grown.begin()) as i64,
            geometry: geometry(shape, &grown, max_elem_bytes(ir)),
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
        let Some(first) = &plan.first_pass else {
            return Err(CudaError::UnsupportedStrategy {
                stencil: plan.name.to_string(),
                reason: format!(
                    "strategy {strategy}: the stencil reads no point function at a neighbour, or the range grown by \
                     their offsets leaves the fields"
                ),
            }
            .into());
        };
        let key = LaunchKey {
            stencil: plan.ir_text.as_ptr() as usize,
            kernel: KernelChoice::FirstPass,
            geometry: first.geometry,
        };
        let first_kernel = self.prepared(plan.ir, plan.name, key)?;
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
        self.launch_prepared(&first_kernel, first.len, first.origin, &with(first.origin, first.len))?;
        Ok(self.launch_prepared(&second_kernel, plan.len, plan.origin, &with(plan.origin, plan.len))?)
    }
}
