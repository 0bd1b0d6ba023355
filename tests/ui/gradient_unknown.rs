use stencil_runtime::prelude::*;

// `vel` is no parameter of this stencil.
#[stencil(gradient(vel))]
fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_next: &mut Field3<f64>) {
    u_next[idx] = u[idx] + dt2 * c[idx] * u[idx.ix::<1, 0, 0>()];
}

fn main() {}
