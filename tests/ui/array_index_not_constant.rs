use stencil_runtime::prelude::*;

#[stencil]
fn pick(idx: Idx1, k: i32, f: &Field1<f64>, out: &mut Field1<f64>) {
    let q = [f[idx], 2.0 * f[idx], 3.0 * f[idx]];
    out[idx] = q[k];
}

fn main() {}
