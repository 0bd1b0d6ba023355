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
