//! Fields, ranges and executors for `#[stencil]` point-update functions.
//!
//! ```
//! use stencil_runtime::prelude::*;
//!
//! #[stencil]
//! fn smooth(idx: Idx1, w: f32, u: &Field1<f32>, out: &mut Field1<f32>) {
//!     out[idx] = (1.0 - 2.0 * w) * u[idx] + w * (u[idx.ix::<-1>()] + u[idx.ix::<1>()]);
//! }
//!
//! let shape = Shape1::new([100]).halo(1);
//! let u = Field1::from_fn(shape, |[i]| (i * i) as f32);
//! let mut out = Field1::zeros(shape);
//! Loop1D::interior(&shape).run(Smooth, (0.25, &u, &mut out))?;
//! assert_eq!(out.get([10]), Some(100.5));
//! # Ok::<(), stencil_runtime::LaunchError>(())
//! ```
// Per-axis loops index several arrays by axis; iterator zips would obscure that.
#![allow(clippy::needless_range_loop)]

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod cuda_source;
mod device_args;
pub mod field;
mod index;
mod ir_cache;
pub mod launch;
pub mod range;
pub mod regions;
mod stencil;

#[cfg(feature = "cuda")]
pub use cuda::{CudaError, Gpu, Kernel, KernelArg, LaunchDims};
pub use cuda_source::{cuda_kernel, CudaKernel, Strategy};
pub use device_args::{ArgValue, DeviceArg, DeviceField, DeviceField1, DeviceField2, DeviceField3};
pub use field::{Element, Field, Field1, Field2, Field3, FieldError, Order, Shape, Shape1, Shape2, Shape3};
pub use index::{Idx1, Idx2, Idx3};
pub use launch::LaunchError;
pub use range::{Loop, Loop1D, Loop2D, Loop3D};
pub use regions::{BoundaryWidths, RegionError, Regions, Side};
pub use stencil::{FieldInfo, Stencil, StencilInfo};
pub use stencil_codegen as codegen;
pub use stencil_macros::stencil;

/// Everything a stencil author needs: `use stencil_runtime::prelude::*;`.
pub mod prelude {
    pub use crate::{
        stencil, BoundaryWidths, Field, Field1, Field2, Field3, Idx1, Idx2, Idx3, LaunchError, Loop1D, Loop2D, Loop3D,
        Order, Shape, Shape1, Shape2, Shape3, Stencil,
    };
}

/// Items the generated code calls; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::cpu::{for_each_row, linear_offset, row, RowWriter};
    pub use crate::device_args::DeviceArg;
    pub use crate::launch::validate;
}
