//! Held scalars on any executor (`tests/tests/held.rs` on the host and host subdomains,
//! `tests/tests/gpu_executor.rs` on a GPU and GPU subdomains): a stencil reading a held scalar
//! gives the bits of the same stencil given the value, after each `set_held`; `reduce_into`
//! leaves the bits `run` folds; a one-point clock reads and writes the same held scalar; and a
//! recorded step replays with the values its held scalars hold at each replay.

use crate::SplitMix64;
use stencil_runtime::prelude::*;
use stencil_runtime::{Executor, LaunchError, Recorded};

/// `out = a x + b y(i+1) / a` with `a` held.
#[stencil]
pub fn held_axpy(idx: Idx3, a: Held<f64>, b: f64, x: &Field3<f64>, y: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = a * x[idx] + b * y[idx.ix::<1, 0, 0>()] / a;
}

/// [`held_axpy`] with `a` passed by value: the reference.
#[stencil]
pub fn value_axpy(idx: Idx3, a: f64, b: f64, x: &Field3<f64>, y: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = a * x[idx] + b * y[idx.ix::<1, 0, 0>()] / a;
}

/// The largest value and the sum of `x`.
#[stencil]
pub fn held_stats(idx: Idx3, x: &Field3<f64>, m: &mut Max<f64>, s: &mut Sum<f64>) {
    m.fold(x[idx]);
    s.fold(x[idx]);
}

/// The smallest value of `x`.
#[stencil]
pub fn held_smallest(idx: Idx3, x: &Field3<f64>, m: &mut Min<f64>) {
    m.fold(x[idx]);
}

/// A clock on the executor, over one point: `dt = min(cfl / rate, t_end − t)` and the next `t`
/// (landing on `t_end`), read from and written into held scalars (`at` only places the point).
#[stencil]
#[allow(clippy::too_many_arguments)]
pub fn held_clock(
    idx: Idx3,
    cfl: f64,
    t_end: f64,
    rate: Held<f64>,
    t: Held<f64>,
    at: &Field3<f64>,
    dt: &mut Min<f64>,
    next: &mut Max<f64>,
) {
    let d = (cfl / rate).min(t_end - t);
    dt.fold(d);
    next.fold(if t_end - t <= d { t_end } else { t + d });
}

fn random_field<E: Executor>(exec: &E, shape: Shape3, rng: &mut SplitMix64) -> E::Field<f64, 3> {
    let host = Field3::from_fn(shape, |_| rng.uniform(0.5, 2.0));
    exec.upload(&host).expect("upload")
}

/// Bitwise equality of two executor fields (every storage point).
fn same_bits<E: Executor>(exec: &E, what: &str, a: &E::Field<f64, 3>, b: &E::Field<f64, 3>) {
    let (a, b) = (exec.download(a).expect("download"), exec.download(b).expect("download"));
    let (a, b) = (a.interior_view(), b.interior_view());
    let differ = a.iter().zip(b.iter()).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
    assert_eq!(differ, 0, "{what}: {differ} of {} points differ", a.len());
}

/// Every check on `exec`, with random inputs from `seed` (the grid's interior is 12 × 10 × 8).
pub fn check_held<E: Executor>(exec: &E, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let shape = Shape3::new([12, 10, 8]).halo(1);
    let inner = Loop3D::interior(&shape);
    let (x, y) = (random_field(exec, shape, &mut rng), random_field(exec, shape, &mut rng));
    let nan = Field3::from_fn(shape, |_| f64::NAN);
    let (mut held_out, mut value_out) = (exec.upload(&nan).unwrap(), exec.upload(&nan).unwrap());
    let b = rng.uniform(-1.0, 1.0);

    // Read: the bits of the value passed by value, after each set.
    let a = exec.held(rng.uniform(0.5, 1.5)).expect("held");
    for _ in 0..3 {
        let v = rng.uniform(0.5, 1.5);
        exec.set_held(&a, v).expect("set_held");
        exec.run(&inner, HeldAxpy, (&a, b, &x, &y, &mut held_out)).expect("held launch");
        exec.run(&inner, ValueAxpy, (v, b, &x, &y, &mut value_out)).expect("value launch");
        same_bits(exec, "a held scalar against its value", &held_out, &value_out);
        assert_eq!(exec.read_held(&a).unwrap().to_bits(), v.to_bits());
    }

    // Reductions into held scalars: the bits `run` folds.
    let (m, s) = (exec.held(f64::NAN).unwrap(), exec.held(f64::NAN).unwrap());
    exec.reduce_into(&inner, HeldStats, None, (&x, &mut Max::new(), &mut Sum::new()), &[&m, &s]).expect("reduce_into");
    let (mut rm, mut rs) = (Max::new(), Sum::new());
    exec.run(&inner, HeldStats, (&x, &mut rm, &mut rs)).expect("run");
    assert_eq!(exec.read_held(&m).unwrap().to_bits(), rm.get().to_bits(), "max into a held scalar");
    assert_eq!(exec.read_held(&s).unwrap().to_bits(), rs.get().to_bits(), "sum into a held scalar");
    // Every copy holds the result (on subdomains, each part reads its own).
    exec.run(&inner, HeldAxpy, (&s, b, &x, &y, &mut held_out)).expect("held launch");
    exec.run(&inner, ValueAxpy, (rs.get(), b, &x, &y, &mut value_out)).expect("value launch");
    same_bits(exec, "a reduction's result held in every part", &held_out, &value_out);
    // A minimum alone (on GPU subdomains over ranks with NCCL: folded on the streams) against a
    // plain loop over the host copy, held in every part.
    let low = exec.held(f64::NAN).unwrap();
    exec.reduce_into(&inner, HeldSmallest, None, (&x, &mut Min::new()), &[&low]).expect("reduce_into a minimum");
    let smallest = exec.download(&x).unwrap().interior_view().iter().fold(f64::INFINITY, |m, &v| m.min(v));
    assert_eq!(exec.read_held(&low).unwrap().to_bits(), smallest.to_bits(), "min into a held scalar");
    exec.run(&inner, HeldAxpy, (&low, b, &x, &y, &mut held_out)).expect("held launch");
    exec.run(&inner, ValueAxpy, (smallest, b, &x, &y, &mut value_out)).expect("value launch");
    same_bits(exec, "a minimum held in every part", &held_out, &value_out);
    let wrong = exec.reduce_into(&inner, HeldStats, None, (&x, &mut Max::new(), &mut Sum::new()), &[&m]);
    assert!(wrong.unwrap_err().to_string().contains("held_stats"), "one held scalar for two reductions is refused");

    // A clock over one point, reading and writing `t`; after `t_end`, `dt` is 0 and `t` stays.
    let (cfl, t_end) = (0.5, rng.uniform(1.0, 3.0));
    let point = Loop3D::from_bounds(shape.extent(), [3, 2, 1], [4, 3, 2]).expect("one point");
    let (t, dt) = (exec.held(0.0).unwrap(), exec.held(f64::NAN).unwrap());
    let (mut host_t, mut steps) = (0.0f64, 0);
    while steps < 40 {
        exec.reduce_into(
            &point,
            HeldClock,
            None,
            (cfl, t_end, &m, &t, &x, &mut Min::new(), &mut Max::new()),
            &[&dt, &t],
        )
        .expect("clock");
        let d = (cfl / rm.get()).min(t_end - host_t);
        host_t = if t_end - host_t <= d { t_end } else { host_t + d };
        assert_eq!(exec.read_held(&dt).unwrap().to_bits(), d.to_bits(), "dt at step {steps}");
        assert_eq!(exec.read_held(&t).unwrap().to_bits(), host_t.to_bits(), "t at step {steps}");
        steps += 1;
    }
    assert_eq!(host_t, t_end, "the clock reaches the end");

    // A recorded step replays with the values held at each replay.
    exec.set_held(&t, 0.0).unwrap();
    let mut state = (exec.upload(&nan).unwrap(), exec.upload(&nan).unwrap());
    let values: Vec<f64> = (0..4).map(|_| rng.uniform(0.5, 1.5)).collect();
    {
        let step = |e: &E, (out, _): &mut (E::Field<f64, 3>, E::Field<f64, 3>)| -> Result<(), LaunchError> {
            e.reduce_into(
                &point,
                HeldClock,
                None,
                (cfl, 1e9, &m, &t, &x, &mut Min::new(), &mut Max::new()),
                &[&dt, &t],
            )?;
            e.run(&inner, HeldAxpy, (&a, b, &x, &y, out))
        };
        // Once before recording (kernels compiled and tuned), as `Recorded::new` asks.
        exec.set_held(&a, values[0]).unwrap();
        step(exec, &mut state).expect("the step before recording");
        let mut recorded = Recorded::new(exec, &mut state, step).expect("record");
        for &v in &values {
            exec.set_held(&a, v).unwrap();
            recorded.replay().expect("replay");
            exec.run(&inner, ValueAxpy, (v, b, &x, &y, &mut value_out)).expect("value launch");
            same_bits(exec, "a recorded step's held scalar against its value", &recorded.state().0, &value_out);
        }
    }
    let expected = (1..=values.len() + 1).fold(0.0, |t, _| t + cfl / rm.get());
    assert_eq!(exec.read_held(&t).unwrap().to_bits(), expected.to_bits(), "each replay advanced the clock");
}
