use stencil_runtime::prelude::*;

// A group of fields is indexed, not used whole.
#[stencil]
fn total(idx: Idx2, q: [&Field2<f64>; 3], out: &mut Field2<f64>) {
    let all = q;
    out[idx] = all[0][idx];
}

fn main() {}
