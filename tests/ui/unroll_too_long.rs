use stencil_runtime::prelude::*;

#[stencil]
fn sum(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let mut acc = 0.0;
    for q in 0..100 {
        acc += f[idx] * (q as f32);
    }
    out[idx] = acc;
}

fn main() {}
