use stencil_runtime::prelude::*;

#[stencil]
fn count(idx: Idx1, u: &Field1<f64>, n: &mut Sum<i32>) {
    n.fold(1);
}

fn main() {}
