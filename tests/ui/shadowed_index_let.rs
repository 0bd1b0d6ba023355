use stencil_runtime::prelude::*;

// A local named like the point index would hide it: `f[idx.ix::<1>()]` below would read beside
// the wrong point (or the index would silently win over the local).
#[stencil]
fn shifted(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let idx = 2.0f32;
    out[idx] = f[idx.ix::<1>()] * idx;
}

fn main() {}
