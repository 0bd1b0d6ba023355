use stencil_runtime::prelude::*;

// A generic helper takes its element type from the calling stencil's fields: here they are of
// two types, so it has none.
#[stencil_fn]
fn twice<T>(x: T) -> T {
    x + x
}

#[stencil]
fn mixed(idx: Idx3, a: &Field3<f32>, out: &mut Field3<f64>) {
    out[idx] = twice(a[idx] as f64);
}

fn main() {}
