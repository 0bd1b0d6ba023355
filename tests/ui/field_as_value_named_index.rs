use stencil_runtime::prelude::*;

// A field used as a value: the hint indexes it with the stencil's index name (`at`).
#[stencil]
fn whole(at: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let g = f;
    out[at] = g;
}

fn main() {}
