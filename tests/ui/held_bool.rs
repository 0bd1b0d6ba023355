use stencil_runtime::prelude::*;

#[stencil]
fn pick(idx: Idx1, on: Held<bool>, u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = if on { u[idx] } else { 0.0 };
}

fn main() {}
