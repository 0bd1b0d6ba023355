//! Array parameters: scalar coefficients as one argument (`w: [f64; 9]`) and groups of fields
//! (`q: [&Field2<f64>; 3]`, written `qn: [&mut Field2<f64>; 3]`), indexed by compile-time
//! integers, against plain loops on random inputs with poisoned outputs; with helpers and in a
//! stencil generic over its element type.

use stencil_runtime::prelude::*;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, Real, SplitMix64};

/// A 9-point 1D filter with its coefficients as one array argument.
#[stencil]
fn filter9(idx: Idx1, w: [f64; 9], u: &Field1<f64>, out: &mut Field1<f64>) {
    let mut acc = 0.0;
    for r in 0..9 {
        acc += w[r] * u[idx.ix(r - 4)];
    }
    out[idx] = acc + weight_sum(w);
}

#[stencil_fn]
#[allow(clippy::needless_range_loop)] // stencil bodies index arrays by constant loop variables
fn weight_sum(w: [f64; 9]) -> f64 {
    let mut s = 0.0;
    for r in 0..9 {
        s += w[r];
    }
    s
}

/// Three conserved fields as one group: upwind differences, and a helper on the state vector.
#[stencil]
fn advance(idx: Idx2, c: f64, q: [&Field2<f64>; 3], qn: [&mut Field2<f64>; 3], speed: &mut Field2<f64>) {
    for v in 0..3 {
        qn[v][idx] = q[v][idx] - c * (q[v][idx] - q[v][idx.ix(-1, 0)]);
    }
    speed[idx] = norm([q[0][idx], q[1][idx], q[2][idx]]);
}

#[stencil_fn]
fn norm(s: [f64; 3]) -> f64 {
    (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]).sqrt()
}

/// Generic over the element type, with an array of coefficients of that type.
#[stencil]
fn smooth<T>(idx: Idx1, w: [T; 3], u: &Field1<T>, out: &mut Field1<T>) {
    out[idx] = w[0] * u[idx.ix(-1)] + w[1] * u[idx] + w[2] * u[idx.ix(1)];
}

#[test]
fn coefficient_arrays_match_a_plain_loop() {
    let mut rng = SplitMix64::new(91);
    let shape = Shape1::new([301]).halo(4);
    let u: Field1<f64> = random(shape, &mut rng, -1.0, 1.0);
    let w: [f64; 9] = std::array::from_fn(|_| rng.uniform(-0.5, 0.5));
    let range = Loop1D::interior(&shape).shrink([3]);
    let mut out = poisoned(shape);
    range.run(Filter9, (w, &u, &mut out)).unwrap();
    let mut want = poisoned::<f64, 1>(shape);
    let sum = w.iter().fold(0.0, |s, x| s + x);
    for_each_in_range(&range, &shape, |g| {
        let mut acc = 0.0;
        for (r, wr) in w.iter().enumerate() {
            acc += wr * nb(&u, g, [r as isize - 4]);
        }
        want.set(g, acc + sum).unwrap();
    });
    assert_bits_eq(&out, &want, "filter9");
}

#[test]
fn field_groups_read_and_write_each_member() {
    let mut rng = SplitMix64::new(92);
    let shape = Shape2::new([37, 21]).halo(1).order(Order::Kij);
    let q: [Field2<f64>; 3] = std::array::from_fn(|_| random(shape, &mut rng, 0.5, 2.0));
    let mut qn: [Field2<f64>; 3] = std::array::from_fn(|_| poisoned(shape));
    let mut speed = poisoned(shape);
    let range = Loop2D::interior(&shape);
    let [a, b, c] = &mut qn;
    range.run(Advance, (0.3, [&q[0], &q[1], &q[2]], [a, b, c], &mut speed)).unwrap();
    for v in 0..3 {
        let mut want = poisoned::<f64, 2>(shape);
        for_each_in_range(&range, &shape, |g| {
            let here = nb(&q[v], g, [0, 0]);
            want.set(g, here - 0.3 * (here - nb(&q[v], g, [-1, 0]))).unwrap();
        });
        assert_bits_eq(&qn[v], &want, &format!("qn[{v}]"));
    }
    let mut want = poisoned::<f64, 2>(shape);
    for_each_in_range(&range, &shape, |g| {
        let s = [0, 1, 2].map(|v| nb(&q[v], g, [0, 0]));
        want.set(g, (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]).sqrt()).unwrap();
    });
    assert_bits_eq(&speed, &want, "speed");
    // The functor names the members by element: the launch checks and errors see `q_1`.
    let names: Vec<&str> = <Advance as Stencil<2>>::INFO.fields.iter().map(|f| f.name).collect();
    assert_eq!(names, ["q_0", "q_1", "q_2", "qn_0", "qn_1", "qn_2", "speed"]);
}

#[test]
fn a_generic_stencil_takes_an_array_of_its_element_type() {
    fn check<T: Real>(run: impl Fn(&Field1<T>, &mut Field1<T>, [T; 3])) {
        let mut rng = SplitMix64::new(93);
        let shape = Shape1::new([50]).halo(1);
        let u: Field1<T> = random(shape, &mut rng, -1.0, 1.0);
        let w = [T::lit(0.25), T::lit(0.5), T::lit(0.25)];
        let mut out = poisoned(shape);
        run(&u, &mut out, w);
        let mut want = poisoned::<T, 1>(shape);
        for_each_in_range(&Loop1D::interior(&shape), &shape, |g| {
            want.set(g, w[0] * nb(&u, g, [-1]) + w[1] * nb(&u, g, [0]) + w[2] * nb(&u, g, [1])).unwrap();
        });
        assert_bits_eq(&out, &want, std::any::type_name::<T>());
    }
    check::<f32>(|u, out, w| Loop1D::interior(u.shape()).run(Smooth::<f32>::new(), (w, u, out)).unwrap());
    check::<f64>(|u, out, w| Loop1D::interior(u.shape()).run(Smooth::<f64>::new(), (w, u, out)).unwrap());
}

/// `advance` written with one parameter per member.
#[stencil]
fn advance_flat(
    idx: Idx2,
    c: f64,
    q_0: &Field2<f64>,
    q_1: &Field2<f64>,
    q_2: &Field2<f64>,
    qn_0: &mut Field2<f64>,
    qn_1: &mut Field2<f64>,
    qn_2: &mut Field2<f64>,
    speed: &mut Field2<f64>,
) {
    qn_0[idx] = q_0[idx] - c * (q_0[idx] - q_0[idx.ix(-1, 0)]);
    qn_1[idx] = q_1[idx] - c * (q_1[idx] - q_1[idx.ix(-1, 0)]);
    qn_2[idx] = q_2[idx] - c * (q_2[idx] - q_2[idx.ix(-1, 0)]);
    speed[idx] = norm([q_0[idx], q_1[idx], q_2[idx]]);
}

/// On a GPU a group is its members: the kernel of `advance` is the kernel of `advance_flat`
/// (one parameter per member, in order), under every strategy, so nothing new runs there.
#[test]
fn a_group_prints_the_cuda_of_its_members() {
    use stencil_runtime::{cuda_kernel, Strategy};
    let shape = Shape2::new([64, 32]).halo(1);
    let range = Loop2D::interior(&shape);
    for strategy in [Strategy::PointPerThread { block: [128, 2, 1] }, Strategy::PointPerThread { block: [32, 4, 1] }] {
        let grouped = cuda_kernel::<Advance, 2>(strategy, &shape, &range).unwrap();
        let flat = cuda_kernel::<AdvanceFlat, 2>(strategy, &shape, &range).unwrap();
        assert_eq!(grouped.source, flat.source.replace("advance_flat", "advance"), "{strategy}");
    }
}

/// `advance` with the group read and written whole at a point: `q[idx]` is the array of the
/// members' values there, `qn[idx] = [..]` writes every member.
#[stencil]
fn advance_whole(idx: Idx2, c: f64, q: [&Field2<f64>; 3], qn: [&mut Field2<f64>; 3], speed: &mut Field2<f64>) {
    let here = q[idx];
    let west = q[idx.ix(-1, 0)];
    let mut next = [0.0; 3];
    for v in 0..3 {
        next[v] = here[v] - c * (here[v] - west[v]);
    }
    qn[idx] = next;
    speed[idx] = norm(q[idx]);
}

#[test]
fn a_group_at_a_point_is_the_array_of_its_members() {
    let mut rng = SplitMix64::new(94);
    let shape = Shape2::new([29, 13]).halo(1);
    let q: [Field2<f64>; 3] = std::array::from_fn(|_| random(shape, &mut rng, 0.5, 2.0));
    let range = Loop2D::interior(&shape);
    let mut by_member: [Field2<f64>; 4] = std::array::from_fn(|_| poisoned(shape));
    let mut whole: [Field2<f64>; 4] = std::array::from_fn(|_| poisoned(shape));
    let [a, b, c, s] = &mut by_member;
    range.run(Advance, (0.3, [&q[0], &q[1], &q[2]], [a, b, c], s)).unwrap();
    let [a, b, c, s] = &mut whole;
    range.run(AdvanceWhole, (0.3, [&q[0], &q[1], &q[2]], [a, b, c], s)).unwrap();
    for (k, (got, want)) in whole.iter().zip(&by_member).enumerate() {
        assert_bits_eq(got, want, &format!("field {k}"));
    }
}
