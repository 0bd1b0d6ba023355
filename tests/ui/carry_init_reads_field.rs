use stencil_runtime::prelude::*;

// A carried local starts before the first level: no field to read yet.
#[stencil(sweep = backward)]
fn accumulate(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut acc = q[idx];
    acc += q[idx];
    out[idx] = acc;
}

fn main() {}
