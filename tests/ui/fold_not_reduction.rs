use stencil_runtime::prelude::*;

#[stencil]
fn peak(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
    let mut m = 0.0;
    m.fold(u[idx]);
    out[idx] = m;
}

fn main() {}
