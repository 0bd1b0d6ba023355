use stencil_runtime::prelude::*;

// A group of three fields is written with three values.
#[stencil]
fn split(idx: Idx2, u: &Field2<f64>, q: [&mut Field2<f64>; 3]) {
    q[idx] = [u[idx], 2.0 * u[idx]];
}

fn main() {}
