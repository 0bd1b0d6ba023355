use stencil_runtime::prelude::*;

fn cube(x: f64) -> f64 {
    x * x * x
}

#[stencil_fn]
fn smooth(x: f64) -> f64 {
    cube(x) + 1.0
}

fn main() {
    let _ = smooth(cube(1.0));
}
