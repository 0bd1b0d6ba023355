use stencil_runtime::prelude::*;

#[stencil]
fn bad_call(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let f = |p: Idx3| u[p] * 2.0;
    out[idx] = f(u[idx]);
}

fn main() {}
