use stencil_runtime::prelude::*;

#[stencil]
fn scale(idx: Idx1, by: &Held<f64>, u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = by * u[idx];
}

fn main() {}
