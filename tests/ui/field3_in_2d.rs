use stencil_runtime::prelude::*;

#[stencil]
fn copy(idx: Idx2, f: &Field3<f32>, out: &mut Field2<f32>) {
    out[idx] = f[idx];
}

fn main() {}
