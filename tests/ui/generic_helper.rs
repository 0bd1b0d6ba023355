use stencil_runtime::prelude::*;

// A helper may be generic over one type, its element type; not over two.
#[stencil_fn]
fn mix<T, U>(x: T, y: U) -> T {
    x + y
}

fn main() {}
