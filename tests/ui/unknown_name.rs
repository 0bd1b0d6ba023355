use stencil_runtime::prelude::*;

const GAIN: f32 = 2.0;

#[stencil]
fn amplify(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx] * GAIN;
}

fn main() {
    let _ = GAIN;
}
