use stencil_runtime::prelude::*;

#[stencil]
fn weighted(idx: Idx3, w: Vec<f32>, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx];
}

fn main() {}
