use stencil_runtime::prelude::*;

// A stencil is generic over one element type at most.
#[stencil]
fn mix<T, U>(idx: Idx1, a: &Field1<T>, b: &Field1<U>, out: &mut Field1<T>) {
    out[idx] = a[idx] + b[idx] as T;
}

fn main() {}
