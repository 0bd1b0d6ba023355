use stencil_runtime::prelude::*;

// A stencil that folds into a reduction has no adjoint stencil (yet).
#[stencil(adjoint(u))]
fn norm(idx: Idx3, u: &Field3<f64>, total: &mut Sum<f64>, out: &mut Field3<f64>) {
    total.fold(u[idx]);
    out[idx] = u[idx];
}

fn main() {}
