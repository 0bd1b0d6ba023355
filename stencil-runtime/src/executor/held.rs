//! Held scalars: one value in an executor's memory (device memory on a GPU), which stencils read
//! through its address when a launch runs and reductions write without the host
//! ([`Executor::reduce_into`](crate::Executor::reduce_into)). A recorded step
//! ([`Recorded`](crate::Recorded)) reads what the scalar holds at each replay, not the value it
//! had when it was recorded: a time step sized on the device, from the state it advances, is
//! used there without the host waiting for it.
//!
//! ```
//! use stencil_runtime::prelude::*;
//! use stencil_runtime::Executor;
//!
//! #[stencil]
//! fn scale(idx: Idx1, by: Held<f64>, u: &Field1<f64>, out: &mut Field1<f64>) {
//!     out[idx] = by * u[idx];
//! }
//!
//! #[stencil]
//! fn largest(idx: Idx1, u: &Field1<f64>, m: &mut Max<f64>) {
//!     m.fold(u[idx]);
//! }
//!
//! let exec = Host;
//! let shape = Shape1::new([4]);
//! let u = exec.upload(&Field1::from_fn(shape, |[i]| i as f64))?;
//! let mut out = exec.alloc(shape)?;
//! let by = exec.held(0.0)?;
//! let all = Loop1D::interior(&shape);
//! // `by` takes u's largest value on the executor; the host reads nothing.
//! exec.reduce_into(&all, Largest, None, (&u, &mut Max::new()), &[&by])?;
//! exec.run(&all, Scale, (&by, &u, &mut out))?;
//! assert_eq!(exec.download(&out)?.get([3]), Some(9.0));
//! assert_eq!(exec.read_held(&by)?, 3.0);
//! # Ok::<(), LaunchError>(())
//! ```

use crate::field::Element;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// The type of a held scalar parameter in a `#[stencil]` signature (`dt: Held<f64>`; `f32`,
/// `f64`, `i32` or `u32`): the body reads it as it reads a scalar passed by value, and a launch
/// takes an executor's held scalar there ([`Executor::held`](crate::Executor::held)). Only
/// names the parameter's kind; values live in an executor's `HeldScalar<T>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held<T>(PhantomData<T>);

/// What a held scalar tells a launch: where its value lives.
pub trait HeldStorage<T: Element>: Send + Sync + 'static {
    /// The address of the value (a host or a device address).
    fn address(&self) -> u64;
    /// Which memory holds it: 0 for the host, else the device context's identifier (as
    /// [`FieldStorage::home`](crate::FieldStorage::home)).
    fn home(&self) -> usize;
}

/// A held scalar on the host ([`Host`](crate::Host)'s `HeldScalar<T>`): a launch reads it when it
/// starts, a reduction writes it when it ends.
#[derive(Debug, Default)]
pub struct HostHeld<T: Element> {
    /// The value's little-endian bytes, in the low bytes.
    bits: AtomicU64,
    _elem: PhantomData<T>,
}

impl<T: Element> HostHeld<T> {
    /// A held scalar holding `value`.
    pub fn new(value: T) -> Self {
        let held = HostHeld { bits: AtomicU64::new(0), _elem: PhantomData };
        held.set(value);
        held
    }

    /// The value held.
    pub fn get(&self) -> T {
        let bytes = self.bits.load(Ordering::Acquire).to_le_bytes();
        T::get_le(&bytes[..std::mem::size_of::<T>()])
    }

    /// Holds `value` from now on.
    pub fn set(&self, value: T) {
        let mut bytes = Vec::with_capacity(8);
        value.put_le(&mut bytes);
        bytes.resize(8, 0);
        self.bits.store(u64::from_le_bytes(bytes.try_into().expect("eight bytes")), Ordering::Release);
    }
}

impl<T: Element> HeldStorage<T> for HostHeld<T> {
    fn address(&self) -> u64 {
        &self.bits as *const AtomicU64 as u64
    }
    fn home(&self) -> usize {
        0
    }
}

/// A distributed executor's held scalar: one per subdomain of this rank (each in its part's
/// memory), all holding the same value; and one more per part for its piece of a reduction.
#[derive(Debug)]
pub struct PartsHeld<H> {
    pub(crate) home: usize,
    pub(crate) parts: Vec<H>,
    pub(crate) pieces: Vec<H>,
}

impl<H> PartsHeld<H> {
    /// The held scalar of part `i`.
    pub(crate) fn part(&self, i: usize) -> &H {
        &self.parts[i]
    }
}

impl<T: Element, H: HeldStorage<T>> HeldStorage<T> for PartsHeld<H> {
    fn address(&self) -> u64 {
        self as *const Self as u64
    }
    fn home(&self) -> usize {
        self.home
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_held_scalar_keeps_the_bits_of_every_element_type() {
        for v in [0.1f64, -0.0, f64::MAX, f64::NAN] {
            assert_eq!(HostHeld::new(v).get().to_bits(), v.to_bits());
        }
        for v in [0.1f32, -0.0, f32::MIN_POSITIVE] {
            assert_eq!(HostHeld::new(v).get().to_bits(), v.to_bits());
        }
        assert_eq!(HostHeld::new(-7i32).get(), -7);
        assert_eq!(HostHeld::new(u32::MAX).get(), u32::MAX);
        let h = HostHeld::new(1.0f64);
        h.set(2.5);
        assert_eq!(h.get(), 2.5);
    }
}
