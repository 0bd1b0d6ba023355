//! The trait every `#[stencil]` functor implements, and the metadata the launcher checks.

use crate::device_args::ArgValue;
use crate::executor::{Executor, Host};
use crate::launch::LaunchError;
use crate::range::Loop;
use stencil_codegen::StencilIr;

/// How a stencil accesses one field: what a launch checks against the range and the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    /// The parameter name.
    pub name: &'static str,
    /// Smallest offset read per axis `(i, j, k)` (0 if never read).
    pub lo: [i32; 3],
    /// Largest offset read per axis (0 if never read).
    pub hi: [i32; 3],
    /// Declared `&mut` (written, read only at offset 0).
    pub writable: bool,
}

/// A stencil's name and field accesses, as the macro computed them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StencilInfo {
    /// The function's name.
    pub name: &'static str,
    /// Field parameters in order.
    pub fields: &'static [FieldInfo],
}

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
    /// The IR in its serialised form ([`StencilIr::decode`]).
    const IR: &'static str;

    /// The stencil's IR, decoded from [`Stencil::IR`] on first use and kept.
    fn ir() -> &'static StencilIr;

    /// Runs the point update over `range` on the CPU (rayon), after checking the launch.
    fn run_host(range: &Loop<D>, args: Self::Args<'_, Host>) -> Result<(), LaunchError>;

    /// Erases the arguments for a kernel launch, in parameter order.
    fn erase_args<E: Executor>(args: Self::Args<'_, E>) -> Vec<ArgValue<'_, D>>;
}

/// Decodes a stencil's embedded IR (what the generated `Stencil::ir` calls once). The macro's
/// compile-time format check makes a failure here a corrupted binary, not a user error.
#[doc(hidden)]
pub fn decode_ir(name: &str, text: &str) -> StencilIr {
    StencilIr::decode(text).unwrap_or_else(|e| panic!("stencil `{name}`: its embedded IR does not decode: {e}"))
}
