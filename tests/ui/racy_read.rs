use stencil_runtime::prelude::*;

// A written field may be read only at its own point.
#[stencil]
fn relax(idx: Idx3, w: f32, u: &mut Field3<f32>) {
    u[idx] = (1.0 - w) * u[idx] + w * u[idx.ix::<1, 0, 0>()];
}

fn main() {}
