//! The GPU backend: its host half, compiled on every machine (the CUDA C a stencil runs as, the
//! autotuning settings and records, the split of a run into multi-step sweeps, the on-disk kernel
//! cache), and, with the `cuda` feature, the CUDA executor itself ([`cuda`]).

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod disk_cache;
pub mod source;
pub mod steps;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub mod tuning;
