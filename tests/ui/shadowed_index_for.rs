use stencil_runtime::prelude::*;

#[stencil]
fn summed(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let mut s = 0.0;
    for idx in 0..3 {
        s += idx as f32;
    }
    out[idx] = f[idx] + s;
}

fn main() {}
