use stencil_runtime::prelude::*;

#[stencil]
fn trace(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    println!("{}", f[idx]);
    out[idx] = f[idx];
}

fn main() {}
