use stencil_runtime::prelude::*;

// An `unsafe` block that ends the body is rejected for being unsafe, not as a returned value.
#[stencil]
fn copy(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    unsafe {
        out[idx] = f[idx];
    }
}

fn main() {}
