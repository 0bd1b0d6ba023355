//! The `#[stencil]` attribute. A thin shell: all logic lives in `stencil-codegen`, which turns
//! the function into an IR, checks it, and prints the functor and its CPU loop nest.
//! Use it through `stencil_runtime::prelude`, which re-exports it.

use proc_macro::TokenStream;

/// Turns a point-update function into a functor runnable over a `Loop1D/2D/3D` range.
///
/// The first parameter is the point index (`idx: Idx3`), then scalars (`f32`, `f64`, `i32`,
/// `u32`, `bool`) and fields (`&Field3<T>` read, `&mut Field3<T>` written). Neighbours are read as
/// `f[idx.ix::<1, 0, -1>()]` with integer-literal offsets; written fields only at `f[idx]`.
#[proc_macro_attribute]
pub fn stencil(attr: TokenStream, item: TokenStream) -> TokenStream {
    match stencil_codegen::expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_syn().to_compile_error().into(),
    }
}
