use stencil_runtime::prelude::*;

// Carried locals open the body.
#[stencil(sweep = forward)]
fn accumulate(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    let x = q[idx];
    #[carry]
    let mut acc = 0.0;
    acc += x;
    out[idx] = acc;
}

fn main() {}
