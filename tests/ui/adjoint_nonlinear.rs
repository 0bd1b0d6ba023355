use stencil_runtime::prelude::*;

// `u · ∂u/∂x` is not linear in `u`: no adjoint with respect to `u`.
#[stencil(adjoint(u))]
fn advect(idx: Idx3, dt: f64, u: &Field3<f64>, u_new: &mut Field3<f64>) {
    let grad = u[idx.ix::<1, 0, 0>()] - u[idx.ix::<-1, 0, 0>()];
    u_new[idx] = u[idx] - dt * u[idx] * grad;
}

fn main() {}
