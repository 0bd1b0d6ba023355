use stencil_runtime::prelude::*;

#[stencil(fma, fma)]
fn axpy(idx: Idx1, a: f32, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = a * u[idx] + out[idx];
}

fn main() {}
