//! The `#[stencil]` and `#[stencil_fn]` attributes. A thin shell: all logic lives in
//! `stencil-codegen`, which turns the function into an IR, checks it, and prints the functor and
//! its CPU loop nest. Use them through `stencil_runtime::prelude`, which re-exports them.

use proc_macro::TokenStream;

/// Turns a point-update function into a functor runnable over a `Loop1D/2D/3D` range.
///
/// The first parameter is the point index (`idx: Idx3`), then scalars (`f32`, `f64`, `i32`,
/// `u32`, `bool`) and fields (`&Field3<T>` read, `&mut Field3<T>` written). Neighbours are read as
/// `f[idx.ix::<1, 0, -1>()]` with integer-literal offsets; written fields only at `f[idx]`. A
/// reduction parameter (`m: &mut Max<f64>`, `Sum`, `Min`; `f32` or `f64`) is folded with
/// `m.fold(x);` and combined over the range by the launch.
/// The body may hold small arrays (`[f64; 5]`, indexed by compile-time integers) and call
/// `#[stencil_fn]` helpers by their bare name.
#[proc_macro_attribute]
pub fn stencil(attr: TokenStream, item: TokenStream) -> TokenStream {
    match stencil_codegen::expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_syn().to_compile_error().into(),
    }
}

/// Marks a helper function that `#[stencil]` bodies (and other helpers) may call.
///
/// Parameters and the result are scalars, fixed-size arrays of scalars (`[f64; 5]`) or tuples of
/// those; the body follows the rules of a stencil body, without fields. Calls are inlined into
/// the stencil, for the CPU and for CUDA; the function also stays an ordinary Rust function.
/// The helper must be in scope (`use`) where the stencil is, and it is usable only inside the
/// crate that defines it. See `stencil_runtime`'s crate documentation for an example.
#[proc_macro_attribute]
pub fn stencil_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    stencil_codegen::expand_stencil_fn(attr.into(), item.into()).into()
}

/// One step of collecting the helpers a stencil calls (the callback of every helper's
/// `macro_rules!` twin). Not a stable API.
#[doc(hidden)]
#[proc_macro]
pub fn __stencil_collect(input: TokenStream) -> TokenStream {
    match stencil_codegen::collect::step(input.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_syn().to_compile_error().into(),
    }
}
