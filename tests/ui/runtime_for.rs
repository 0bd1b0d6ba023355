use stencil_runtime::prelude::*;

#[stencil]
fn repeat(idx: Idx3, n: i32, f: &Field3<f32>, out: &mut Field3<f32>) {
    let mut acc = 0.0;
    for i in 0..n {
        acc += f[idx];
    }
    out[idx] = acc;
}

fn main() {}
