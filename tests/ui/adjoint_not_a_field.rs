use stencil_runtime::prelude::*;

// An adjoint is taken with respect to read fields: not a scalar, not a written field, not a
// name the stencil does not have; all of them in one `adjoint(..)`.
#[stencil(adjoint(k))]
fn scalar(idx: Idx3, k: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = k * u[idx];
}

#[stencil(adjoint(out))]
fn written(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 2.0 * u[idx];
}

#[stencil(adjoint(w))]
fn unknown(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 2.0 * u[idx];
}

#[stencil(adjoint(u), adjoint(v))]
fn twice(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = u[idx] + v[idx];
}

fn main() {}
