use stencil_runtime::prelude::*;

#[stencil]
fn mutable(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let mut f = |p: Idx3| u[p] + 1.0;
    out[idx] = f(idx);
}

fn main() {}
