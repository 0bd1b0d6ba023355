use stencil_runtime::prelude::*;

#[stencil]
fn shadowed(idx: Idx1, c: f64, a: &Field1<f64>, out: &mut Field1<f64>) {
    let c = 2.0 * c;
    let f = |p: Idx1| a[p] * c;
    out[idx] = f(idx) + f(idx.ix::<-1>());
}

fn main() {}
