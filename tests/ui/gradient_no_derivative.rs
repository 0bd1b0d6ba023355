use stencil_runtime::prelude::*;

// `floor` has no derivative rule: no gradient with respect to `c` through it.
#[stencil(gradient(c))]
fn quantised(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_next: &mut Field3<f64>) {
    let level = c[idx].floor();
    u_next[idx] = u[idx] + dt2 * level * u[idx.ix::<1, 0, 0>()];
}

fn main() {}
