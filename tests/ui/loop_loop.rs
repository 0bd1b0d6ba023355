use stencil_runtime::prelude::*;

#[stencil]
fn halve(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let mut x = f[idx];
    loop {
        x = x * 0.5;
        if x < 1.0 {
            break;
        }
    }
    out[idx] = x;
}

fn main() {}
