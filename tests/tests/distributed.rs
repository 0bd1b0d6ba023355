//! The distributed executor on host subdomains: a model written once gives the single-domain
//! bits for random process grids, uneven splits, periodic and walled axes, in every overlap mode
//! (`stencil_tests::distributed_check`); halos are exchanged exactly when a launch reads a stale
//! field at an offset; misuse is an error that says what to change.

mod common;

use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Distributed, Domains, FieldStorage, Overlap};
use stencil_tests::distributed_check::{check, interior_bits, model, Case, Corners, Damp, Star13};
use stencil_tests::SplitMix64;

#[test]
fn a_model_written_once_gives_the_single_domain_bits_on_random_process_grids() {
    let mut rng = SplitMix64::new(27);
    let mut compared = 0;
    for seed in 0..24 {
        let case = Case::random(&mut rng, seed);
        let d = case.decomposition();
        compared += check(Domains::new(d, vec![Host; d.len()]).unwrap(), &case, 3).unwrap();
    }
    assert!(compared > 20_000, "only {compared} points compared");
}

/// A boundary declared once is filled as if `fill_halos` followed every write: on one domain the
/// model gives the bits (halos included, at every probe) of the model that fills before each
/// step, and so does every distributed run above whose case declares it.
#[test]
fn a_declared_boundary_gives_the_bits_of_fills_before_each_read() {
    let mut rng = SplitMix64::new(41);
    for seed in 0..6 {
        let mut case = Case::random(&mut rng, seed);
        case.declare = false;
        let asked = model(&Host, &case, 3).unwrap();
        case.declare = true;
        let declared = model(&Host, &case, 3).unwrap();
        // The probes hold every point of `u`, halo included, where each step reads it.
        assert!(declared.probes == asked.probes, "{case:?}: the probes differ");
        assert!(interior_bits(&declared.u) == interior_bits(&asked.u), "{case:?}: the results differ");
        assert_eq!(declared.peaks, asked.peaks, "{case:?}");
    }
}

#[test]
fn a_declared_boundary_is_checked_against_the_halo_and_the_decomposition() {
    let (exec, shape) = setup([2, 1, 1], [false, true, false]);
    let mut u = exec.alloc::<f64, 3>(shape).unwrap();
    let e = exec.declare_boundary(&mut u, [Some(HaloFill::Mirror); 3]).unwrap_err().to_string();
    assert!(e.contains("declare_boundary") && e.contains("axis 1") && e.contains("periodic"), "{e}");
    let e = exec.declare_boundary(&mut u, [Some(HaloFill::Periodic), None, None]).unwrap_err().to_string();
    assert!(e.contains("axis 0") && e.contains("Decomposition with axis 0 periodic"), "{e}");
    // A halo of 2 cannot mirror a grid of 1 point along axis 2.
    let mut thin = Host.alloc::<f64, 3>(Shape3::new([4, 4, 1]).halo(2)).unwrap();
    let e = Host.declare_boundary(&mut thin, [None, None, Some(HaloFill::Mirror)]).unwrap_err().to_string();
    assert!(e.contains("axis 2"), "{e}");
    assert_eq!(thin.boundary(), None, "a refused boundary is not declared");
}

/// A field filled by `fill_halos`, written, then read across the grid's edge without a new fill
/// is refused (its halo there is stale), naming the field, stencil and axis; with the fill again,
/// or a declared boundary, it runs, and a field never filled keeps its halo (a fixed boundary).
#[test]
fn a_forgotten_fill_across_the_edge_is_an_error() {
    let (exec, shape) = setup([2, 1, 1], [false, true, false]);
    let all = Loop3D::interior(&shape);
    let walls = [Some(HaloFill::Mirror), Some(HaloFill::Periodic), Some(HaloFill::ZeroGradient)];
    let (mut u, mut w) = (exec.alloc::<f64, 3>(shape).unwrap(), exec.alloc::<f64, 3>(shape).unwrap());
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap(); // never filled: a fixed (zero) halo
    exec.run(&all, Star13, (0.1, &w, &mut u)).unwrap();
    exec.fill_halos(&mut [(&mut u, walls)]).unwrap();
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    exec.run(&all, Damp, (0.5, &mut u)).unwrap(); // written: its edge halo is stale now
    let e = exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap_err().to_string();
    assert!(e.contains("`star13`") && e.contains("field `u`") && e.contains("axis 0"), "{e}");
    assert!(e.contains("declare_boundary"), "{e}");
    // Inside the grid, away from the edge along axis 0 (the wrapped axis 1 and the rest of
    // axis 2 do not count): no read of the stale halo.
    let inner = Loop3D::from_bounds(shape.extent(), [4, 2, 2], [10, 12, 8]).unwrap();
    let e = exec.run(&inner, Star13, (0.1, &u, &mut w)).unwrap_err().to_string();
    assert!(e.contains("axis 2"), "{e}");
    let inner = Loop3D::from_bounds(shape.extent(), [4, 2, 4], [10, 12, 6]).unwrap();
    exec.run(&inner, Star13, (0.1, &u, &mut w)).unwrap();
    exec.fill_halos(&mut [(&mut u, walls)]).unwrap();
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    exec.declare_boundary(&mut u, walls).unwrap();
    exec.run(&all, Damp, (0.5, &mut u)).unwrap();
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
}

fn setup(grid: [usize; 3], periodic: [bool; 3]) -> (Distributed<Host, 3>, Shape3) {
    let d = Decomposition::new([12, 10, 8], grid, periodic, [2, 2, 2]).unwrap();
    (Distributed::host(d).unwrap(), Shape3::new([12, 10, 8]).halo(2))
}

#[test]
fn a_stale_field_read_at_an_offset_is_exchanged_once_and_only_then() {
    let (exec, shape) = setup([2, 2, 1], [false; 3]);
    let all = Loop3D::interior(&shape);
    let u0 = Field3::from_fn(shape, |[i, j, k]| (i + 3 * j + 7 * k) as f64);
    let mut u = exec.upload(&u0).unwrap();
    let (mut w, mut out) = (exec.alloc(shape).unwrap(), exec.alloc(shape).unwrap());
    // Uploaded: current, nothing to exchange.
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    assert_eq!(exec.exchanges(), 0);
    // `w` was written: reading it at an offset exchanges it, once.
    exec.run(&all, Corners, (&w, &u, &mut out)).unwrap();
    assert_eq!(exec.exchanges(), 1);
    // Read again, still current: no exchange.
    exec.run(&all, Corners, (&w, &u, &mut out)).unwrap();
    assert_eq!(exec.exchanges(), 1);
    // A point update reads and writes at offset 0: no exchange, but `u` is stale afterwards.
    exec.run(&all, Damp, (0.5, &mut u)).unwrap();
    assert_eq!(exec.exchanges(), 1);
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    assert_eq!(exec.exchanges(), 2);
    // Two stale fields of one launch travel in one exchange.
    exec.run(&all, Damp, (0.5, &mut u)).unwrap();
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    assert_eq!(exec.exchanges(), 3);
    exec.run(&all, Damp, (0.5, &mut u)).unwrap();
    exec.run(&all, Corners, (&w, &u, &mut out)).unwrap();
    assert_eq!(exec.exchanges(), 4, "w (read at offsets) is stale; u (read at 0) needs none");
    // Halo fills are done when a launch first reads the field at an offset: two fills asked,
    // then two launches, one exchange.
    exec.fill_halos(&mut [(&mut out, [Some(HaloFill::Mirror); 3])]).unwrap();
    exec.fill_halos(&mut [(&mut out, [Some(HaloFill::Mirror); 3])]).unwrap();
    assert_eq!(exec.exchanges(), 4);
    exec.run(&all, Corners, (&out, &u, &mut w)).unwrap();
    exec.run(&all, Corners, (&out, &u, &mut w)).unwrap();
    assert_eq!(exec.exchanges(), 5);
    // A fill asked for a field that is then written is done before the write (from the values
    // it was asked for), and needs no exchange when the field is current.
    exec.fill_halos(&mut [(&mut w, [Some(HaloFill::Mirror); 3])]).unwrap();
    exec.run(&all, Damp, (0.5, &mut w)).unwrap();
    assert_eq!(exec.exchanges(), 6, "w was stale: its fill exchanges it");
}

/// A model where `w` is written twice in a row (the fills the first write asked for are still
/// pending at the second) and `v` is filled along y by `fill_halos` and then written, its declared
/// boundary leaving y alone: `out` from both, halo included, and the exchanges.
fn writes_over_pending_fills<E: Executor>(exec: &E) -> Vec<u64> {
    let shape = Shape3::new([12, 10, 8]).halo(2);
    let all = Loop3D::interior(&shape);
    let u0 = Field3::from_fn(shape, |[i, j, k]| ((i * 7 + j * 3 + k) % 11) as f64 - 4.5);
    let u = exec.upload(&u0).unwrap();
    let v0 = Field3::from_fn(shape, |[i, j, k]| ((i + 5 * j + 2 * k) % 13) as f64 + 0.25);
    let mut v = exec.upload(&v0).unwrap();
    let (mut w, mut out) = (exec.alloc(shape).unwrap(), exec.alloc(shape).unwrap());
    exec.declare_boundary(&mut w, [Some(HaloFill::Mirror); 3]).unwrap();
    exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
    exec.run(&all, Star13, (0.2, &u, &mut w)).unwrap();
    exec.run(&all, Corners, (&w, &u, &mut out)).unwrap();
    let mut bits: Vec<u64> = exec.download(&out).unwrap().as_slice().iter().map(|x| x.to_bits()).collect();
    // `v`: y is filled once, from the values before the write; the write leaves y's halo alone.
    exec.declare_boundary(&mut v, [Some(HaloFill::Mirror), None, Some(HaloFill::Mirror)]).unwrap();
    exec.fill_halos(&mut [(&mut v, [None, Some(HaloFill::Mirror), None])]).unwrap();
    exec.run(&all, Damp, (-3.0, &mut v)).unwrap();
    exec.run(&all, Corners, (&v, &u, &mut out)).unwrap();
    bits.extend(exec.download(&out).unwrap().as_slice().iter().map(|x| x.to_bits()));
    bits
}

/// A launch inside the interior that writes a field whose declared boundary asks again for
/// every pending fill skips them (and their exchange): nothing reads those halos before they are
/// filled anew. Fills the write does not ask again are still done before it.
#[test]
fn a_write_that_asks_again_for_every_pending_fill_skips_them() {
    let one = writes_over_pending_fills(&Host);
    for grid in [[2, 1, 1], [1, 2, 1], [2, 2, 2]] {
        let (exec, _) = setup(grid, [false; 3]);
        let many = writes_over_pending_fills(&exec);
        assert!(many == one, "{grid:?}: the bits differ from one domain");
        // `w`: one exchange, before `Corners`, none before its second write (it would be stale
        // there); `v`: its y fill before the write (current since its upload: no exchange), and
        // one exchange before `Corners`.
        assert_eq!(exec.exchanges(), 2, "{grid:?}");
    }
}

#[test]
fn without_the_exchange_the_result_would_differ() {
    // The planted bug: the same launches on the parts' executors, with no exchange between
    // them, give other values; the distributed executor gives the single-domain ones.
    let (exec, shape) = setup([3, 1, 1], [false; 3]);
    let all = Loop3D::interior(&shape);
    let u0 = Field3::from_fn(shape, |[i, j, k]| ((i * i + 3 * j + k) % 13) as f64);
    let run = |exec: &Distributed<Host, 3>| {
        let mut u = exec.upload(&u0).unwrap();
        let (mut w, mut out) = (exec.alloc(shape).unwrap(), exec.alloc(shape).unwrap());
        exec.run(&all, Damp, (0.5, &mut u)).unwrap();
        exec.run(&all, Star13, (0.1, &u, &mut w)).unwrap();
        exec.run(&all, Corners, (&w, &u, &mut out)).unwrap();
        exec.download(&out).unwrap()
    };
    let (mut u, mut w, mut out) = (u0.clone(), Field3::zeros(shape), Field3::zeros(shape));
    all.run(Damp, (0.5, &mut u)).unwrap();
    all.run(Star13, (0.1, &u, &mut w)).unwrap();
    all.run(Corners, (&w, &u, &mut out)).unwrap();
    let got = run(&exec);
    assert_eq!(got.read_range(&all).unwrap(), out.read_range(&all).unwrap());
    // The parts by hand, without exchanges: wrong next to the cuts.
    let domains = exec.domains();
    let parts = domains.scatter(&u0).unwrap();
    let mut wrong = Vec::new();
    for (s, mut p) in domains.subdomains().zip(parts) {
        let r = Loop3D::interior(&s.shape(&shape));
        let (mut pw, mut po) = (Field3::zeros(*p.shape()), Field3::zeros(*p.shape()));
        r.run(Damp, (0.5, &mut p)).unwrap();
        r.run(Star13, (0.1, &p, &mut pw)).unwrap();
        r.run(Corners, (&pw, &p, &mut po)).unwrap();
        wrong.push(po);
    }
    let wrong = domains.gather(&shape, &wrong).unwrap().unwrap();
    assert_ne!(wrong.read_range(&all).unwrap(), out.read_range(&all).unwrap());
}

#[test]
fn one_subdomain_per_axis_split_and_wrap_give_the_single_domain_bits() {
    // Hand-picked edges of the random test: one subdomain along a periodic axis (its halo from
    // itself), thin subdomains (2 points, the halo), every axis split.
    let cases = [
        ([4, 5, 6], [1, 1, 3], [true, false, true]),
        ([9, 4, 4], [4, 1, 2], [false, true, false]),
        ([6, 6, 6], [3, 3, 3], [true, true, true]),
    ];
    for (seed, (global, grid, periodic)) in cases.into_iter().enumerate() {
        let case = Case {
            global,
            grid,
            periodic,
            walls: [HaloFill::Mirror, HaloFill::ZeroGradient, HaloFill::MirrorNegated],
            damped: ([1, 0, 2], [3, 4, 4]),
            seed: seed as u64,
            declare: seed % 2 == 1,
        };
        let d = case.decomposition();
        check(Domains::new(d, vec![Host; d.len()]).unwrap(), &case, 2).unwrap();
    }
}

#[test]
fn misuse_is_an_error_that_says_what_to_change() {
    let (exec, shape) = setup([2, 1, 1], [false, true, false]);
    let all = Loop3D::interior(&shape);
    // A field of another grid.
    let e = exec.alloc::<f64, 3>(Shape3::new([12, 10, 9]).halo(2)).unwrap_err().to_string();
    assert!(e.contains("[12, 10, 8]") && e.contains("whole grid"), "{e}");
    // A halo narrower than the reach.
    let thin = Shape3::new([12, 10, 8]).halo(1);
    let (u, mut w) = (exec.alloc::<f64, 3>(thin).unwrap(), exec.alloc::<f64, 3>(thin).unwrap());
    let inner = all.shrink([1, 1, 1]);
    let inner =
        Loop3D::from_bounds(thin.extent(), inner.begin().map(|b| b - 1), inner.end().map(|e| e as usize - 1)).unwrap();
    let e = exec.run(&inner, Star13, (0.1, &u, &mut w)).unwrap_err().to_string();
    assert!(e.contains("`star13`") && e.contains("`u`") && e.contains("axis 0") && e.contains("at least 2"), "{e}");
    // A field of another distributed executor.
    let (other, _) = setup([2, 1, 1], [false, true, false]);
    let foreign = other.alloc::<f64, 3>(shape).unwrap();
    let mut w = exec.alloc::<f64, 3>(shape).unwrap();
    let e = exec.run(&all, Star13, (0.1, &foreign, &mut w)).unwrap_err().to_string();
    assert!(e.contains("field `u`") && e.contains("not a field of this distributed executor"), "{e}");
    // Periodic along a split axis the decomposition does not wrap; a wall along one it wraps.
    let e = exec.fill_halos(&mut [(&mut w, [Some(HaloFill::Periodic), None, None])]).unwrap_err().to_string();
    assert!(e.contains("axis 0") && e.contains("periodic"), "{e}");
    let e = exec.fill_halos(&mut [(&mut w, [None, Some(HaloFill::Mirror), None])]).unwrap_err().to_string();
    assert!(e.contains("axis 1") && e.contains("makes periodic"), "{e}");
    // A subdomain thinner than the halo.
    let d = Decomposition::new([12, 10, 8], [12, 1, 1], [false; 3], [1, 1, 1]).unwrap();
    let e = Distributed::host(d).unwrap().alloc::<f64, 3>(shape).unwrap_err().to_string();
    assert!(e.contains("thinner than the halo") && e.contains("fewer subdomains"), "{e}");
    // A field of another dimension.
    let e = exec.alloc::<f64, 2>(Shape2::new([12, 10])).unwrap_err().to_string();
    assert!(e.contains("2D field") && e.contains("3D grid"), "{e}");
}

#[stencil]
fn blur1(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = 0.25 * u[idx.ix::<-1>()] + 0.5 * u[idx] + 0.25 * u[idx.ix::<1>()];
}

#[test]
fn copies_carry_pending_fills_and_changed_parts_are_stale() {
    // A 1D periodic line over three subdomains: `copy` takes the source's halo state (its fill
    // asked for and not done yet), `parts_mut` makes a field stale, and both give the
    // single-domain bits.
    let shape = Shape1::new([17]).halo(1);
    let u0 = Field1::from_fn(shape, |[i]| ((i * 7) % 5) as f64);
    let exec = Distributed::host(Decomposition::new([17], [3], [true], [1]).unwrap()).unwrap();
    let all = Loop1D::interior(&shape);
    let periodic = [Some(HaloFill::Periodic)];
    // One domain.
    let (mut u, mut out) = (u0.clone(), Field1::zeros(shape));
    u.fill_halo(0, HaloFill::Periodic).unwrap();
    let mut copy = Field1::zeros(shape);
    Host.copy(&mut copy, &u).unwrap();
    all.run(Blur1, (&copy, &mut out)).unwrap();
    // Distributed: the fill is pending when the copy is made.
    let mut du = exec.upload(&u0).unwrap();
    exec.fill_halos(&mut [(&mut du, periodic)]).unwrap();
    let mut dcopy = exec.alloc(shape).unwrap();
    exec.copy(&mut dcopy, &du).unwrap();
    let mut dout = exec.alloc(shape).unwrap();
    exec.run(&all, Blur1, (&dcopy, &mut dout)).unwrap();
    assert_eq!(exec.download(&dout).unwrap().read_range(&all).unwrap(), out.read_range(&all).unwrap());
    // Parts changed by hand are stale: the next reader exchanges them.
    let before = exec.exchanges();
    for p in dcopy.parts_mut() {
        p.as_mut_slice().iter_mut().for_each(|v| *v *= 2.0);
    }
    exec.run(&all, Blur1, (&dcopy, &mut dout)).unwrap();
    assert_eq!(exec.exchanges(), before + 1, "parts_mut makes the field stale");
    // The downloaded halo is the one filled on one domain (the periodic wrap).
    let got = exec.download(&du).unwrap();
    assert_eq!(got.read_range(&Loop1D::whole(&shape)).unwrap(), u.read_range(&Loop1D::whole(&shape)).unwrap());
    // The interior on rank 0 only, halo zero.
    let gathered = exec.gather(&du).unwrap().expect("one process is rank 0");
    assert_eq!(gathered.read_range(&all).unwrap(), u.read_range(&all).unwrap());
    assert_eq!(gathered.get([-1]), Some(0.0));
    // A field that declares its boundary gets it filled again after its parts are changed by
    // hand: here the first point of each part's interior, so the wrap's halo changes too.
    exec.declare_boundary(&mut du, periodic).unwrap();
    let mut changed = exec.download(&du).unwrap();
    for p in du.parts_mut() {
        let v = p.get([0]).unwrap();
        p.set([0], v + 100.0).unwrap();
    }
    for s in exec.domains().subdomains() {
        let g = s.offset[0] as isize;
        changed.set([g], changed.get([g]).unwrap() + 100.0).unwrap();
    }
    changed.fill_halo(0, HaloFill::Periodic).unwrap();
    let whole = Loop1D::whole(&shape);
    assert_eq!(exec.download(&du).unwrap().read_range(&whole).unwrap(), changed.read_range(&whole).unwrap());
}

#[test]
fn two_divided_overlap_moves_the_exchange_into_the_writer() {
    // Damp writes u, Star13 reads it 2 deep. The first time, Star13 exchanges u; from then on
    // Damp computes the slabs next to the cuts first and exchanges u itself while its inner
    // region runs, and Star13 finds u current. The bits are those of one domain.
    let (exec, shape) = setup([2, 1, 2], [false; 3]);
    let exec = exec.with_overlap(Overlap::TwoDivided).unwrap();
    let all = Loop3D::interior(&shape);
    let u0 = Field3::from_fn(shape, |[i, j, k]| ((i * 5 + j * 3 + k) % 11) as f64);
    let (mut u, mut w) = (exec.upload(&u0).unwrap(), exec.alloc(shape).unwrap());
    let (mut hu, mut hw) = (u0.clone(), Field3::zeros(shape));
    for step in 0..4 {
        exec.run(&all, Damp, (0.9, &mut u)).unwrap();
        let after_damp = exec.exchanges();
        exec.run(&all, Star13, (0.05, &u, &mut w)).unwrap();
        let after_star = exec.exchanges();
        match step {
            0 => assert_eq!((after_damp, after_star), (0, 1), "learning: the reader exchanges"),
            s => assert_eq!((after_damp, after_star), (s + 1, s + 1), "step {s}: the writer exchanges"),
        }
        all.run(Damp, (0.9, &mut hu)).unwrap();
        all.run(Star13, (0.05, &hu, &mut hw)).unwrap();
        exec.copy(&mut u, &w).unwrap();
        hu.as_mut_slice().copy_from_slice(hw.as_slice());
    }
    assert_eq!(exec.download(&w).unwrap().read_range(&all).unwrap(), hw.read_range(&all).unwrap());
}

/// A wave step over any range: reads `u` 1 point away along every axis and at the diagonal
/// neighbours in the xy plane (corners of the halos).
#[stencil]
fn wave_corners(idx: Idx3, c: f64, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
    let star = u[idx.ix::<1, 0, 0>()]
        + u[idx.ix::<-1, 0, 0>()]
        + u[idx.ix::<0, 1, 0>()]
        + u[idx.ix::<0, -1, 0>()]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    let diagonal =
        u[idx.ix::<1, 1, 0>()] + u[idx.ix::<-1, -1, 0>()] - u[idx.ix::<1, -1, 0>()] - u[idx.ix::<-1, 1, 0>()];
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * (star - 6.0 * u[idx]) + 0.25 * c * diagonal;
}

/// `steps` wave steps over `range` on `exec`, every field (halo included) read back.
fn wave_steps<E: Executor>(exec: &E, f: [&Field3<f64>; 2], range: &Loop3D, steps: usize) -> Vec<u64> {
    let (mut u, mut up) = (exec.upload(f[0]).unwrap(), exec.upload(f[1]).unwrap());
    let mut un = exec.alloc::<f64, 3>(*f[0].shape()).unwrap();
    for _ in 0..steps {
        exec.run(range, WaveCorners, (0.05, &u, &up, &mut un)).unwrap();
        std::mem::swap(&mut up, &mut u);
        std::mem::swap(&mut u, &mut un);
    }
    let whole = Loop3D::whole(f[0].shape());
    [u, up].iter().flat_map(|x| exec.read_range(x, &whole).unwrap()).map(f64::to_bits).collect()
}

/// A launch may write the halo beyond the grid's edge (a range reaching into it); where the grid
/// is cut along another axis, the neighbour's corner of that halo must travel too, or the next
/// step reads a stale value there (it did: 40–240 points wrong after 2–4 steps).
#[test]
fn ranges_reaching_into_the_halo_beyond_the_edge_give_the_single_domain_bits() {
    let mut rng = SplitMix64::new(0xed9e);
    let shape = Shape3::new([12, 11, 10]).halo(2);
    let f: Vec<Field3<f64>> = (0..2).map(|_| Field3::from_fn(shape, |_| rng.uniform(-1.0, 1.0))).collect();
    let n = shape.extent();
    let mut compared = 0;
    for case in 0..12 {
        // Ranges from 1 into the halo to 1 inside the interior, per axis and end.
        let begin: [usize; 3] = std::array::from_fn(|_| rng.int(1, 3) as usize);
        let end: [usize; 3] = std::array::from_fn(|a| n[a] - rng.int(1, 3) as usize);
        let range = Loop3D::from_bounds(n, begin, end).unwrap();
        let reference = wave_steps(&Host, [&f[0], &f[1]], &range, 4);
        let grid = [[2, 1, 1], [1, 2, 1], [1, 1, 2], [2, 2, 1], [1, 2, 2], [2, 2, 2]][case % 6];
        let modes = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided, Overlap::Auto];
        let overlap = modes[case % modes.len()];
        let d = Decomposition::new(shape.interior(), grid, [false; 3], [2; 3]).unwrap();
        let exec = Distributed::host(d).unwrap().with_overlap(overlap).unwrap();
        let split = wave_steps(&exec, [&f[0], &f[1]], &range, 4);
        let wrong = reference.iter().zip(&split).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "range {begin:?}..{end:?}, grid {grid:?}, {overlap:?}: {wrong} points differ");
        compared += split.len();
    }
    assert!(compared > 0);
}

/// `Overlap::Auto` tries both modes on a launch site, then keeps one; through its trials and
/// after, the results are the single-domain bits and the halos move as often as without overlap.
#[test]
fn auto_overlap_chooses_per_site_and_changes_no_bit_and_no_exchange() {
    let mut rng = SplitMix64::new(0xa070);
    let shape = Shape3::new([16, 14, 12]).halo(2);
    let f: Vec<Field3<f64>> = (0..2).map(|_| Field3::from_fn(shape, |_| rng.uniform(-1.0, 1.0))).collect();
    let range = Loop3D::interior(&shape);
    let reference = wave_steps(&Host, [&f[0], &f[1]], &range, 12);
    let d = Decomposition::new(shape.interior(), [2, 2, 1], [false; 3], [2; 3]).unwrap();
    let plain = Distributed::host(d).unwrap();
    let auto = Distributed::host(d).unwrap().with_overlap(Overlap::Auto).unwrap();
    assert_eq!(wave_steps(&plain, [&f[0], &f[1]], &range, 12), reference);
    assert_eq!(wave_steps(&auto, [&f[0], &f[1]], &range, 12), reference);
    assert_eq!(auto.exchanges(), plain.exchanges(), "the trials moved halos a different number of times");
    let chosen = auto.chosen_overlaps();
    assert_eq!(chosen.len(), 1, "one launch site (the stencil over the interior) decided: {chosen:?}");
    assert!(matches!(chosen[0], Overlap::None | Overlap::OneDivided), "{chosen:?}");
    assert!(plain.chosen_overlaps().is_empty(), "only Auto chooses");
}

/// Reads issued without waiting, over parts on a process grid that cuts every axis (each range
/// gathered from the parts that own it), hold the values of their time, as on one domain.
#[test]
fn reads_issued_later_gather_the_values_of_their_time_from_the_parts() {
    for (seed, grid) in [[2, 2, 2], [3, 1, 2], [1, 4, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [false, true, false], [2, 2, 2]).unwrap();
        common::check_reads_later(&Distributed::new(Domains::new(d, vec![Host; d.len()]).unwrap()), seed as u64);
    }
}

/// Values added at many points over parts on a process grid that cuts every axis (each point
/// added by the part that owns it, the halos exchanged again before a read) give the bits of a
/// launch per point on one domain.
#[test]
fn values_added_at_points_land_in_the_parts_that_own_them() {
    for (seed, grid) in [[2, 2, 2], [3, 1, 2], [1, 4, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [true, false, false], [2, 2, 2]).unwrap();
        common::check_add_at(&Distributed::new(Domains::new(d, vec![Host; d.len()]).unwrap()), seed as u64);
    }
}

/// Reductions issued without waiting over host parts fold, part by part, what a launch folds.
#[test]
fn reductions_issued_later_fold_what_a_launch_folds_over_the_parts() {
    for (seed, grid) in [[2, 2, 2], [3, 1, 2], [1, 4, 1]].into_iter().enumerate() {
        let d = Decomposition::new([13, 9, 7], grid, [false, true, false], [2, 2, 2]).unwrap();
        common::check_reduce_later(&Distributed::new(Domains::new(d, vec![Host; d.len()]).unwrap()), seed as u64);
    }
}

/// A fork of three handles on host subdomains (launches that need an exchange run on the parts'
/// own executors, one whose halos another handle's exchange brought up to date on its side
/// handles) gives one domain's bits, in every overlap mode.
#[test]
fn a_fork_of_handles_gives_the_single_domain_bits() {
    use stencil_tests::distributed_check::forked;
    let global = [20, 14, 9];
    let one = forked(&Host, global, 1, 5, 3).unwrap();
    for grid in [[1, 1, 1], [2, 1, 1], [2, 2, 1], [1, 2, 3], [3, 2, 2]] {
        let d = Decomposition::new(global, grid, [true; 3], [2; 3]).unwrap();
        for overlap in [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided, Overlap::Auto] {
            let exec = Distributed::host(d).unwrap().with_overlap(overlap).unwrap();
            let many = forked(&exec, global, 1, 5, 3).unwrap();
            assert!(many == one, "grid {grid:?}, {overlap:?}: the forked run differs from one domain");
        }
    }
}

/// A handle of a fork kept and used after its `fork_join` returned is an error (its side handles
/// are no longer joined).
#[test]
fn a_handle_used_after_its_fork_is_an_error() {
    let (exec, shape) = setup([2, 1, 1], [true; 3]);
    let (u, mut w) = (exec.upload(&Field3::filled(shape, 1.0)).unwrap(), exec.alloc(shape).unwrap());
    let kept = exec.fork_join(2, |h| Ok(h[1].clone())).unwrap();
    let err = kept.run(&Loop3D::interior(&shape), Star13, (0.1, &u, &mut w)).unwrap_err().to_string();
    assert!(err.contains("after its fork_join returned"), "{err}");
    let err = kept.download(&u).unwrap_err().to_string();
    assert!(err.contains("after its fork_join returned"), "{err}");
}
