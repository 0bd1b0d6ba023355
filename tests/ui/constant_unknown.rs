use stencil_runtime::prelude::*;

const GAIN: f32 = 2.0;

// A name in upper case is read as a constant in scope: a misspelt one is not found there.
#[stencil]
fn amplify(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx] * GIAN;
}

fn main() {
    let _ = GAIN;
}
