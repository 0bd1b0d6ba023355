use stencil_runtime::prelude::*;

// The step is an adjoint too: the update must be linear in its levels.
#[stencil(adjoint_step(u, u_prev))]
fn wave(idx: Idx3, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] * u[idx];
}

fn main() {}
