use stencil_runtime::prelude::*;

#[stencil]
fn copy(f: &Field3<f32>, idx: Idx3, out: &mut Field3<f32>) {
    out[idx] = f[idx];
}

fn main() {}
