use stencil_runtime::prelude::*;

// A math function of a requested field (here in a local) has no adjoint.
#[stencil(adjoint(u))]
fn limited(idx: Idx3, c: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    let s = c[idx] * u[idx.ix::<0, 1, 0>()].abs();
    out[idx] = u[idx] + s;
}

fn main() {}
