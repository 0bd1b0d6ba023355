use stencil_runtime::prelude::*;

#[stencil_fn]
fn total(q: [f64; 3]) -> f64 {
    q[0] + q[1] + q[2]
}

#[stencil]
fn apply(idx: Idx1, f: &Field1<f32>, g: &Field1<f64>, out: &mut Field1<f64>) {
    let a = total([g[idx], g[idx], g[idx]]);
    let b = total([f[idx], f[idx], f[idx]]);
    out[idx] = a + b;
}

fn main() {}
