use stencil_runtime::prelude::*;

#[stencil]
fn total(idx: Idx2, u: &Field2<f32>, s: &mut Sum<f64>) {
    s.fold(u[idx] * 2.0);
}

fn main() {}
