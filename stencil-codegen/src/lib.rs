//! The stencil compiler: `syn::ItemFn` → [`ir::StencilIr`] → analyses → printers.
//!
//! - [`lower`] turns a `#[stencil]` function into the IR, rejecting with a spanned [`Error`]
//!   whatever cannot run as a parallel point update on a CPU or a GPU;
//! - [`analysis`] derives per-field extents, access modes, flops and minimal bytes per point;
//! - [`printer`] prints the IR: the Rust loop nest (tokens, at compile time) and CUDA C.
//!
//! The proc-macro crate `stencil-macros` is a thin shell over [`expand`].

// Per-axis loops index several arrays by axis; iterator zips would obscure that.
#![allow(clippy::needless_range_loop)]

pub mod analysis;
pub mod error;
pub mod expand;
pub mod ir;
pub mod lower;
pub mod printer;

pub use error::{Error, ErrorKind};
pub use expand::expand;
pub use ir::StencilIr;

impl StencilIr {
    /// Lowers a `#[stencil]` function given as source text (what the macro embeds so that the
    /// runtime can print CUDA for any strategy).
    pub fn from_source(source: &str) -> Result<StencilIr, Error> {
        let item: syn::ItemFn =
            syn::parse_str(source).map_err(|e| Error::new(e.span(), ErrorKind::Syntax { message: e.to_string() }))?;
        lower::lower(&item)
    }
}
