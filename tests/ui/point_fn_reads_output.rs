use stencil_runtime::prelude::*;

#[stencil]
fn reads_output(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
    let f = |p: Idx1| u[p] + out[p];
    out[idx] = f(idx) + f(idx.ix::<-1>());
}

fn main() {}
