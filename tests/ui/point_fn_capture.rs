use stencil_runtime::prelude::*;

#[stencil]
fn capture(idx: Idx3, c: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    let scale = c * u[idx];
    let flux = |p: Idx3| u[p.ix::<1, 0, 0>()] * scale;
    out[idx] = flux(idx) - flux(idx.ix::<-1, 0, 0>());
}

fn main() {}
