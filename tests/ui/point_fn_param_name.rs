use stencil_runtime::prelude::*;

#[stencil]
fn param_name(idx: Idx1, c: f64, a: &Field1<f64>, out: &mut Field1<f64>) {
    let f = |c: Idx1| a[c] * 2.0;
    out[idx] = f(idx) * c;
}

fn main() {}
