//! Printers: pure functions from the IR to code.
//!
//! - [`rust_nest`]: the CPU loop nest, as tokens compiled into the user's crate;
//! - `cuda`: CUDA C for one [`crate::ir::StencilIr`] and a blocking strategy (one file per strategy).

pub mod cuda;
#[cfg(feature = "frontend")]
pub mod rust_nest;
