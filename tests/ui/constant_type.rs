use stencil_runtime::prelude::*;

// A constant of the module takes the type its use gives it (f64 here, from the fields): a
// constant declared f32 is a type error at the constant.
const GAIN: f32 = 2.0;

#[stencil]
fn amplify(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx] * GAIN;
}

fn main() {}
