use stencil_runtime::prelude::*;

// A group of three fields has members 0 to 2.
#[stencil]
fn total(idx: Idx2, q: [&Field2<f64>; 3], out: &mut Field2<f64>) {
    out[idx] = q[0][idx] + q[1][idx] + q[3][idx];
}

fn main() {}
