use stencil_runtime::prelude::*;

#[stencil]
fn int_div(idx: Idx1, n: &Field1<i32>, d: &Field1<i32>, out: &mut Field1<i32>) {
    let q = |p: Idx1| n[p] / d[p];
    out[idx] = if d[idx] != 0 { q(idx) } else { 0 };
}

fn main() {}
