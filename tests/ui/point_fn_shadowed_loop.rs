use stencil_runtime::prelude::*;

#[stencil]
fn shadowed_loop(idx: Idx1, a: &Field1<f64>, out: &mut Field1<f64>) {
    let mut s = 0.0;
    for k in 1..3 {
        let k = k * 10;
        let f = |p: Idx1| a[p] * (k as f64);
        s += f(idx);
    }
    out[idx] = s;
}

fn main() {}
