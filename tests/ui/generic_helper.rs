use stencil_runtime::prelude::*;

// A helper is written for one element type.
#[stencil_fn]
fn twice<T>(x: T) -> T {
    x + x
}

fn main() {}
