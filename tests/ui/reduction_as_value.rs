use stencil_runtime::prelude::*;

#[stencil]
fn peak(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>, m: &mut Max<f64>) {
    m.fold(u[idx]);
    out[idx] = u[idx] / m;
}

fn main() {}
