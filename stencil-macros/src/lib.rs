//! The `#[stencil]` and `#[stencil_fn]` attributes. A thin shell: all logic lives in
//! `stencil-codegen`, which turns the function into an IR, checks it, and prints the functor and
//! its CPU loop nest. Use them through `stencil_runtime::prelude`, which re-exports them.

use proc_macro::TokenStream;
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{format_ident, quote};

/// The path the generated code names the runtime by: the name the calling crate's `Cargo.toml`
/// gives the `stencil-runtime` dependency (renamed or not), else `::stencil_runtime` (also inside
/// the runtime itself, which declares `extern crate self as stencil_runtime`).
fn runtime() -> proc_macro2::TokenStream {
    match crate_name("stencil-runtime") {
        Ok(FoundCrate::Name(name)) => {
            let name = format_ident!("{}", name);
            quote!(::#name)
        }
        Ok(FoundCrate::Itself) | Err(_) => quote!(::stencil_runtime),
    }
}

/// Turns a point-update function into a functor runnable over a `Loop1D/2D/3D` range.
///
/// The first parameter is the point index (`idx: Idx3`), then scalars (`f32`, `f64`, `i32`,
/// `u32`, `bool`) and fields (`&Field3<T>` read, `&mut Field3<T>` written). Neighbours are read as
/// `f[idx.ix::<1, 0, -1>()]` or `f[idx.ix(r, 0, 0)]` with compile-time integer offsets (literals,
/// constants, the variable of a constant `for` loop); written fields only at `f[idx]`. A
/// reduction parameter (`m: &mut Max<f64>`, `Sum`, `Min`; `f32` or `f64`) is folded with
/// `m.fold(x);` and combined over the range by the launch.
/// The body may hold small arrays (`[f64; 5]`, indexed by compile-time integers) and call
/// `#[stencil_fn]` helpers by their bare name.
///
/// A parameter may be an array of scalars (`w: [f64; 9]`) or of fields (`q: [&Field3<f64>; 5]`,
/// `qn: [&mut Field3<f64>; 5]`), indexed by compile-time integers (`w[r]`, `q[v][idx]`).
///
/// A stencil may have one type parameter, its element type (`fn heat<T>(idx: Idx3, c: T,
/// f: &Field3<T>, out: &mut Field3<T>)`): it is compiled for `f32` and `f64` into one functor
/// type `Heat<T>`, run as `Heat::<f64>::new()`.
///
/// A point function, `let flux = |p: Idx3| expr;`, defines values at every point from the
/// stencil's fields and scalars (not its locals); `flux(idx)` and `flux(idx.ix::<-1, 0, 0>())`
/// are its values here and one point left (its body with every read shifted). The CPU nest
/// computes each once per point of a block and reuses it for every call.
///
/// `#[stencil(sweep = forward)]` (or `backward`) makes a column sweep: each column (the points
/// that share every coordinate but the last) is updated level by level, in order, so a written
/// field may also be read at levels already passed (`x[idx.ix(0, 0, -1)]` going forward);
/// `idx.level()` is the level's place in the sweep (0 first) and `idx.levels()` their number;
/// `#[carry] let mut s = 0.0;` at the top of the body declares a local set once per column and
/// kept from one level to the next. On a GPU a sweep runs one thread per column.
///
/// `#[stencil(adjoint(u, v))]` also emits the adjoint of the stencil with respect to the read
/// fields `u` and `v` (its written values must be linear in them): a functor named after the
/// stencil's with `Adjoint` appended (`WaveAdjoint`), in gather form, whose arguments are the
/// forward's in the same places with `u_bar: &mut` (accumulated into) for `u`, `out_bar: &` for
/// a written `out`, and a last `range_mask` (`stencil_runtime::adjoint::range_mask`). A term that
/// is not linear in a named field is a compile error naming it.
///
/// `#[stencil(adjoint_step(u, u_prev))]` also emits one reverse time step of a scheme whose levels
/// are `u` and `u_prev` (newest first) and which writes one field `u_next`: `WaveAdjointStep`,
/// whose arguments are the forward's in the same places with `u_bar: &mut` (written, not
/// accumulated) for `u`, `u_next_bar_2: &` (the cotangent from two steps later) for `u_prev`,
/// `u_next_bar: &` for `u_next`, and `range_mask`: the bits of the accumulating adjoint run over
/// a zeroed field, in one launch.
///
/// `#[stencil(scaled_adjoint_step(u, u_prev))]` also emits the same reverse step in scaled
/// cotangents `μ = λ / ρ`, for a stencil whose taps at neighbours share one field-dependent factor
/// (a wave's `1 / m / (1 + d)`): `WaveScaledAdjointStep`, a plain stencil that costs what the
/// forward step costs, with `adjoint_step`'s arguments without `range_mask` (`μ` must be zero
/// outside the forward range), and `WaveCotangentScale`, which writes `ρ` into a field from the
/// forward's scalars and fixed fields. Taps at neighbours with different factors are a compile
/// error naming two of them. `#[stencil(scaled_gradient(c))]` emits `WaveScaledGradient`, the
/// gradient reading `μ`, with `cotangent_scale` (the `ρ` field) before `range_mask`.
///
/// `#[stencil(gradient(c))]` also emits the transposed derivative of the update with respect to
/// the read field `c` (the imaging condition): `WaveGradient`, whose arguments are the forward's
/// in the same places with `out_bar: &` for a written `out`, then `c_bar: &mut` (accumulated
/// into: `c_bar += out_bar · ∂out/∂c`) and `range_mask`. The update may be nonlinear in `c`; a
/// function without a derivative rule applied to a term in `c` is a compile error naming it.
#[proc_macro_attribute]
pub fn stencil(attr: TokenStream, item: TokenStream) -> TokenStream {
    match stencil_codegen::expand(attr.into(), item.into(), runtime()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_syn().to_compile_error().into(),
    }
}

/// Marks a helper function that `#[stencil]` bodies (and other helpers) may call.
///
/// Parameters and the result are scalars, fixed-size arrays of scalars (`[f64; 5]`) or tuples of
/// those; the body follows the rules of a stencil body, without fields. Calls are inlined into
/// the stencil, for the CPU and for CUDA; the function also stays an ordinary Rust function.
/// The helper must be in scope (`use`) where the stencil is, with every helper it calls; a `pub`
/// helper whose callees are `pub` too can be used from another crate
/// (`use other_crate::physics::{flux, pressure};`). See
/// `stencil_runtime`'s crate documentation for an example.
///
/// Both attributes name the runtime by the name the crate's `Cargo.toml` gives the
/// `stencil-runtime` dependency, so a renamed dependency works. A crate that reaches the runtime
/// only through another crate's re-export says where: `#[stencil(crate = other::stencil_runtime)]`.
#[proc_macro_attribute]
pub fn stencil_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    stencil_codegen::expand_stencil_fn(attr.into(), item.into(), runtime()).into()
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
