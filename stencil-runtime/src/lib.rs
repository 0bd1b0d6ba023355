//! Fields, ranges and executors for `#[stencil]` point-update functions.
pub mod field;
pub mod range;

pub use field::{Element, Field, Field1, Field2, Field3, FieldError, Order, Shape, Shape1, Shape2, Shape3};
pub use range::{Loop, Loop1D, Loop2D, Loop3D};
