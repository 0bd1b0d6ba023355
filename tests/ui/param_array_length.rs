use stencil_runtime::prelude::*;

const N: usize = 3;

// An array parameter's length is a literal.
#[stencil]
fn smooth(idx: Idx1, w: [f64; N], u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = w[0] * u[idx];
}

fn main() {}
