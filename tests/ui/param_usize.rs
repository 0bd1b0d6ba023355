use stencil_runtime::prelude::*;

#[stencil]
fn scale(idx: Idx3, n: usize, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx] * (n as f32);
}

fn main() {}
