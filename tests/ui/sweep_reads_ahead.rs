use stencil_runtime::prelude::*;

// Going forward, the level above is not written yet.
#[stencil(sweep = forward)]
fn smooth(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 0.5 * (q[idx] + out[idx.ix(0, 0, 1)]);
}

fn main() {}
