use stencil_runtime::prelude::*;

// One sweep order.
#[stencil(sweep = forward, sweep = backward)]
fn integrate(idx: Idx3, q: &Field3<f64>, total: &mut Field3<f64>) {
    total[idx] = q[idx];
}

fn main() {}
