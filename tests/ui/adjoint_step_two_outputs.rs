use stencil_runtime::prelude::*;

// An adjoint step writes one field, the new time level; this stencil writes two.
#[stencil(adjoint_step(u))]
fn two(idx: Idx3, u: &Field3<f64>, a: &mut Field3<f64>, b: &mut Field3<f64>) {
    a[idx] = u[idx.ix::<1, 0, 0>()];
    b[idx] = 2.0 * u[idx];
}

fn main() {}
