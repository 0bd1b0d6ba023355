use stencil_runtime::prelude::*;

// `v` is a parameter the stencil never reads: there is nothing to differentiate.
#[stencil(adjoint(u, v))]
fn scale(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 2.0 * u[idx];
}

fn main() {}
