use stencil_runtime::prelude::*;

// A carried local's initial value runs before the first level: it cannot write a field.
#[stencil(sweep = forward)]
fn accumulate(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut acc = {
        out[idx] = 1.0;
        0.0
    };
    acc += q[idx];
    out[idx] = acc;
}

fn main() {}
