use stencil_runtime::prelude::*;

#[stencil]
fn double(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = 2 * f[idx];
}

fn main() {}
