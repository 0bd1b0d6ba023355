use stencil_runtime::prelude::*;

// A misspelt local is an unknown name (a name in upper case would be read as a constant of the
// module: see constant_type.rs).
#[stencil]
fn amplify(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let gain = 2.0;
    out[idx] = f[idx] * gian;
}

fn main() {}
