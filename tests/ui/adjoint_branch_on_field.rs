use stencil_runtime::prelude::*;

// A branch decided by a requested field is not linear in it.
#[stencil(adjoint(u))]
fn upwind(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let mut v = u[idx];
    if u[idx.ix::<-1, 0, 0>()] > 0.0 {
        v = u[idx.ix::<-1, 0, 0>()];
    }
    out[idx] = v;
}

fn main() {}
