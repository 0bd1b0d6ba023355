//! Uses `#[stencil]` and `#[stencil_fn]` through a dependency renamed to `stencils`: the
//! generated code must name the runtime `::stencils`; and calls helpers defined in another crate
//! (`helper_library`, which names the runtime `stencil_runtime`). Checks the results against
//! plain loops.

// Every helper a stencil reaches is in scope where it is, `lean` (which `lean2` calls) too.
use helper_library::physics::{lean, lean2};
use stencils::prelude::*;

/// Weighted average of a point and its two neighbours.
#[stencil_fn]
fn blend(w: f64, left: f64, centre: f64, right: f64) -> f64 {
    (1.0 - 2.0 * w) * centre + w * (left + right)
}

#[stencil]
fn smooth(idx: Idx2, w: f64, u: &Field2<f64>, out: &mut Field2<f64>) {
    let along_i = blend(w, u[idx.ix::<-1, 0>()], u[idx], u[idx.ix::<1, 0>()]);
    out[idx] = blend(w, u[idx.ix::<0, -1>()], along_i, u[idx.ix::<0, 1>()]);
}

/// Leans every point towards its west and south neighbours, through another crate's helper.
#[stencil]
fn drift(idx: Idx2, w: f64, u: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = lean2(w, u[idx.ix::<-1, 0>()], u[idx.ix::<0, -1>()], u[idx]);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shape = Shape2::new([37, 23]).halo(1);
    let value = |[i, j]: [isize; 2]| ((i * 7 + j * 13) % 17) as f64 * 0.25 - 1.0;
    let u = Field2::from_fn(shape, value);
    let mut out = Field2::filled(shape, f64::NAN);
    Loop2D::interior(&shape).run(Smooth, (0.2, &u, &mut out))?;
    let w = 0.2;
    for i in 0..37 {
        for j in 0..23 {
            let at = |di: isize, dj: isize| value([i + di, j + dj]);
            let along_i = (1.0 - 2.0 * w) * at(0, 0) + w * (at(-1, 0) + at(1, 0));
            let want = (1.0 - 2.0 * w) * along_i + w * (at(0, -1) + at(0, 1));
            let got = out.get([i, j]).expect("inside");
            if got != want {
                return Err(format!("point ({i}, {j}): the stencil gave {got}, the plain loop {want}").into());
            }
        }
    }
    println!("renamed dependency: #[stencil] through `stencils` matches the plain loop on 37x23 points");
    let mut drifted = Field2::filled(shape, f64::NAN);
    Loop2D::interior(&shape).run(Drift, (0.3, &u, &mut drifted))?;
    for i in 0..37 {
        for j in 0..23 {
            let lean = |behind: f64, here: f64| (1.0 - 0.3) * here + 0.3 * behind;
            let here = value([i, j]);
            let want = 0.5 * (lean(value([i - 1, j]), here) + lean(value([i, j - 1]), here));
            let got = drifted.get([i, j]).expect("inside");
            if got != want {
                return Err(format!("drift at ({i}, {j}): the stencil gave {got}, the plain loop {want}").into());
            }
        }
    }
    println!("helpers from another crate (helper_library::physics::lean2, calling lean) match the plain loop");
    Ok(())
}
