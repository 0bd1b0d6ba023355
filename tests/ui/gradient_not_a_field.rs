use stencil_runtime::prelude::*;

// A gradient is taken with respect to read fields: `dt2` is a scalar.
#[stencil(gradient(dt2))]
fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_next: &mut Field3<f64>) {
    u_next[idx] = u[idx] + dt2 * c[idx] * u[idx.ix::<1, 0, 0>()];
}

fn main() {}
