use stencil_runtime::prelude::*;

// The elements of `w: [f64; 2]` are `w[0]` and `w[1]`; `w_1` names nothing.
#[stencil]
fn scale(idx: Idx1, w: [f64; 2], u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = w_1 * u[idx];
}

fn main() {}
