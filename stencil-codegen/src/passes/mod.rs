//! Passes that rewrite the IR into a simpler IR of the same meaning, one per file.
//!
//! - [`inline_point_fns`]: replaces every value of a point function by the function's body,
//!   shifted to where it is evaluated (what the CUDA printer and the serialised form see);
//!   [`inline_nested_point_fns`] does it inside the point functions only (what the CPU nest
//!   computes them from).
//! - [`adjoint()`]: a new stencil rather than a rewrite: the adjoint, in gather form, of a stencil
//!   linear in some of its fields (`#[stencil(adjoint(u))]`).
//! - [`adjoint_step()`]: the adjoint of one time step of a multi-level scheme as one stencil that
//!   writes the newest level's cotangent from the later ones (`#[stencil(adjoint_step(u, u_prev))]`).
//! - [`scaled_adjoint_step()`]: the same step carrying cotangents scaled by their taps' common
//!   point part, a plain stencil as fast as the forward (`#[stencil(scaled_adjoint_step(u, u_prev))]`),
//!   its scale, and [`scaled_gradient()`], the gradient reading them (`#[stencil(scaled_gradient(m))]`).
//! - [`gradient()`]: a new stencil too: the transposed derivative of a stencil's update with respect
//!   to parameter fields, in gather form (`#[stencil(gradient(c))]`).
//! - [`materialise()`]: a stencil with point functions split in two: a pass that writes the
//!   values its body reads at neighbours into fields, and the body reading them back (the GPU's
//!   two-pass strategies).
//! - [`contract()`]: a product added in the same expression fused into one `mul_add`, the same
//!   fused operations on every backend (`#[stencil(fma)]`).
//! - [`portable_math()`]: `exp`, `ln`, `powf` and their kin computed by the stencil's own
//!   arithmetic, so that every backend gives the same bits (`#[stencil(portable_math)]`).

pub mod adjoint;
pub mod adjoint_step;
pub mod contract;
pub mod gradient;
mod inline_point_fns;
pub mod materialise;
pub mod portable_math;
pub mod scaled_adjoint_step;
mod symbolic;

pub use adjoint::adjoint;
pub use adjoint_step::adjoint_step;
pub use contract::contract;
pub use gradient::gradient;
pub use inline_point_fns::{inline_nested_point_fns, inline_point_fns};
pub use materialise::materialise;
pub use portable_math::portable_math;
pub use scaled_adjoint_step::{scaled_adjoint_step, scaled_gradient};
