//! The compiler's stages, listed once. A `#[stencil]` function goes through them at two times:
//!
//! | stage | in the macro (compile time) | in the runtime (before NVRTC) |
//! |---|---|---|
//! | lower | `frontend::lower`: `fn` → [`StencilIr`], serialised into the functor as `IR` | [`StencilIr::decode`] of that constant |
//! | passes | [`prepare`] for [`Target::HostNest`] and [`Target::Facts`] | [`prepare`] for [`Target::Cuda`] or [`Target::CudaDepot`] |
//! | analysis | [`Analysis::of`] the prepared IR (inside [`prepare`]) | the same |
//! | print | `printer::rust_nest::print_run_host` (the CPU loop nest, as tokens) | `printer::cuda::print_kernel` (CUDA C) |
//!
//! The adjoint and gradient passes (`#[stencil(adjoint(..))]`, `#[stencil(gradient(..))]`) run in
//! the macro before these stages: they make new stencils, which then take the same path.

use crate::analysis::Analysis;
use crate::ir::StencilIr;
use crate::passes::{inline_nested_point_fns, inline_point_fns};
use std::borrow::Cow;

/// What a stencil's IR is prepared for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The functor's facts (reach, flops, bytes) and the runtime's launch checks: every point
    /// function inlined.
    Facts,
    /// The CPU loop nest: point functions kept (each computed once per point of a block), with
    /// the ones they call inlined into them.
    HostNest,
    /// A CUDA kernel of every strategy but the depot, and the reduction kernels: every point
    /// function inlined.
    Cuda,
    /// The CUDA depot strategy: point functions kept (their values held on chip); its analysis is
    /// still the inlined IR's.
    CudaDepot,
}

/// A stencil's IR after the passes its target needs, and the analysis its printer uses.
pub struct Prepared<'a> {
    /// The IR after the passes (borrowed where none changed it).
    pub ir: Cow<'a, StencilIr>,
    /// Its analysis (for [`Target::CudaDepot`], the inlined IR's).
    pub analysis: Analysis,
}

/// Runs the passes `target` needs on `ir` (none where it has no point functions) and analyses
/// the result.
pub fn prepare(ir: &StencilIr, target: Target) -> Prepared<'_> {
    if ir.point_fns.is_empty() {
        return Prepared { analysis: Analysis::of(ir), ir: Cow::Borrowed(ir) };
    }
    match target {
        Target::Facts | Target::Cuda => {
            let flat = inline_point_fns(ir);
            Prepared { analysis: Analysis::of(&flat), ir: Cow::Owned(flat) }
        }
        Target::HostNest => {
            let nest = inline_nested_point_fns(ir);
            Prepared { analysis: Analysis::of(&nest), ir: Cow::Owned(nest) }
        }
        Target::CudaDepot => Prepared { analysis: Analysis::of(&inline_point_fns(ir)), ir: Cow::Borrowed(ir) },
    }
}
