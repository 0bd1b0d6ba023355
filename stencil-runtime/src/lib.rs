//! Fields, ranges and executors for `#[stencil]` point-update functions.
//!
//! # Quickstart
//!
//! One point update, written once, run on the host and (with the `cuda` feature and a GPU) on
//! a GPU, where it gives the same bits:
//!
//! ```
//! use stencil_runtime::prelude::*;
//!
//! #[stencil]
//! fn heat(idx: Idx3, k: f32, t: &Field3<f32>, t_new: &mut Field3<f32>) {
//!     let near = t[idx.ix::<1, 0, 0>()] + t[idx.ix::<-1, 0, 0>()] + t[idx.ix::<0, 1, 0>()]
//!         + t[idx.ix::<0, -1, 0>()] + t[idx.ix::<0, 0, 1>()] + t[idx.ix::<0, 0, -1>()];
//!     t_new[idx] = t[idx] + k * (near - 6.0 * t[idx]);
//! }
//!
//! /// `steps` steps of the heat equation wherever `exec` runs them (host or GPU).
//! fn run<E: Executor>(exec: &E, t0: &Field3<f32>, steps: usize) -> Result<Field3<f32>, Error> {
//!     let (mut t, mut t_new) = (exec.upload(t0)?, exec.upload(t0)?);
//!     let range = Loop3D::interior(t0.shape());
//!     for _ in 0..steps {
//!         exec.run(&range, Heat, (0.1, &t, &mut t_new))?;
//!         std::mem::swap(&mut t, &mut t_new);
//!     }
//!     exec.download(&t)
//! }
//!
//! let shape = Shape3::new([64, 64, 64]).halo(1); // halo cells stay 0: a cold wall
//! let t0 = Field3::from_fn(shape, |p| if p == [32, 32, 32] { 1.0 } else { 0.0 });
//! let on_host = run(&Host, &t0, 10)?;
//! assert!((on_host.to_vec().iter().sum::<f32>() - 1.0).abs() < 1e-4); // heat is conserved
//! #[cfg(feature = "cuda")]
//! if let Ok(gpu) = Gpu::new(0) {
//!     assert_eq!(run(&gpu, &t0, 10)?.to_vec(), on_host.to_vec());
//! }
//! # Ok::<(), Error>(())
//! ```
//!
//! In a 1D stencil, neighbours are `u[idx.ix::<-1>()]`; ranges need not be the interior:
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
//! # Ok::<(), stencil_runtime::Error>(())
//! ```
//!
//! # Helper functions and small arrays
//!
//! A stencil body may hold fixed-size arrays of scalars (`[f64; 5]`, at most 16 values), indexed
//! by compile-time integers (literals, the variable of a constant `for` loop, a `const N: usize`
//! of the body), and call `#[stencil_fn]` helpers: functions of scalars, arrays and tuples of
//! them, with the same body rules and no fields. Calls are inlined, on the CPU and in CUDA; a
//! helper also stays an ordinary Rust function.
//!
//! ```
//! use stencil_runtime::prelude::*;
//!
//! /// Minmod slope limiter.
//! #[stencil_fn]
//! fn minmod(a: f64, b: f64) -> f64 {
//!     if a * b <= 0.0 { 0.0 } else if a.abs() < b.abs() { a } else { b }
//! }
//!
//! /// Limited left and right states of two variables at the face between `q0` and `q1`.
//! #[stencil_fn]
//! fn muscl(qm: [f64; 2], q0: [f64; 2], q1: [f64; 2], q2: [f64; 2]) -> ([f64; 2], [f64; 2]) {
//!     let mut left = q0;
//!     let mut right = q1;
//!     for v in 0..2 {
//!         left[v] += 0.5 * minmod(q0[v] - qm[v], q1[v] - q0[v]);
//!         right[v] -= 0.5 * minmod(q1[v] - q0[v], q2[v] - q1[v]);
//!     }
//!     (left, right)
//! }
//!
//! #[stencil]
//! fn jump(idx: Idx1, h: &Field1<f64>, hu: &Field1<f64>, dh: &mut Field1<f64>, dhu: &mut Field1<f64>) {
//!     let q = [h[idx], hu[idx]];
//!     let qm = [h[idx.ix::<-1>()], hu[idx.ix::<-1>()]];
//!     let q1 = [h[idx.ix::<1>()], hu[idx.ix::<1>()]];
//!     let q2 = [h[idx.ix::<2>()], hu[idx.ix::<2>()]];
//!     let (left, right) = muscl(qm, q, q1, q2);
//!     dh[idx] = right[0] - left[0];
//!     dhu[idx] = right[1] - left[1];
//! }
//!
//! let shape = Shape1::new([16]).halo(2);
//! let h = Field1::from_fn(shape, |[i]| (i * i) as f64);
//! let hu = Field1::from_fn(shape, |[i]| i as f64);
//! let (mut dh, mut dhu) = (Field1::zeros(shape), Field1::zeros(shape));
//! Loop1D::interior(&shape).run(Jump, (&h, &hu, &mut dh, &mut dhu))?;
//! // Called from plain Rust, the helper computes the same.
//! let (l, r) = muscl([16.0, 4.0], [25.0, 5.0], [36.0, 6.0], [49.0, 7.0]);
//! assert_eq!(dh.get([5]), Some(r[0] - l[0]));
//! assert_eq!(dhu.get([5]), Some(r[1] - l[1]));
//! # Ok::<(), stencil_runtime::Error>(())
//! ```
//!
//! Helpers are found through `macro_rules!` twins the attribute emits next to them, so every
//! helper a stencil reaches (directly or through other helpers) must be in scope where the
//! stencil is (`use physics::*;`; a `pub` helper can come from another crate with the helpers it
//! calls, `pub` too: `use other_crate::physics::{flux, pressure};`), and a
//! call of a plain function is reported as ``cannot find macro `name` ``: mark it
//! `#[stencil_fn]`.
// Per-axis loops index several arrays by axis; iterator zips would obscure that.
#![allow(clippy::needless_range_loop)]

// The macro names this crate `::stencil_runtime` when it expands inside it (its tests and docs).
extern crate self as stencil_runtime;

// The layers, in the order data flows through them: the functor contract a `#[stencil]` fills
// in (`stencil`), fields and ranges, the executors and their CPU and GPU halves, the messages
// between subdomains and ranks (`comm`), the subdomains themselves (`domain`), and I/O.
mod comm;
pub mod cpu;
pub mod domain;
pub mod error;
pub mod executor;
pub mod field;
pub mod gpu;
pub mod io;
pub mod range;
pub mod regions;
pub mod revolve;
pub mod sparse;
pub mod stencil;

#[cfg(feature = "cuda")]
pub use gpu::cuda;
pub use gpu::source as cuda_source;
pub use gpu::{steps, tuning};
pub use stencil::{adjoint, launch, reduce};

#[cfg(feature = "cuda")]
pub use cuda::{CudaError, Gpu, Kernel, KernelArg, LaunchDims};
#[cfg(feature = "cuda")]
pub use cuda::{DeviceField, DeviceField1, DeviceField2, DeviceField3, DeviceHeld};
pub use cuda_source::{
    cuda_boxes_kernel, cuda_first_pass_kernels, cuda_kernel, cuda_point_pass_kernel, cuda_reduce_kernel,
    cuda_steps_kernel, CudaKernel, ReduceKernel, Strategy, TimeTiling,
};
pub use domain::{
    BoundaryFillError, CompCommBinder, Decomposition, DistField, Distributed, DistributionError, Domains, HaloExchange,
    HaloWidths, Halos, Neighbour, NodeRank, Overlap, PhaseTimes, PlacementError, Subdomain, Transport, TransportError,
    World,
};
pub use error::{Error, LaunchError};
pub use executor::{
    ErasedField, Executor, FieldStorage, HaloJob, Held, HeldStorage, Host, HostCopy, HostHeld, HostTiling, Messages,
    PartsHeld, Readback, Record, Recorded, Reduced, SideJob, Stencil, StrategyLoop,
};
pub use field::{
    Element, Field, Field1, Field2, Field3, FieldError, HaloError, HaloFill, Order, Shape, Shape1, Shape2, Shape3,
};
pub use range::{Loop, Loop1D, Loop2D, Loop3D, RangeError, SparseError};
pub use reduce::{Max, Min, ReduceElem, ReduceOp, Reducer, Sum};
pub use regions::{BoundaryWidths, RegionError, Regions, Side};
pub use sparse::{Samples, SparsePoints};
pub use stencil::args::ArgValue;
pub use stencil::index::{Idx1, Idx2, Idx3};
pub use stencil::{FieldInfo, StencilInfo};
pub use stencil_codegen as codegen;
pub use stencil_macros::{stencil, stencil_fn};

/// Everything a stencil author needs: `use stencil_runtime::prelude::*;`.
pub mod prelude {
    #[cfg(feature = "cuda")]
    pub use crate::Gpu;
    pub use crate::{
        stencil, stencil_fn, BoundaryWidths, Error, Executor, Field, Field1, Field2, Field3, HaloFill, Held, Host,
        Idx1, Idx2, Idx3, LaunchError, Loop1D, Loop2D, Loop3D, Max, Min, Order, Recorded, Shape, Shape1, Shape2,
        Shape3, Stencil, Sum,
    };
}

/// Items the generated code calls; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::cpu::{
        for_each_column, for_each_row, for_each_row_reducing, isa, linear_offset, row, BlockOutputs, BlockRows, Isa,
        Partials, PointElement, PointLayout, RowBlock, RowSlots, RowWriter, SweepOrder,
    };
    pub use crate::executor::FieldMap;
    pub use crate::stencil::args::{field_arg, held_arg, held_value, reduction_arg, ScalarArg};
    pub use crate::stencil::decode_ir;
    pub use crate::stencil::launch::validate;
    pub use stencil_codegen::ir::IR_FORMAT;
    pub use stencil_macros::__stencil_collect as stencil_collect;
}
