//! The point index types named in stencil signatures. The macro reads them to learn the stencil's
//! dimensionality; the body's `idx.ix::<di, dj, dk>()` is resolved at compile time, so these types
//! carry no data at run time.

/// The point index of a 1D stencil: `f[idx]`, `f[idx.ix::<-1>()]`.
#[derive(Clone, Copy, Debug)]
pub struct Idx1;
/// The point index of a 2D stencil: `f[idx.ix::<1, 0>()]`.
#[derive(Clone, Copy, Debug)]
pub struct Idx2;
/// The point index of a 3D stencil: `f[idx.ix::<1, 0, -2>()]`.
#[derive(Clone, Copy, Debug)]
pub struct Idx3;
