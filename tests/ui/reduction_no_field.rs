use stencil_runtime::prelude::*;

#[stencil]
fn count(idx: Idx3, n: &mut Sum<f64>) {
    n.fold(1.0);
}

fn main() {}
