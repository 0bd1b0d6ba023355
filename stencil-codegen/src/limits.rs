//! The DSL's size limits, in one place: the lowering enforces them and the error messages quote
//! them.

/// Longest loop the lowering unrolls (a constant-trip-count `for`).
pub const MAX_UNROLL: i64 = 64;

/// Longest array a stencil or helper may hold (its values live in registers).
pub const MAX_ARRAY_LEN: usize = 16;

/// Most written fields one stencil may have (the CPU executor's tuples of row writers).
pub const MAX_OUTPUTS: usize = 16;
