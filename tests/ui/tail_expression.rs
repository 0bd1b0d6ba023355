use stencil_runtime::prelude::*;

#[stencil]
fn twice(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx];
    f[idx] * 2.0
}

fn main() {}
