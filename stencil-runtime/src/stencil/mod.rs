//! The functor contract that `#[stencil]` fills in: what the launcher checks about a stencil (its
//! name and field accesses, as the macro computed them: [`StencilInfo`]) and the decoding of its
//! embedded IR; the point index types, the type-erased arguments, the launch checks, the
//! reduction parameters and the adjoints' range mask. The [`Stencil`](crate::Stencil) trait
//! itself lives with [`Executor`](crate::Executor), which it refers to (and which refers to it).

pub mod adjoint;
pub(crate) mod args;
pub(crate) mod index;
pub mod launch;
pub mod reduce;

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

/// Decodes a stencil's embedded IR (what the generated `Stencil::ir` calls once). The macro's
/// compile-time format check makes a failure here a corrupted binary, not a user error.
#[doc(hidden)]
pub fn decode_ir(name: &str, text: &str) -> StencilIr {
    StencilIr::decode(text).unwrap_or_else(|e| panic!("stencil `{name}`: its embedded IR does not decode: {e}"))
}
