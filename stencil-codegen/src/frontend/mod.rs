//! The `syn` frontend: from a `#[stencil]` function's tokens to the IR and to the code the macro
//! emits. The modules depend on each other one way only, in this order:
//!
//! - [`error`]: every way a stencil is rejected, with what to write instead;
//! - [`lower`]: `syn::ItemFn` → [`crate::ir::StencilIr`] (checks, unrolling, helper inlining);
//! - [`expand`]: what `#[stencil]` and `#[stencil_fn]` expand to, from the IR and the printers;
//! - [`adjoint`]: the companion adjoint stencil of `#[stencil(adjoint(..))]`, for [`expand`];
//! - [`collect`]: the driver of the helper-collection walk (the `stencil_collect!` callback),
//!   which ends in [`expand::expand_stencil`].
//!
//! Each module uses only those above it (and the crate's IR, analyses, printers, naming and
//! limits); the crate root re-exports them under their old paths (`stencil_codegen::lower`, ...).

pub mod adjoint;
pub mod collect;
pub mod error;
pub mod expand;
pub mod lower;
