//! The arguments of a kernel launch, type-erased: what a functor's `erase_args` turns its typed
//! tuple into.

use crate::executor::held::{HeldStorage, HostHeld};
use crate::field::{Element, Field, HaloFill, Shape};
use crate::stencil::reduce::Reducer;

/// What a field of an executor tells the launcher: its shape and the address of its storage.
pub trait FieldStorage<T: Element, const D: usize> {
    /// The field's shape.
    fn shape(&self) -> &Shape<D>;
    /// The address of element 0 of the storage (a host or a device address).
    fn address(&self) -> u64;
    /// Which memory holds the storage: 0 for the host, else an identifier of the device
    /// context (a launch refuses fields of another executor).
    fn home(&self) -> usize;
    /// The boundary the field declared ([`Executor::declare_boundary`](crate::Executor::declare_boundary)),
    /// per axis the fill of both ends; `None` when it declared none.
    fn boundary(&self) -> Option<[Option<HaloFill>; D]> {
        None
    }
}

impl<T: Element, const D: usize> FieldStorage<T, D> for Field<T, D> {
    fn shape(&self) -> &Shape<D> {
        Field::shape(self)
    }
    fn address(&self) -> u64 {
        self.as_slice().as_ptr() as u64
    }
    fn home(&self) -> usize {
        0
    }
    fn boundary(&self) -> Option<[Option<HaloFill>; D]> {
        self.declared()
    }
}

/// One argument of a launch.
#[derive(Debug)]
pub enum ArgValue<'a, const D: usize> {
    /// An `f32` scalar.
    F32(f32),
    /// An `f64` scalar.
    F64(f64),
    /// An `i32` scalar.
    I32(i32),
    /// A `u32` scalar.
    U32(u32),
    /// A `bool` scalar.
    Bool(bool),
    /// A field: its shape and the address of its storage.
    Field {
        /// The field's shape.
        shape: &'a Shape<D>,
        /// Address of element 0 of the storage.
        ptr: u64,
        /// Where the storage is ([`FieldStorage::home`]).
        home: usize,
    },
    /// A held scalar: the address of its value, read by the launch when it runs.
    Held {
        /// Address of the value.
        ptr: u64,
        /// Where the value is ([`HeldStorage::home`]).
        home: usize,
    },
    /// A reduction parameter: the launch folds its result into it.
    Reduction(&'a mut dyn Reducer),
}

/// A scalar that can be passed in the position of a stencil's scalar parameter.
pub trait ScalarArg {
    /// The erased argument.
    fn scalar_arg<'a, const D: usize>(self) -> ArgValue<'a, D>;
}

macro_rules! scalar_arg {
    ($t:ty, $v:ident) => {
        impl ScalarArg for $t {
            fn scalar_arg<'a, const D: usize>(self) -> ArgValue<'a, D> {
                ArgValue::$v(self)
            }
        }
    };
}
scalar_arg!(f32, F32);
scalar_arg!(f64, F64);
scalar_arg!(i32, I32);
scalar_arg!(u32, U32);
scalar_arg!(bool, Bool);

/// The erased argument of a field of any executor.
pub fn field_arg<T: Element, const D: usize, F: FieldStorage<T, D>>(field: &F) -> ArgValue<'_, D> {
    ArgValue::Field { shape: field.shape(), ptr: field.address(), home: field.home() }
}

/// The erased argument of a held scalar of any executor.
pub fn held_arg<H: HeldStorage<T>, T: Element, const D: usize>(held: &H) -> ArgValue<'_, D> {
    ArgValue::Held { ptr: held.address(), home: held.home() }
}

/// The value of a host's held scalar, as a launch on the host reads it when it starts.
pub fn held_value<T: Element>(held: &HostHeld<T>) -> T {
    held.get()
}

/// The erased argument of a reduction parameter.
pub fn reduction_arg<const D: usize>(reduction: &mut dyn Reducer) -> ArgValue<'_, D> {
    ArgValue::Reduction(reduction)
}
