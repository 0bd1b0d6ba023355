//! What the adjoint and gradient tests share: random fields on a range, sub-ranges, the inner
//! product over a range, and a stencil IR run through the IR interpreter (for planted bugs).

use crate::fuzz::interp::{run_point, Point, Value};
use crate::{for_each_in_range, nb, range_contains, SplitMix64};
use stencil_runtime::codegen::StencilIr;
use stencil_runtime::{Field, Field3, Loop, Loop3D, Shape};

/// A field uniform in `[lo, hi)` on `keep` and zero elsewhere (the halo included).
pub fn random_on<const D: usize>(
    shape: Shape<D>,
    keep: &Loop<D>,
    rng: &mut SplitMix64,
    lo: f64,
    hi: f64,
) -> Field<f64, D> {
    Field::from_fn(shape, |g| if range_contains(keep, &shape, g) { rng.uniform(lo, hi) } else { 0.0 })
}

/// `⟨a, b⟩` over `range`.
pub fn dot<const D: usize>(a: &Field<f64, D>, b: &Field<f64, D>, range: &Loop<D>) -> f64 {
    let mut s = 0.0;
    for_each_in_range(range, a.shape(), |g| s += nb(a, g, [0; D]) * nb(b, g, [0; D]));
    s
}

/// A random range of the storage extent of `shape`, `margin` to `margin + 1` points from each
/// end (it may reach into the halo).
pub fn sub_range<const D: usize>(shape: &Shape<D>, margin: usize, rng: &mut SplitMix64) -> Loop<D> {
    let n = shape.extent();
    let begin: [usize; D] = std::array::from_fn(|_| margin + rng.int(0, 2) as usize);
    let end: [usize; D] = std::array::from_fn(|a| n[a] - margin - rng.int(0, 2) as usize);
    Loop::from_bounds(n, begin, end).expect("the shape leaves room")
}

/// Runs `ir` over `range` through the IR interpreter, `fields[p]` standing for parameter `p`
/// (scalars are `scalars[p]`): every store of every point is applied after all points are
/// evaluated (an adjoint's or a gradient's writes accumulate into its `&mut` fields).
pub fn interpret(ir: &StencilIr, range: &Loop3D, fields: &mut [Option<Field3<f64>>], scalars: &[f64]) {
    let shape = *fields.iter().flatten().next().expect("a field").shape();
    let mut stores = Vec::new();
    for_each_in_range(range, &shape, |g| {
        let load = |p: usize, o: [i32; 3]| {
            let f = fields[p].as_ref().expect("a field parameter");
            Value::F64(nb(f, g, [o[0] as isize, o[1] as isize, o[2] as isize]))
        };
        let scalar = |p: usize| Value::F64(scalars[p]);
        for (p, v) in run_point(ir, &Point { load: &load, scalar: &scalar, level: None }) {
            stores.push((p, g, v.to_f64()));
        }
    });
    for (p, g, v) in stores {
        fields[p].as_mut().expect("a field").set(g, v).expect("inside");
    }
}
