use stencil_runtime::prelude::*;

// A carried local needs levels to carry it between.
#[stencil]
fn accumulate(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut acc = 0.0;
    acc += q[idx];
    out[idx] = acc;
}

fn main() {}
