use stencil_runtime::prelude::*;

#[stencil(sweep = forward)]
fn in_sweep(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let f = |p: Idx3| u[p] * 2.0;
    out[idx] = f(idx);
}

fn main() {}
