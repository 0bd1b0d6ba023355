use stencil_runtime::prelude::*;

// Each instantiation is checked: an f64 helper called with a `T` value fails for `T = f32`.
#[stencil_fn]
fn half(x: f64) -> f64 {
    0.5 * x
}

#[stencil]
fn halve<T>(idx: Idx1, a: &Field1<T>, out: &mut Field1<T>) {
    out[idx] = half(a[idx]);
}

fn main() {}
