use stencil_runtime::prelude::*;

#[stencil_fn]
fn speed(u: f64, c: f64) -> f64 {
    let s = u.abs() + c;
    cfl.fold(s);
    s
}

fn main() {}
