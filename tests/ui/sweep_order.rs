use stencil_runtime::prelude::*;

// A sweep goes forward or backward.
#[stencil(sweep = upward)]
fn integrate(idx: Idx3, q: &Field3<f64>, total: &mut Field3<f64>) {
    total[idx] = q[idx];
}

fn main() {}
