use stencil_runtime::prelude::*;

// `w: [f64; 2]` also takes the names `w_0` and `w_1`.
#[stencil]
fn smooth(idx: Idx1, w: [f64; 2], w_1: f64, u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = (w[0] + w_1) * u[idx];
}

fn main() {}
