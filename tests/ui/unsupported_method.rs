use stencil_runtime::prelude::*;

#[stencil]
fn apply(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let x = f[idx];
    let s = x.to_string();
    out[idx] = x;
}

fn main() {}
