//! The stencil compiler: `syn::ItemFn` → [`ir::StencilIr`] → analyses → printers.
//!
//! - `frontend` (behind the feature `frontend`; re-exported as `lower`, `expand`, `collect`,
//!   `error`): `lower` turns a `#[stencil]` function into the IR, rejecting with a spanned
//!   `Error` whatever cannot run as a parallel point update on a CPU or a GPU; `expand` and
//!   `collect` make the macro's output from it;
//! - [`ir`]: the IR and its versioned serialised form;
//! - [`analysis`] derives, once per stencil ([`analysis::Analysis`]), per-field extents, access
//!   modes, flops and minimal bytes per point;
//! - [`printer`] prints the IR: the Rust loop nest (tokens, at compile time) and CUDA C;
//! - [`pipeline`]: the stages above, listed once, and what each target (CPU nest, CUDA
//!   kernels, the functor's facts) runs of them;
//! - [`naming`]: every name the printers invent and the rule that keeps user names clear of
//!   them; [`limits`]: the DSL's size limits.
//!
//! Data flows one way: frontend → IR → analysis → printers. The proc-macro crate
//! `stencil-macros` is a thin shell over `expand`. Everything that needs
//! `syn` (the lowering, the macro expansion, the Rust loop-nest printer) is behind the default
//! feature `frontend`; without it the crate holds the IR, its serialised form
//! ([`ir::StencilIr::decode`]), the analyses and the CUDA printer, which is what the runtime
//! uses.

// Per-axis loops index several arrays by axis; iterator zips would obscure that.
#![allow(clippy::needless_range_loop)]

pub mod analysis;
#[cfg(feature = "frontend")]
pub mod frontend;
pub mod ir;
pub mod limits;
pub mod naming;
pub mod passes;
pub mod pipeline;
pub mod printer;

#[cfg(feature = "frontend")]
pub use frontend::error::{Error, ErrorKind};
#[cfg(feature = "frontend")]
pub use frontend::expand::{expand, expand_stencil_fn};
#[cfg(feature = "frontend")]
pub use frontend::{collect, error, expand, lower};
pub use ir::StencilIr;

/// The version of the crates that print and read the IR, which the macro's compile-time check
/// names when the macro and runtime crates disagree.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(feature = "frontend")]
impl StencilIr {
    /// Lowers a `#[stencil]` function given as source text: the stencil's `fn` first (with its
    /// `#[stencil(..)]` attribute, if it has arguments such as `sweep = forward`), then the
    /// `#[stencil_fn]` helpers it calls, directly or through other helpers.
    pub fn from_source(source: &str) -> Result<StencilIr, Error> {
        let file: syn::File =
            syn::parse_str(source).map_err(|e| Error::new(e.span(), ErrorKind::Syntax { message: e.to_string() }))?;
        let mut fns = file.items.into_iter().map(|item| match item {
            syn::Item::Fn(f) => Ok(f),
            other => Err(Error::spanned(&other, ErrorKind::Syntax { message: "expected a function".into() })),
        });
        let mut stencil = fns.next().unwrap_or_else(|| {
            Err(Error::new(proc_macro2::Span::call_site(), ErrorKind::Syntax { message: "expected a function".into() }))
        })?;
        if let Some(at) = stencil.attrs.iter().position(|a| a.path().is_ident("stencil")) {
            let attr = stencil.attrs.remove(at);
            let args = match attr.meta {
                syn::Meta::List(list) => list.tokens,
                _ => proc_macro2::TokenStream::new(),
            };
            frontend::expand::apply_attribute(args, &mut stencil)?;
        }
        let helpers = fns.collect::<Result<Vec<_>, _>>()?;
        frontend::lower::lower_with_helpers(&stencil, &helpers)
    }
}
