use stencil_runtime::prelude::*;

#[stencil_fn]
fn halve(x: f64) -> f64 {
    if x > 1.0 {
        shrink(x * 0.5)
    } else {
        x
    }
}

#[stencil_fn]
fn shrink(x: f64) -> f64 {
    halve(x)
}

fn main() {
    let _ = halve(4.0);
}
