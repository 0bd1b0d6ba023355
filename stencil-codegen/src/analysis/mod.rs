//! Analyses over the IR: what the launcher checks and what benchmarks count.

mod access;
mod cost;

pub use access::{field_accesses, FieldAccess};
pub use cost::{flops_per_point, min_bytes_per_point};
