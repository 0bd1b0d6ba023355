//! Bad input to the acoustic model gets a clear error, not a panic or a blow-up: an unstable
//! time step names the limit, a source outside the grid says so, and reading receivers over a
//! range that does not fit the field is an error naming the range.

use stencil_examples::acoustic::{courant_limit, run, Model, ModelError};
use stencil_examples::checkpoint::Plan;
use stencil_runtime::prelude::*;
use stencil_runtime::{FieldError, Loop, RangeError};

#[test]
fn unstable_time_step_is_refused_with_the_limit() {
    let mut m = Model::layered(16, 4);
    m.dt = 1.01 * courant_limit() * m.h / m.v_max();
    let e = m.check().unwrap_err();
    assert!(matches!(e, ModelError::Unstable { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("unstable") && text.contains("0.4529") && text.contains("lower dt"), "{text}");
    assert!(
        run::<Host, f32>(&Host, &Default::default(), &m, None, &Plan::none(), |_| {}).is_err(),
        "run ran an unstable model"
    );
    m.dt = 0.99 * courant_limit() * m.h / m.v_max();
    m.check().unwrap();
}

#[test]
fn source_and_receivers_outside_the_grid_are_refused() {
    let mut m = Model::layered(16, 4);
    m.source = [16, 3, 3];
    assert!(matches!(m.check(), Err(ModelError::Invalid(t)) if t.contains("must lie in the physical grid")));
    let mut m = Model::layered(16, 4);
    m.receiver_depth = 40;
    assert!(matches!(m.check(), Err(ModelError::Invalid(_))));
}

#[test]
fn reading_a_range_that_does_not_fit_is_an_error() {
    let shape = Shape3::new([6, 5, 4]).halo(1);
    let f = Field3::from_fn(shape, |[i, j, k]| (i + 10 * j + 100 * k) as f32);
    // A range built for another extent.
    let other = Loop::from_bounds([9, 9, 9], [1, 1, 1], [3, 3, 3]).unwrap();
    let e = f.read_range(&other).unwrap_err();
    assert!(matches!(&e, FieldError::Range(RangeError::DoesNotFit { axis: 0, extent, .. }) if extent == &[8, 7, 6]));
    assert!(e.to_string().contains("does not fit"), "{e}");
    // An inverted range.
    let inverted = Loop3D::new(8, 5, 5, 7, 1, 1, 6, 1, 1);
    let e = f.read_range(&inverted).unwrap_err();
    assert!(matches!(e, FieldError::Range(RangeError::DoesNotFit { axis: 0, .. })), "{e:?}");
    // A fitting line reads the values in order.
    let line = Loop::from_bounds(shape.extent(), [1, 2, 3], [7, 3, 4]).unwrap();
    let want: Vec<f32> = (0..6).map(|i| (i + 10 + 200) as f32).collect();
    assert_eq!(f.read_range(&line).unwrap(), want);
}
