//! What the GPU suite, the kernel snapshot/compile tests and the tests of several steps per pass
//! share: the canonical stencils
//! (re-exported from `stencil_tests::canonical`) and a few more, random inputs and the strategies
//! to run.
#![allow(dead_code, unused_imports)]

use stencil_runtime::prelude::*;
use stencil_runtime::{stencil, Element, Field, Strategy};
pub use stencil_tests::canonical::*;

/// Random conserved Euler fields (density 1-2, momenta within ±0.5, energy 2.5-3.5: positive
/// pressure) from `next`, a uniform generator in `[0, 1)`.
pub fn euler_state<const D: usize>(shape: Shape<D>, mut next: impl FnMut() -> f64) -> [Field<f64, D>; 5] {
    let ranges = [(1.0, 2.0), (-0.5, 0.5), (-0.5, 0.5), (-0.5, 0.5), (2.5, 3.5)];
    ranges.map(|(lo, hi)| Field::from_fn(shape, |_| lo + (hi - lo) * next()))
}

/// The strategies every GPU test runs: each kind, with tiles that divide the sizes and tiles
/// that do not.
pub fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::PointPerThread { block: [32, 4, 2] },
        Strategy::PointPerThread { block: [128, 1, 1] },
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        Strategy::ZMarch { block_x: 16, block_y: 3, points_per_thread: 5 },
        // One point per thread, with lookahead (256 threads): no guarded lookahead load runs.
        Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 1 },
        Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        Strategy::Stream25D { tile_x: 16, tile_y: 5 },
        Strategy::SharedTile3D { tile: [32, 4, 4] },
        Strategy::SharedTile3D { tile: [8, 8, 3] },
        Strategy::Depot { block_x: 32, block_y: 4, planes: 8 },
        Strategy::Depot { block_x: 16, block_y: 3, planes: 5 },
    ]
}

/// SplitMix64: deterministic random numbers without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

pub fn random<T: Element, const D: usize>(shape: Shape<D>, rng: &mut Rng, cast: impl Fn(f64) -> T) -> Field<T, D> {
    Field::from_fn(shape, |_| cast(rng.next()))
}

/// A writer into a shared buffer: what a `tracing` subscriber wrote, for a test to read.
#[derive(Clone, Default)]
pub struct Captured(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads issued with `read_ranges_later` and samples with `sample_later` hold the values of the
/// time they were issued, bit for bit as `read_range` and `sample` on the host give them,
/// however the field is written after them and in whichever order they are waited for; a read
/// dropped unwaited leaves later reads whole; a range that does not fit the field is refused.
/// `exec` holds a 13 × 9 × 7 grid with a halo of 2 (a distributed one: any decomposition).
pub fn check_reads_later<E: stencil_runtime::Executor>(exec: &E, seed: u64) {
    use stencil_runtime::{Host, SparsePoints};
    let shape = Shape3::new([13, 9, 7]).halo(2);
    let mut rng = Rng(seed);
    let (a, b) = (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v));
    let n = shape.extent();
    let range = |begin: [usize; 3], end: [usize; 3]| Loop3D::from_bounds(n, begin, end).unwrap();
    let ranges = [
        range([2, 5, 4], [15, 6, 5]), // a line along x, the whole interior
        range([3, 2, 2], [9, 11, 9]), // a box across the grid
        range([8, 8, 8], [9, 9, 9]),  // one point
        range([4, 4, 4], [4, 5, 5]),  // empty
        range([6, 3, 2], [7, 4, 9]),  // a line along z
    ];
    let interior = Loop3D::interior(&shape);
    // Receivers spread out (read one by one) and close together (one box), one on a node.
    let spread = SparsePoints::new(&interior, [1.0; 3], &[[0.5, 0.5, 0.5], [11.5, 7.25, 5.5], [6.0, 4.0, 3.0]]);
    let close = SparsePoints::new(&interior, [1.0; 3], &[[3.0, 3.5, 2.0], [3.5, 3.5, 2.25], [4.0, 3.0, 2.0]]);
    let (spread, close) = (spread.unwrap(), close.unwrap());

    let mut f = exec.upload(&a).unwrap();
    let g = exec.upload(&b).unwrap();
    let first = exec.read_ranges_later(&f, &ranges).unwrap();
    let samples = [spread.sample_later(exec, &f).unwrap(), close.sample_later(exec, &f).unwrap()];
    exec.copy(&mut f, &g).unwrap();
    drop(exec.read_ranges_later(&f, &ranges).unwrap());
    let second = exec.read_ranges_later(&f, &ranges).unwrap();

    let expect = |h: &Field<f64, 3>| ranges.iter().map(|r| h.read_range(r).unwrap()).collect::<Vec<_>>();
    let bits =
        |v: Vec<Vec<f64>>| v.into_iter().map(|r| r.into_iter().map(f64::to_bits).collect()).collect::<Vec<Vec<u64>>>();
    assert_eq!(bits(second.wait().unwrap()), bits(expect(&b)), "the read after the copy");
    assert_eq!(bits(first.wait().unwrap()), bits(expect(&a)), "the read before the copy");
    let [s, c] = samples;
    let on_host =
        |p: &SparsePoints<3>, h| p.sample(&Host, h).unwrap().into_iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(c.wait().unwrap().into_iter().map(f64::to_bits).collect::<Vec<_>>(), on_host(&close, &a), "close");
    assert_eq!(s.wait().unwrap().into_iter().map(f64::to_bits).collect::<Vec<_>>(), on_host(&spread, &a), "spread");
    // Waiting reads nothing the executor's own read would not: the same bits now.
    let now: Vec<Vec<f64>> = ranges.iter().map(|r| exec.read_range(&f, r).unwrap()).collect();
    assert_eq!(bits(now), bits(expect(&b)));
    let foreign = Loop3D::from_parts([n[0] + 1, n[1], n[2]], [2; 3], [2; 3]);
    let refused = exec.read_ranges_later(&f, &[ranges[0], foreign]).unwrap_err().to_string();
    assert!(refused.contains("range"), "{refused}");
}

/// The sum of `u` in `f32`, at the point only (on a distributed executor each part's sum is
/// folded in the parts' order, so the order shows in the bits).
#[stencil]
pub fn mass_f32(idx: Idx3, u: &Field3<f32>, total: &mut Sum<f32>) {
    total.fold(u[idx]);
}

/// Reductions issued with `reduce_later` fold, at `fold_into`, the value `run` leaves in a
/// reducer at the identity, over the values of the time they were issued, whatever is written
/// after them, into reducers that already hold values; the launch's own reduction parameters
/// keep theirs; a wrong number of reducers is error S0114. A point-wise reduction (`Peak`) and one that reads a
/// neighbour, with three reductions of `f32` (`Stats3dF32`). `exec` holds a 13 × 9 × 7 grid with
/// a halo of 2 (a distributed one: any decomposition).
pub fn check_reduce_later<E: stencil_runtime::Executor>(exec: &E, seed: u64) {
    use stencil_runtime::Reducer;
    use stencil_tests::distributed_check::Peak;
    use stencil_tests::reducing::Stats3dF32;
    let shape = Shape3::new([13, 9, 7]).halo(2);
    let mut rng = Rng(seed);
    let (a, b) = (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| 3.0 * v));
    // f32 values of magnitudes 2^0 to 2^23: sums in another order round otherwise.
    let wide = |v: f64| (v * 2f64.powi(((v * 1e6) as i64).rem_euclid(24) as i32)) as f32;
    let (a32, b32) = (random(shape, &mut rng, wide), random(shape, &mut rng, wide));
    let range = Loop3D::interior(&shape);
    let part = Loop3D::from_bounds(shape.extent(), [3, 2, 4], [11, 7, 9]).unwrap();
    let (mut u, mut w) = (exec.upload(&a).unwrap(), exec.upload(&a32).unwrap());
    let g = (exec.upload(&b).unwrap(), exec.upload(&b32).unwrap());

    // The launch's own parameters hold values that must survive.
    let mut own = Max::<f64>::new();
    own.fold(0.125);
    let (mut s_own, mut lo_own, mut j_own) = (Sum::<f32>::new(), Min::<f32>::new(), Max::<f32>::new());
    s_own.fold(1.5f32);
    let first = exec.reduce_later(&range, Peak, None, (&u, &mut own)).unwrap();
    let first_part = exec.reduce_later(&part, Peak, None, (&u, &mut own)).unwrap();
    let stats = exec.reduce_later(&range, Stats3dF32, None, (&w, &mut s_own, &mut lo_own, &mut j_own)).unwrap();
    let mass = exec.reduce_later(&range, MassF32, None, (&w, &mut s_own)).unwrap();
    exec.copy(&mut u, &g.0).unwrap();
    exec.copy(&mut w, &g.1).unwrap();
    let second = exec.reduce_later(&range, Peak, None, (&u, &mut own)).unwrap();
    assert_eq!((own.get(), s_own.get(), lo_own.get(), j_own.get()), (0.125, 1.5, f32::INFINITY, f32::NEG_INFINITY));

    // References: `run` on the same executor over the same values (a start value folded in).
    let peak = |values: &Field<f64, 3>, range: &Loop3D| {
        let f = exec.upload(values).unwrap();
        let (mut m, mut held) = (Max::<f64>::new(), Max::<f64>::new());
        exec.run(range, Peak, (&f, &mut m)).unwrap();
        held.fold(0.5);
        held.fold(m.get());
        held.get()
    };
    let stats_ref = {
        let f = exec.upload(&a32).unwrap();
        let (mut s, mut lo, mut j) = (Sum::<f32>::new(), Min::<f32>::new(), Max::<f32>::new());
        exec.run(&range, Stats3dF32, (&f, &mut s, &mut lo, &mut j)).unwrap();
        ((-2.25f32 + s.get()).to_bits(), lo.get().to_bits(), j.get().to_bits())
    };
    let folded = |r: stencil_runtime::Reduced| {
        let mut m = Max::<f64>::new();
        m.fold(0.5);
        r.fold_into(&mut [&mut m]).unwrap();
        m.get()
    };
    assert_eq!(folded(second).to_bits(), peak(&b, &range).to_bits(), "the reduction after the copy");
    assert_eq!(folded(first).to_bits(), peak(&a, &range).to_bits(), "the reduction before the copy");
    assert_eq!(folded(first_part).to_bits(), peak(&a, &part).to_bits(), "over part of the grid");
    let (mut s, mut lo, mut j) = (Sum::<f32>::new(), Min::<f32>::new(), Max::<f32>::new());
    s.fold(-2.25f32);
    stats.fold_into(&mut [&mut s, &mut lo, &mut j]).unwrap();
    assert_eq!((s.get().to_bits(), lo.get().to_bits(), j.get().to_bits()), stats_ref, "three f32 reductions");
    let mass_ref = {
        let f = exec.upload(&a32).unwrap();
        let mut total = Sum::<f32>::new();
        exec.run(&range, MassF32, (&f, &mut total)).unwrap();
        0.75f32 + total.get()
    };
    let mut total = Sum::<f32>::new();
    total.fold(0.75);
    mass.fold_into(&mut [&mut total]).unwrap();
    assert_eq!(total.get().to_bits(), mass_ref.to_bits(), "an f32 sum");
    // A wrong count of reducers is refused.
    let again = exec.reduce_later(&range, Peak, None, (&u, &mut own)).unwrap();
    let (mut m1, mut m2) = (Max::<f64>::new(), Max::<f64>::new());
    let refused = again.fold_into(&mut [&mut m1 as &mut dyn Reducer, &mut m2]).unwrap_err();
    assert_eq!(refused.code(), "S0114", "{refused}");
    // Over an empty range the reducers keep their values; a stencil without reductions given a
    // reducer is refused, not ignored.
    let empty = Loop3D::from_bounds(shape.extent(), [4, 4, 4], [4, 9, 9]).unwrap();
    let mut m = Max::<f64>::new();
    m.fold(0.5);
    exec.reduce_later(&empty, Peak, None, (&u, &mut own)).unwrap().fold_into(&mut [&mut m]).unwrap();
    assert_eq!(m.get(), 0.5);
    let mut out = exec.alloc(shape).unwrap();
    let plain = exec.reduce_later(&range, stencil_tests::distributed_check::Damp, None, (0.5, &mut out)).unwrap();
    let refused = plain.fold_into(&mut [&mut m]).unwrap_err();
    assert_eq!(refused.code(), "S0114", "{refused}");
}

/// `u += amount` at each point of the range: a launch of it per point is what
/// `Executor::add_at` must give the bits of.
#[stencil]
pub fn add_amount<T>(idx: Idx3, amount: T, u: &mut Field3<T>) {
    u[idx] = u[idx] + amount;
}

/// `Executor::add_at` on `exec` against a launch of [`AddAmount`] per point on the host, bit for
/// bit, in f64 and f32: 300 random interior points, one in seven a repeat of an earlier one (its
/// values added in order), values over 16 orders of magnitude, and a point where the order of
/// the additions shows (1e16, then +1, +1, −1e16: 0 in order, 2 if the amounts were summed
/// first); a field with a declared periodic boundary has it filled again; the refusals add
/// nothing.
pub fn check_add_at<E: stencil_runtime::Executor>(exec: &E, seed: u64) {
    use stencil_runtime::Host;
    let shape = Shape3::new([13, 9, 7]).halo(2);
    let mut rng = Rng(seed);
    let mut points: Vec<[usize; 3]> = Vec::new();
    for k in 0..300 {
        let point = if k % 7 == 3 {
            points[((rng.next() + 1.0) * 0.5 * points.len() as f64) as usize % points.len()]
        } else {
            // Not the last x plane: its point (12, 8, 6) is the one where the order shows.
            std::array::from_fn(|a| {
                2 + ((rng.next() + 1.0) * 1000.0) as usize % (shape.interior()[a] - usize::from(a == 0))
            })
        };
        points.push(point);
    }
    let values: Vec<f64> = (0..points.len()).map(|k| rng.next() * 10f64.powi((k % 5) as i32 * 4 - 8)).collect();
    let corner = [14, 10, 8];
    let (order_points, order_values) = ([corner; 3], [1.0, 1.0, -1e16]);
    let start = random(shape, &mut rng, |v| v);
    let mut host = start.clone();
    host.set([12, 8, 6], 1e16).unwrap();
    let mut on_exec = exec.upload(&host).unwrap();
    let mut periodic = exec.upload(&host).unwrap();
    exec.declare_boundary(&mut periodic, [Some(HaloFill::Periodic), None, None]).unwrap();
    for (p, v) in points.iter().zip(&values).chain(order_points.iter().zip(&order_values)) {
        let range = Loop3D::from_bounds(shape.extent(), *p, p.map(|x| x + 1)).unwrap();
        Host.run(&range, AddAmount::<f64>::new(), (*v, &mut host)).unwrap();
    }
    exec.add_at(&mut on_exec, &points, &values).unwrap();
    exec.add_at(&mut on_exec, &order_points, &order_values).unwrap();
    let got = exec.download(&on_exec).unwrap();
    assert_eq!(got.get([12, 8, 6]).unwrap(), 0.0, "the order of the additions at one point");
    let bits = |f: &Field<f64, 3>| f.interior_view().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&host), "add_at against a launch per point");
    // The periodic boundary along x is filled again: each halo plane is the far interior one.
    exec.add_at(&mut periodic, &points, &values).unwrap();
    exec.add_at(&mut periodic, &order_points, &order_values).unwrap();
    let got = exec.download(&periodic).unwrap();
    for (j, k) in (0..9).flat_map(|j| (0..7).map(move |k| (j, k))) {
        for (halo, inner) in [(-1, 12), (13, 0), (14, 1)] {
            let (h, i) = (got.get([halo, j, k]).unwrap(), host.get([inner, j, k]).unwrap());
            assert_eq!(h.to_bits(), i.to_bits(), "periodic halo x {halo}, y {j}, z {k}");
        }
    }
    // f32.
    let start32 = random(shape, &mut rng, |v| v as f32);
    let (mut host32, mut on_exec32) = (start32.clone(), exec.upload(&start32).unwrap());
    let values32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    for (p, v) in points.iter().zip(&values32) {
        let range = Loop3D::from_bounds(shape.extent(), *p, p.map(|x| x + 1)).unwrap();
        Host.run(&range, AddAmount::<f32>::new(), (*v, &mut host32)).unwrap();
    }
    exec.add_at(&mut on_exec32, &points, &values32).unwrap();
    let got32 = exec.download(&on_exec32).unwrap();
    let bits32 = |f: &Field<f32, 3>| f.interior_view().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits32(&got32), bits32(&host32), "add_at in f32");
    // Refusals: a point in the halo, another number of values; nothing added.
    let before = bits32(&exec.download(&on_exec32).unwrap());
    let halo_point = [[3, 3, 3], [1, 4, 4]];
    let e = exec.add_at(&mut on_exec32, &halo_point, &[1.0, 1.0]).unwrap_err().to_string();
    assert!(e.contains("sparse point 1 at node [1, 4, 4]") && e.contains("interior"), "{e}");
    let e = exec.add_at(&mut on_exec32, &points, &values32[1..]).unwrap_err().to_string();
    assert!(e.contains("300 points but 299 values: give one value per point"), "{e}");
    assert_eq!(bits32(&exec.download(&on_exec32).unwrap()), before, "a refused add_at adds nothing");
}

/// The 7-point heat equation, f32 (the tests of several steps per pass and per sweep).
#[stencil]
pub fn heat7(idx: Idx3, c: f32, u: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = (1.0 - 6.0 * c) * u[idx]
        + c * (u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()])
        + c * (u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()])
        + c * (u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()]);
}

/// One-sided reach (2 back, 1 ahead on every axis), a read-only coefficient field read at an
/// offset, a branch and a clamp: f64.
#[stencil]
pub fn skew(idx: Idx3, w: f64, kappa: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    let west = u[idx.ix::<-2, 0, 0>()] + u[idx.ix::<1, 0, 0>()];
    let south = u[idx.ix::<0, -2, 0>()] + u[idx.ix::<0, 1, 0>()];
    let down = u[idx.ix::<0, 0, -2>()] + u[idx.ix::<0, 0, 1>()];
    let k = kappa[idx.ix::<1, 1, 0>()];
    let v = if k > 0.0 { u[idx] + w * k * (west + south + down - 6.0 * u[idx]) } else { 0.5 * (u[idx] + down) };
    out[idx] = v.max(-4.0).min(4.0);
}

/// The 27-point box: neighbours off every axis at once.
#[stencil]
pub fn box27(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
    let mut s = 0.0f32;
    for k in -1..=1 {
        for j in -1..=1 {
            for i in -1..=1 {
                s += u[idx.ix(i, j, k)];
            }
        }
    }
    out[idx] = s * (1.0 / 27.0);
}

/// No reach along the outer (marching) axis.
#[stencil]
pub fn plane5(idx: Idx3, c: f32, u: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = u[idx]
        + c * (u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()] + u[idx.ix::<0, -1, 0>()]
            - 4.0 * u[idx]);
}
