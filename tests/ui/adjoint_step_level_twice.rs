use stencil_runtime::prelude::*;

// Each time level is named once.
#[stencil(adjoint_step(u, u))]
fn wave(idx: Idx3, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    u_next[idx] = 2.0 * u[idx] - u_prev[idx];
}

fn main() {}
