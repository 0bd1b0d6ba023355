use stencil_runtime::prelude::*;

// A sweep cannot fold into a reduction.
#[stencil(sweep = forward)]
fn column_mass(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>, mass: &mut Sum<f64>) {
    out[idx] = q[idx];
    mass.fold(q[idx]);
}

fn main() {}
