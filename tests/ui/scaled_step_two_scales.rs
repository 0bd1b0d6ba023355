use stencil_runtime::prelude::*;

// A scaled reverse step carries one scale for every tap at a neighbour; this heat update's
// face coefficients differ per side (k one point right, k here).
#[stencil(scaled_adjoint_step(u))]
fn heat(idx: Idx3, k: &Field3<f64>, u: &Field3<f64>, u_next: &mut Field3<f64>) {
    u_next[idx] = u[idx] + k[idx.ix::<1, 0, 0>()] * (u[idx.ix::<1, 0, 0>()] - u[idx]) - k[idx] * (u[idx] - u[idx.ix::<-1, 0, 0>()]);
}

fn main() {}
