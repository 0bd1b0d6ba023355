use stencil_runtime::prelude::*;

#[stencil]
fn sum(idx: Idx1, f: &Field1<f64>, out: &mut Field1<f64>) {
    let q = [f[idx]; 5];
    let mut s = 0.0;
    for v in 0..=5 {
        s += q[v];
    }
    out[idx] = s;
}

fn main() {}
