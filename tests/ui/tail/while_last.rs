use stencil_runtime::prelude::*;

// A `while` loop that ends the body is a loop, not a returned value.
#[stencil]
fn halve(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx];
    while out[idx] > 1.0 {
        out[idx] = out[idx] * 0.5;
    }
}

fn main() {}
