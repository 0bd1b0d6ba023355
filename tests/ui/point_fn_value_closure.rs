use stencil_runtime::prelude::*;

#[stencil]
fn value_closure(idx: Idx1, a: &Field1<f64>, out: &mut Field1<f64>) {
    let sq = |x| x * x;
    out[idx] = sq(a[idx]);
}

fn main() {}
