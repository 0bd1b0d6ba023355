//! Reductions over a range: the parameter types [`Sum`], [`Min`] and [`Max`] of a stencil that
//! folds values (`cfl.fold(rate)`), and the fixed combination order that makes a launch's result
//! the same bits on every run.
//!
//! ```
//! use stencil_runtime::prelude::*;
//!
//! #[stencil]
//! fn stats(idx: Idx1, u: &Field1<f64>, total: &mut Sum<f64>, peak: &mut Max<f64>) {
//!     total.fold(u[idx]);
//!     peak.fold(u[idx].abs());
//! }
//!
//! let shape = Shape1::new([1000]);
//! let u = Field1::from_fn(shape, |[i]| i as f64 - 500.0);
//! let (mut total, mut peak) = (Sum::new(), Max::new());
//! Loop1D::interior(&shape).run(Stats, (&u, &mut total, &mut peak))?;
//! assert_eq!((total.get(), peak.get()), (-500.0, 500.0));
//! # Ok::<(), stencil_runtime::LaunchError>(())
//! ```
//!
//! A launch folds its range's result into the value the parameter holds (a new one holds the
//! identity: 0, +∞ or −∞), so launches over several regions or subdomains combine by passing the
//! same value; [`Sum::get`] reads it. `Min` and `Max` propagate NaN: one NaN value makes the
//! result NaN, so a broken state is not hidden behind a finite time step.
//!
//! **Order.** A sum's bits depend on the order of its additions; both executors fix theirs, so a
//! launch gives the same bits on every run:
//! - the host sums each row of the range (a run along the contiguous axis; in 1D, chunks of
//!   16384 points) from its first point to its last, then the row results pairwise (a balanced
//!   binary tree over the rows in storage order). Neither depends on the thread count or tiling.
//! - a GPU gives each thread a fixed set of points (rows of the range dealt to the blocks in a
//!   grid-stride loop; along a row each thread takes runs of 1, 2 or 4 consecutive points, `bx`
//!   runs apart), each thread folds its points in increasing order, a warp combines its 32
//!   values by a shuffle tree, a block its warps in order, and a second, one-block kernel
//!   combines the block results the same way. The grid is sized by the range, the kernel's
//!   occupancy and the device's multiprocessor count, so the bits are those of the device model.
//!
//! The two orders differ, so a sum on the host and on a GPU agree to rounding (about
//! `n · ε · Σ|x|` at worst for `n` values, far less in practice), not bit for bit; `Min` and `Max`
//! are the same on both (up to the sign of a zero result and the payload of a NaN).

use crate::field::Element;
use std::fmt;
pub use stencil_codegen::ir::ReduceOp;
use stencil_codegen::ir::ScalarType;

/// A value type a reduction folds: `f32` or `f64`.
pub trait ReduceElem: Element + PartialOrd + private::Sealed {
    /// The DSL's name of the type.
    const TYPE: ScalarType;
    /// `+∞`.
    const INFINITY: Self;
    /// `0`.
    const ZERO: Self;
    /// The value widened to `f64` (exact).
    fn to_f64(self) -> f64;
    /// The value of an `f64` that holds one of this type (exact for those).
    fn from_f64(v: f64) -> Self;
    /// `self + other`.
    fn add(self, other: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// The bits, zero-extended to 64.
    fn to_bits64(self) -> u64;
    /// The value of bits written by [`ReduceElem::to_bits64`].
    fn from_bits64(bits: u64) -> Self;
}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

macro_rules! reduce_elem {
    ($t:ty, $ty:ident, $bits:ty) => {
        impl ReduceElem for $t {
            const TYPE: ScalarType = ScalarType::$ty;
            const INFINITY: Self = <$t>::INFINITY;
            const ZERO: Self = 0.0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn add(self, other: Self) -> Self {
                self + other
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_bits64(self) -> u64 {
                self.to_bits() as u64
            }
            fn from_bits64(bits: u64) -> Self {
                <$t>::from_bits(bits as $bits)
            }
        }
    };
}
reduce_elem!(f32, F32, u32);
reduce_elem!(f64, F64, u64);

/// The identity of `op` (`0`, `+∞`, `−∞`).
#[inline(always)]
pub fn identity<T: ReduceElem>(op: ReduceOp) -> T {
    match op {
        ReduceOp::Sum => T::ZERO,
        ReduceOp::Min => T::INFINITY,
        ReduceOp::Max => T::from_f64(f64::NEG_INFINITY),
    }
}

/// `op` applied to an accumulated value `acc` and a new value `v`, as the printed code does:
/// `acc + v`; for min and max `v` replaces `acc` when smaller (larger) or NaN, so NaN sticks.
#[inline(always)]
pub fn combine<T: ReduceElem>(op: ReduceOp, acc: T, v: T) -> T {
    match op {
        ReduceOp::Sum => acc.add(v),
        ReduceOp::Min => {
            if v < acc || v.is_nan() {
                v
            } else {
                acc
            }
        }
        ReduceOp::Max => {
            if v > acc || v.is_nan() {
                v
            } else {
                acc
            }
        }
    }
}

/// A reducer of `op` over `elem` values (`f32` or `f64`; others as `f64`) holding the identity.
pub(crate) fn reducer(op: ReduceOp, elem: ScalarType) -> Box<dyn Reducer> {
    match (op, elem == ScalarType::F32) {
        (ReduceOp::Sum, false) => Box::new(Sum::<f64>::new()),
        (ReduceOp::Min, false) => Box::new(Min::<f64>::new()),
        (ReduceOp::Max, false) => Box::new(Max::<f64>::new()),
        (ReduceOp::Sum, true) => Box::new(Sum::<f32>::new()),
        (ReduceOp::Min, true) => Box::new(Min::<f32>::new()),
        (ReduceOp::Max, true) => Box::new(Max::<f32>::new()),
    }
}

/// Combines `values` pairwise in a balanced binary tree (the left half, then the right half, in
/// order); the identity for none. The host's order across rows.
pub fn tree<T: ReduceElem>(op: ReduceOp, values: &[T]) -> T {
    match values.len() {
        0 => identity(op),
        1 => values[0],
        n => {
            let (a, b) = values.split_at(n / 2);
            combine(op, tree(op, a), tree(op, b))
        }
    }
}

/// A reduction parameter as a launch sees it: its operator and type, and where the launch's
/// result goes. Implemented by [`Sum`], [`Min`] and [`Max`].
pub trait Reducer: fmt::Debug + Send {
    /// The operator.
    fn op(&self) -> ReduceOp;
    /// The value type.
    fn elem(&self) -> ScalarType;
    /// Folds a launch's result, given as `f64` (exact for an `f32` result), into the value.
    fn fold_f64(&mut self, result: f64);
    /// The value so far, as `f64` (exact).
    fn value_f64(&self) -> f64;
    /// Back to the identity.
    fn reset_value(&mut self);
}

macro_rules! reduction {
    ($name:ident, $op:ident, $what:literal, $identity:literal) => {
        #[doc = concat!("A stencil parameter that computes the ", $what, " of the values folded into it at every point of the range (`m: &mut ", stringify!($name), "<f64>`, `m.fold(x);` in the body; see the [module docs](crate::reduce)). A new one holds the identity, ", $identity, ".")]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<T: ReduceElem> {
            value: T,
        }

        impl<T: ReduceElem> $name<T> {
            /// The operator.
            pub const OP: ReduceOp = ReduceOp::$op;

            /// The identity: what a launch over no point leaves.
            pub fn new() -> Self {
                $name { value: identity(Self::OP) }
            }

            /// The value so far: the launches' results folded together.
            pub fn get(&self) -> T {
                self.value
            }

            /// Folds one value in, as `fold` in a stencil body does at a point.
            pub fn fold(&mut self, v: T) {
                self.value = combine(Self::OP, self.value, v);
            }

            /// Back to the identity.
            pub fn reset(&mut self) {
                *self = Self::new();
            }
        }

        impl<T: ReduceElem> Default for $name<T> {
            fn default() -> Self {
                Self::new()
            }
        }

        impl<T: ReduceElem> Reducer for $name<T> {
            fn op(&self) -> ReduceOp {
                Self::OP
            }
            fn elem(&self) -> ScalarType {
                T::TYPE
            }
            fn fold_f64(&mut self, result: f64) {
                self.fold(T::from_f64(result));
            }
            fn value_f64(&self) -> f64 {
                self.value.to_f64()
            }
            fn reset_value(&mut self) {
                self.reset();
            }
        }
    };
}
reduction!(Sum, Sum, "sum", "0");
reduction!(Min, Min, "minimum", "+∞");
reduction!(Max, Max, "maximum", "−∞");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_combine_and_nan_sticks() {
        let mut m = Max::<f32>::new();
        assert_eq!(m.get(), f32::NEG_INFINITY);
        m.fold(2.0);
        m.fold(f32::NAN);
        m.fold(5.0);
        assert!(m.get().is_nan());
        let mut s = Min::<f64>::new();
        s.fold(3.0);
        s.fold(-1.0);
        assert_eq!(s.get(), -1.0);
        assert_eq!(tree(ReduceOp::Sum, &[1.0f64, 2.0, 3.0, 4.0, 5.0]), 15.0);
        assert_eq!(tree::<f64>(ReduceOp::Min, &[]), f64::INFINITY);
    }
}
