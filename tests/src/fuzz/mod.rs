//! Differential fuzzing of the whole pipeline: random valid stencils ([`gen`]) are compiled
//! through `#[stencil]` (by the build script, into `tests/tests/fuzz.rs`) and lowered from their
//! text at run time; the generated loop nest must match a plain interpreter of the IR ([`interp`]),
//! which must match the generator's own evaluation of its tree.

pub mod gen;
pub mod interp;
