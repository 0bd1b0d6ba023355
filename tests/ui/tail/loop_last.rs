use stencil_runtime::prelude::*;

// A `loop` that ends the body is a loop, not a returned value.
#[stencil]
fn spin(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    loop {
        out[idx] = f[idx];
    }
}

fn main() {}
