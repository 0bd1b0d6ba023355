use stencil_runtime::prelude::*;

// The level exists only in a column sweep.
#[stencil]
fn bottom(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = if idx.level() == 0 { q[idx] } else { 0.0 };
}

fn main() {}
