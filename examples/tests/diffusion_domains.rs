//! The diffusion model over subdomains equals the single-domain run bit for bit: the one
//! [`run`] on the distributed executor (which exchanges the halos the stencil reads) against
//! [`run`] on the host, in both overlap modes, over many process grids (1×1×N, N×1×1, uneven splits, subdomains one point
//! thick, grids drawn by a small fixed-seed generator), both element orders and both precisions.
//! With the `cuda` feature, the same over two subdomains on GPUs (skipped without a GPU).

use stencil_examples::checkpoint::Plan;
use stencil_examples::diffusion::{halo, run, Real, Setup};
use stencil_runtime::{Decomposition, Distributed, Field3, Host, Order, Overlap};

/// The overlap modes of the distributed executor.
const MODES: [Overlap; 3] = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided];

/// A small xorshift generator: the same cases on every run, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

fn bits<T: Real>(f: &Field3<T>) -> Vec<u64> {
    f.as_slice().iter().map(|&v| Into::<f64>::into(v).to_bits()).collect()
}

/// A setup on an `n` grid whose Gaussian is wide enough to be far from zero at every subdomain
/// boundary of these small grids.
fn setup(n: [usize; 3], order: Order, steps: usize) -> Setup {
    Setup { n, order, sigma0: 0.25, ..Setup::cube(n[0], steps) }
}

/// Global grids and process grids: hand-picked, then drawn.
fn cases() -> Vec<([usize; 3], [usize; 3])> {
    let mut cases = vec![
        ([13, 7, 9], [3, 2, 2]),
        ([12, 10, 8], [1, 1, 4]),
        ([12, 10, 8], [4, 1, 1]),
        ([12, 10, 8], [1, 3, 1]),
        ([12, 10, 8], [2, 2, 2]),
        ([5, 6, 7], [5, 1, 1]),
        ([5, 6, 7], [1, 6, 7]),
        ([9, 9, 9], [1, 1, 1]),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..8 {
        let n = [0; 3].map(|_| rng.range(3, 17));
        let grid = n.map(|n| rng.range(1, n.min(4)));
        cases.push((n, grid));
    }
    cases
}

fn check<T: Real>(order: Order) {
    let h = halo().expect("the stencils read `f`").0;
    assert_eq!(h, [1, 1, 1], "the 7-point stencil reaches one point along each axis");
    for (case, (n, grid)) in cases().into_iter().enumerate() {
        let steps = 5 + case % 3;
        // Every overlap mode: the same bits (the step's regions run in another order).
        let setup = setup(n, order, steps);
        let mode = MODES[case % 3];
        let d = Decomposition::new(n, grid, [false; 3], h).expect("the case's grid fits");
        let exec = Distributed::host(d).unwrap().with_overlap(mode).unwrap();
        let (single, _) = run::<Host, T>(&Host, &setup, &Plan::none(), |_| {}).expect("single-domain run");
        let mut issued = Vec::new();
        let (split, _) = run::<_, T>(&exec, &setup, &Plan::none(), |s| issued.push(s)).expect("decomposed run");
        assert_eq!(issued, (1..=steps).collect::<Vec<_>>(), "after_step once per step, in order");
        assert!(
            bits(&split) == bits(&single),
            "{} {order:?}, grid {n:?} over {grid:?}, {steps} steps, {mode:?}: the decomposed run differs from the single-domain one",
            T::NAME
        );
        // The comparison means something: the field moved, and it is not zero at the cuts.
        let initial = setup.initial::<T>().unwrap();
        assert!(bits(&split) != bits(&initial), "{n:?}: the field did not change");
    }
}

#[test]
fn host_domains_equal_one_domain_f32() {
    check::<f32>(Order::Ijk);
    check::<f32>(Order::Kij);
}

#[test]
fn host_domains_equal_one_domain_f64() {
    check::<f64>(Order::Ijk);
    check::<f64>(Order::Kij);
}

#[test]
fn auto_decomposition_equals_one_domain() {
    let setup = setup([16, 12, 10], Order::Kij, 6);
    let (single, _) = run::<Host, f64>(&Host, &setup, &Plan::none(), |_| {}).expect("single-domain run");
    for domains in [2, 3, 4, 6, 8] {
        let d = setup.decompose(domains, None).expect("an automatic grid fits");
        assert_eq!(d.len(), domains);
        let (split, _) =
            run::<_, f64>(&Distributed::host(d).unwrap(), &setup, &Plan::none(), |_| {}).expect("decomposed run");
        assert!(bits(&split) == bits(&single), "auto grid {:?} differs", d.grid());
    }
}

#[test]
fn bad_decompositions_are_refused() {
    let setup = setup([4, 4, 4], Order::Ijk, 2);
    let message = |r: Result<Decomposition<3>, Box<dyn std::error::Error>>| r.expect_err("refused").to_string();
    assert!(message(setup.decompose(65, None)).contains("no process grid"), "more domains than points");
    assert!(message(setup.decompose(4, Some([2, 2, 2]))).contains("not the 4 asked for"));
    assert!(message(setup.decompose(5, Some([5, 1, 1]))).contains("does not fit"));
    assert!(message(setup.decompose(0, None)).contains("0 subdomains"));
    let h = halo().expect("the stencils read `f`").0;
    // Another global extent is refused when the fields are allocated, naming the grid.
    let other = Decomposition::new([4, 4, 5], [2, 1, 1], [false; 3], h).expect("fits");
    let e = run::<_, f32>(&Distributed::host(other).unwrap(), &setup, &Plan::none(), |_| {})
        .expect_err("another extent refused");
    assert!(e.to_string().contains("[4, 4, 5]") && e.to_string().contains("whole grid"), "{e}");
    // A periodic axis is the model's business: it asks for no periodic fill, so the wrap is left
    // alone, as on one domain (the same bits).
    let periodic = Decomposition::new([4, 4, 4], [2, 1, 1], [true, false, false], h).expect("fits");
    let (wrapped, _) = run::<_, f64>(&Distributed::host(periodic).unwrap(), &setup, &Plan::none(), |_| {}).unwrap();
    let (single, _) = run::<Host, f64>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
    assert!(bits(&wrapped) == bits(&single));
}

/// Two subdomains on GPUs (`Gpu::new(0)` and `Gpu::new(1 % count)`: two GPUs where there are,
/// else two streams of one) against the host's single-domain run.
#[cfg(feature = "cuda")]
#[test]
fn gpu_domains_equal_host_one_domain() {
    use stencil_runtime::cuda::Gpu;
    let first = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("skipping: no GPU ({e})");
            return;
        }
    };
    let count = Gpu::count().expect("a driver that opened GPU 0 counts devices");
    let second = Gpu::new(1 % count).expect("a GPU that exists opens");
    let h = halo().expect("the stencils read `f`").0;
    fn one<T: Real>(gpus: &[Gpu; 2], n: [usize; 3], grid: [usize; 3], order: Order, h: [usize; 3]) {
        let setup = setup(n, order, 7);
        let d = Decomposition::new(n, grid, [false; 3], h).expect("the grid fits");
        let domains = stencil_runtime::Domains::new(d, gpus.to_vec()).expect("one executor per subdomain");
        let (single, _) = run::<Host, T>(&Host, &setup, &Plan::none(), |_| {}).expect("host run");
        let threaded = domains.clone().with_host_threads().expect("host threads start");
        for (domains, mode) in MODES.iter().flat_map(|&m| [(&domains, m), (&threaded, m)]) {
            let exec = Distributed::new(domains.clone()).with_overlap(mode).unwrap();
            let (split, _) = run::<_, T>(&exec, &setup, &Plan::none(), |_| {}).expect("GPU subdomains run");
            let threads = if domains.host_threads() { ", host threads" } else { "" };
            assert!(
                bits(&split) == bits(&single),
                "{} {order:?}, {n:?} over {grid:?} on GPUs, {mode:?}{threads}: differs from the host single-domain run",
                T::NAME
            );
            eprintln!(
                "{} {order:?}, {n:?} over {grid:?} on 2 GPU subdomains, {mode:?}{threads}: bit-equal to the host",
                T::NAME
            );
        }
    }
    let gpus = [first, second];
    for order in [Order::Ijk, Order::Kij] {
        for grid in [[2, 1, 1], [1, 2, 1], [1, 1, 2]] {
            one::<f32>(&gpus, [37, 29, 23], grid, order, h);
            one::<f64>(&gpus, [37, 29, 23], grid, order, h);
        }
    }
}
