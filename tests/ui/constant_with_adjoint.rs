use stencil_runtime::prelude::*;

const GAIN: f64 = 2.0;

// A stencil that emits its adjoint cannot read a constant of the module yet.
#[stencil(adjoint(f))]
fn amplify(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = f[idx] * GAIN;
}

fn main() {}
