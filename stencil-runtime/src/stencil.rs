//! The trait every `#[stencil]` functor implements, and the metadata the launcher checks.

use crate::launch::LaunchError;
use crate::range::Loop;

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
/// Not meant to be implemented by hand: the macro checks the body for races and prints the loop
/// nest that `run_host` runs.
pub trait Stencil<const D: usize>: Copy {
    /// The arguments after the point index for host fields, as a tuple in parameter order.
    type HostArgs<'a>;
    /// The same arguments with device fields (`&DeviceField3<T>` for `&Field3<T>`).
    type DeviceArgs<'a>;
    /// Name and field accesses.
    const INFO: StencilInfo;
    /// The function's source, from which `stencil_codegen::StencilIr::from_source` rebuilds the
    /// IR (to print CUDA for any strategy at run time).
    const SOURCE: &'static str;

    /// Runs the point update over `range` on the CPU (rayon), after checking the launch.
    fn run_host(range: &Loop<D>, args: Self::HostArgs<'_>) -> Result<(), LaunchError>;

    /// Erases device arguments for the CUDA executor, in parameter order.
    fn device_args(args: Self::DeviceArgs<'_>) -> Vec<crate::device_args::ArgValue<'_, D>>;

    /// The stencil's IR, lowered once from [`Stencil::SOURCE`] and cached.
    fn ir() -> &'static stencil_codegen::StencilIr {
        crate::ir_cache::ir_of(Self::INFO.name, Self::SOURCE)
    }
}

impl<const D: usize> Loop<D> {
    /// Runs `stencil` over this range on host fields: `range.run(Diffusion3d, (c, &f, &mut g))`.
    ///
    /// Returns an error (and touches nothing) if the range and the stencil's reach do not fit in
    /// every field, or if the fields differ in shape.
    pub fn run<S: Stencil<D>>(&self, stencil: S, args: S::HostArgs<'_>) -> Result<(), LaunchError> {
        let _ = stencil;
        S::run_host(self, args)
    }
}
