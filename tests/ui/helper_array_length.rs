use stencil_runtime::prelude::*;

#[stencil_fn]
fn total(q: [f64; 3]) -> f64 {
    q[0] + q[1] + q[2]
}

#[stencil]
fn apply(idx: Idx1, g: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = total([g[idx], g[idx]]);
}

fn main() {}
