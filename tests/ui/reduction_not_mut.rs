use stencil_runtime::prelude::*;

#[stencil]
fn peak(idx: Idx1, u: &Field1<f64>, m: &Max<f64>) {
    m.fold(u[idx]);
}

fn main() {}
