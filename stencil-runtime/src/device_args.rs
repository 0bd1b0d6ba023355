//! The arguments of a kernel launch, type-erased: what a functor's `erase_args` turns its typed
//! tuple into.

use crate::executor::FieldStorage;
use crate::field::{Element, Shape};

/// One argument of a launch.
#[derive(Clone, Copy, Debug, PartialEq)]
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
