use stencil_runtime::prelude::*;

// The point index is not a number: the message says how it is used, in the stencil's own name
// for it (`p`), not as `p[p]`.
#[stencil]
fn position(p: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[p] = f[p] + p;
}

fn main() {}
