use stencil_runtime::prelude::*;

#[stencil(parallel = true)]
fn copy(idx: Idx1, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = u[idx];
}

fn main() {}
