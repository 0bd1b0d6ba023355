use stencil_runtime::prelude::*;

// The loop variable of an unrolled loop is an integer: it needs a cast to meet a float.
#[stencil]
fn weigh(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let mut acc = 0.0;
    for q in 0..3 {
        acc += f[idx] * q;
    }
    out[idx] = acc;
}

fn main() {}
