use stencil_runtime::prelude::*;

#[stencil]
fn nothing(idx: Idx3, f: &Field3<f32>, g: &Field3<f32>) {
    let x = f[idx] + g[idx];
}

fn main() {}
