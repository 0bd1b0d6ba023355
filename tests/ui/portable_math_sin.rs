use stencil_runtime::prelude::*;

// `sin` has no portable form: the CPU and the GPU would give different last bits.
#[stencil(portable_math)]
fn wave(idx: Idx3, k: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = (k * u[idx]).exp() + u[idx].sin();
}

fn main() {}
