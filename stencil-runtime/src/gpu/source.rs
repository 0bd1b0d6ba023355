//! The CUDA C a stencil runs as, for a strategy and a field shape: available without the `cuda`
//! feature, so users can read what runs (and CI can compile-check it) on machines with no GPU.

use crate::executor::Stencil;
use crate::field::Shape;
use crate::range::Loop;
pub use stencil_codegen::printer::cuda::{CudaKernel, Geometry, ReduceKernel, Strategy, StrategyError, TimeTiling};

/// The layout facts a kernel for fields of `shape` is specialised for. `lanes` (points per thread
/// along the contiguous axis with one 16-byte access per field) is the largest of 4, 2 for which
/// the range's first point and every row are aligned, else 1; `max_elem_bytes` is the largest
/// element size among the stencil's fields.
pub fn geometry<const D: usize>(shape: &Shape<D>, range: &Loop<D>, max_elem_bytes: usize) -> Geometry {
    let s = shape.strides();
    let strides: [i64; 3] = std::array::from_fn(|a| if a < D { s[a] as i64 } else { 0 });
    let axes = shape.element_order().axes::<D>();
    let layout: [usize; 3] = std::array::from_fn(|l| if l < D { axes[l] } else { l });
    let origin = shape.offset(range.begin());
    let widest = (16 / max_elem_bytes.max(1)).max(1);
    let lanes = [widest, 2, 1]
        .into_iter()
        .filter(|&l| l <= widest)
        .find(|&l| origin.is_multiple_of(l) && (1..D).all(|r| s[axes[r]].is_multiple_of(l)))
        .unwrap_or(1);
    Geometry { strides, layout, lanes: lanes as u32 }
}

/// The kernel that `range.with_strategy(strategy).run_on(...)` compiles for stencil `S` over
/// fields of `shape`. Print `kernel.source` to read it.
pub fn cuda_kernel<S: Stencil<D>, const D: usize>(
    strategy: Strategy,
    shape: &Shape<D>,
    range: &Loop<D>,
) -> Result<CudaKernel, StrategyError> {
    let ir = S::source_ir();
    stencil_codegen::printer::cuda::print_kernel(ir, strategy, &geometry(shape, range, max_elem_bytes(ir)))
}

/// The first kernels of a two-pass strategy ([`Strategy::TwoPass`], [`Strategy::TwoPassStream`]:
/// `cuda_kernel` prints the second) for stencil `S` over `range` of fields of `shape`, one per box
/// of offsets at which the body reads point function values: each writes its values into
/// scratch fields over `range` grown by its box. An error where `S` reads no point function at a
/// neighbour.
pub fn cuda_first_pass_kernels<S: Stencil<D>, const D: usize>(
    shape: &Shape<D>,
    range: &Loop<D>,
) -> Result<Vec<CudaKernel>, StrategyError> {
    let ir = S::source_ir();
    let split = stencil_codegen::passes::materialise(ir).map_err(StrategyError::NoTwoPass)?;
    (split.first.iter().enumerate())
        .map(|(pass, first)| {
            let grown = first_pass_range(shape, range, first.lo, first.hi).unwrap_or(*range);
            stencil_codegen::printer::cuda::print_first_pass(ir, pass, &geometry(shape, &grown, max_elem_bytes(ir)))
        })
        .collect()
}

/// The point pass of a two-pass strategy for stencil `S` over `range` of fields of `shape`, where
/// `S` has one: over `range`, it stores the parts of the body's sums that need values at the
/// point only and writes the values there (the first pass then covers only the rest of the grown
/// range). An error where `S` has none.
pub fn cuda_point_pass_kernel<S: Stencil<D>, const D: usize>(
    shape: &Shape<D>,
    range: &Loop<D>,
) -> Result<CudaKernel, StrategyError> {
    let ir = S::source_ir();
    stencil_codegen::printer::cuda::print_point_pass(ir, &geometry(shape, range, max_elem_bytes(ir)))
}

/// The kernel that runs stencil `S` over several ranges of fields of `shape` as one launch (how
/// a GPU runs a part's boundary slabs: [`Executor::run_regions`](crate::Executor::run_regions)).
pub fn cuda_boxes_kernel<S: Stencil<D>, const D: usize>(shape: &Shape<D>) -> Result<CudaKernel, StrategyError> {
    let ir = S::source_ir();
    let whole = Loop::whole(shape);
    stencil_codegen::printer::cuda::print_boxes_kernel(ir, &geometry(shape, &whole, max_elem_bytes(ir)))
}

/// `range` grown by the offsets `lo` (≤ 0) and `hi` (≥ 0) per axis: where the first pass of a
/// two-pass launch runs; `None` where that leaves the fields.
pub(crate) fn first_pass_range<const D: usize>(
    shape: &Shape<D>,
    range: &Loop<D>,
    lo: [i32; 3],
    hi: [i32; 3],
) -> Option<Loop<D>> {
    let (begin, end) = (range.begin(), range.end());
    let mut b = [0usize; D];
    let mut e = [0usize; D];
    for a in 0..D {
        b[a] = usize::try_from(begin[a] as i64 + i64::from(lo[a])).ok()?;
        e[a] = usize::try_from(end[a] as i64 + i64::from(hi[a])).ok()?;
    }
    Loop::from_bounds(shape.extent(), b, e).ok()
}

/// The kernel that `Gpu::run_steps_with(range, .., Some(tiling), ..)` compiles for sweeps of
/// `tiling.steps` steps of stencil `S`, whose field parameter `input` is the pair's input, over
/// fields of `shape` (an error names a parameter `input` that is not one of `S`'s).
pub fn cuda_steps_kernel<S: Stencil<D>, const D: usize>(
    tiling: TimeTiling,
    input: &str,
    shape: &Shape<D>,
    range: &Loop<D>,
) -> Result<CudaKernel, StrategyError> {
    let ir = S::ir();
    let param = ir.params.iter().position(|p| p.name == input).ok_or_else(|| StrategyError::NotSteppable {
        stencil: ir.name.clone(),
        reason: format!("it has no parameter `{input}`"),
    })?;
    stencil_codegen::printer::cuda::print_steps_kernel(ir, tiling, param, &geometry(shape, range, max_elem_bytes(ir)))
}

/// The kernels a GPU launch of the reducing stencil `S` over fields of `shape` runs (pass 1 and
/// the final pass, in one source); `None` if `S` does not reduce. Print `kernel.source` to read it.
pub fn cuda_reduce_kernel<S: Stencil<D>, const D: usize>(shape: &Shape<D>, range: &Loop<D>) -> Option<ReduceKernel> {
    let ir = S::ir();
    ir.reduces()
        .then(|| stencil_codegen::printer::cuda::print_reduce_kernel(ir, &geometry(shape, range, max_elem_bytes(ir))))
}

/// The largest element size among a stencil's fields (4 if it has none).
pub(crate) fn max_elem_bytes(ir: &stencil_codegen::StencilIr) -> usize {
    ir.field_ids().filter_map(|id| ir.field(id)).map(|f| f.elem.size_bytes()).max().unwrap_or(4)
}

/// Range lengths along the layout axes (contiguous first), 1 for a phantom axis.
pub fn layout_lengths<const D: usize>(shape: &Shape<D>, range: &Loop<D>) -> [usize; 3] {
    let axes = shape.element_order().axes::<D>();
    let len = range.len_per_axis();
    std::array::from_fn(|l| if l < D { len[axes[l]] } else { 1 })
}
