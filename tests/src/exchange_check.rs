//! Checks of halo exchanges between subdomains, on any executor and across MPI ranks, with
//! poisoned halos: a random global field is scattered, every subdomain halo is set to NaN, the
//! exchange runs, and every halo point must then hold the global value at its (periodically
//! wrapped) global coordinate, or, beyond a walled side, still NaN. Faces, edges and corners
//! alike. The steps are public so that the MPI test (`tests/ranks.rs`) checks its rank the same
//! way.

use crate::SplitMix64;
use stencil_runtime::{
    Decomposition, Domains, Element, ErasedField, Executor, Field, HaloExchange, HaloFill, HaloWidths, Host,
    LaunchError, Order, Shape, Subdomain,
};

/// A global field of random values in `[-1, 1)`, halo included, the same for a given seed.
pub fn random_global<const D: usize>(global: [usize; D], halo: [usize; D], order: Order, seed: u64) -> Field<f64, D> {
    let mut rng = SplitMix64::new(seed);
    Field::from_fn(Shape::new(global).halo_per_axis(halo).order(order), |_| rng.uniform(-1.0, 1.0))
}

/// Asserts that every halo point of `got` (subdomain `s`'s field after an exchange `depth`
/// layers deep) holds the value of `values` at its wrapped global coordinate, or NaN beyond a
/// wall or beyond the depth; returns the number of halo points checked. `what` names the case.
pub fn assert_exchanged<T: Element + Into<f64>, const D: usize>(
    values: &Field<T, D>,
    periodic: [bool; D],
    depth: [usize; D],
    s: &Subdomain<D>,
    got: &Field<T, D>,
    what: &str,
) -> usize {
    let global = values.shape().interior();
    let local = *got.shape();
    let mut checked = 0;
    for p in local.storage_points() {
        let l = local.to_global(p);
        if (0..D).all(|a| l[a] >= 0 && l[a] < s.extent[a] as isize) {
            continue;
        }
        let mut g = s.to_global(l);
        let mut inside = (0..D).all(|a| l[a] >= -(depth[a] as isize) && l[a] < (s.extent[a] + depth[a]) as isize);
        for a in 0..D {
            let n = global[a] as isize;
            if periodic[a] {
                g[a] = g[a].rem_euclid(n);
            } else if g[a] < 0 || g[a] >= n {
                inside = false;
            }
        }
        let v: f64 = got.get(l).expect("a point of the field").into();
        let ok = if inside { v.to_bits() == values.get(g).expect("interior").into().to_bits() } else { v.is_nan() };
        assert!(
            ok,
            "{what}: subdomain {} (coords {:?}, extent {:?}) halo point {l:?} (global {g:?}, {}) holds {v}",
            s.index,
            s.coords,
            s.extent,
            if inside { "inside: expected the global value" } else { "beyond a wall or the depth: expected NaN" }
        );
        checked += 1;
    }
    checked
}

/// The whole field after one `fill_halos`: periodic axes wrap, walled axes take `walls[a]`.
pub fn filled_whole<const D: usize>(
    values: &Field<f64, D>,
    periodic: [bool; D],
    walls: [HaloFill; D],
) -> Field<f64, D> {
    let mut whole = values.clone();
    let fills = std::array::from_fn(|a| Some(if periodic[a] { HaloFill::Periodic } else { walls[a] }));
    Host.fill_halos(&mut [(&mut whole, fills)]).expect("the whole field's halo fill");
    whole
}

/// The boundary fills a subdomain applies: `walls[a]` on walled axes, none on periodic ones.
pub fn wall_fills<const D: usize>(periodic: [bool; D], walls: [HaloFill; D]) -> [Option<HaloFill>; D] {
    std::array::from_fn(|a| (!periodic[a]).then_some(walls[a]))
}

/// Asserts that every point of `got` (subdomain `s`'s field, halo included) equals the whole
/// filled field at its global coordinate; returns the number of points compared.
pub fn assert_matches_whole<const D: usize>(
    whole: &Field<f64, D>,
    s: &Subdomain<D>,
    got: &Field<f64, D>,
    what: &str,
) -> usize {
    let local = *got.shape();
    for p in local.storage_points() {
        let l = local.to_global(p);
        let (v, want) = (got.get(l).expect("in the field"), whole.get(s.to_global(l)).expect("in the whole field"));
        assert!(
            v.to_bits() == want.to_bits(),
            "{what}: subdomain {} (coords {:?}) point {l:?} (global {:?}) holds {v}, the whole field's fill gives {want}",
            s.index,
            s.coords,
            s.to_global(l)
        );
    }
    local.points()
}

/// One decomposition to check: the global extent, process grid, periodic axes and halo of
/// the fields; the depth the second (f32) field is exchanged to (at most the halo), the boundary
/// fills of walled axes, the element order and the seed of the random values.
#[derive(Clone, Copy, Debug)]
pub struct Case<const D: usize> {
    pub global: [usize; D],
    pub grid: [usize; D],
    pub periodic: [bool; D],
    pub halo: [usize; D],
    pub depth: [usize; D],
    pub walls: [HaloFill; D],
    pub order: Order,
    pub seed: u64,
}

/// Boundary fills for the walled axes of 3D cases: one of each kind.
pub const WALLS3: [HaloFill; 3] = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];

impl Case<3> {
    /// A 3D case with the [`WALLS3`] fills.
    pub fn walled(
        global: [usize; 3],
        grid: [usize; 3],
        periodic: [bool; 3],
        halo: [usize; 3],
        depth: [usize; 3],
        order: Order,
        seed: u64,
    ) -> Self {
        Case { global, grid, periodic, halo, depth, walls: WALLS3, order, seed }
    }
}

impl<const D: usize> Case<D> {
    /// The decomposition.
    pub fn decomposition(&self) -> Result<Decomposition<D>, LaunchError> {
        Ok(Decomposition::new(self.global, self.grid, self.periodic, self.halo)?)
    }
}

/// The parts of `values` of the process's subdomains, halos poisoned, on their executors.
fn poisoned_parts<E: Executor, T: Element, const D: usize>(
    domains: &Domains<E, D>,
    values: &Field<T, D>,
    nan: T,
) -> Result<Vec<E::Field<T, D>>, LaunchError> {
    let d = domains.decomposition();
    domains
        .subdomains()
        .zip(domains.execs())
        .map(|(s, e)| {
            let part = d.scatter(values).swap_remove(s.index);
            e.upload(&poison(&s, part, nan))
        })
        .collect()
}

/// Subdomain `s`'s part with its halo set to `nan`.
fn poison<T: Element, const D: usize>(s: &Subdomain<D>, mut part: Field<T, D>, nan: T) -> Field<T, D> {
    let local = *part.shape();
    for p in local.storage_points() {
        let l = local.to_global(p);
        if (0..D).any(|a| l[a] < 0 || l[a] >= s.extent[a] as isize) {
            part.set(l, nan).expect("a point of the field");
        }
    }
    part
}

/// Checks `domains` (one process or this rank's share of MPI ranks) on `case`, with poisoned
/// halos: a [`HaloExchange`] of an f64 field (the whole halo) and an f32 field (`case.depth`)
/// in one message per side, or copied field to field in one round or axis by axis (by seed); one field's exchange then the boundary fills against one fill of
/// the whole field; the gather on rank 0; the global max and sum. Returns the points checked.
pub fn check_domains<E: Executor, const D: usize>(
    domains: &Domains<E, D>,
    case: &Case<D>,
) -> Result<usize, LaunchError> {
    let d = domains.decomposition();
    let what = format!("{case:?}, rank {} of {}", domains.world().rank(), domains.world().size());
    let values = random_global(case.global, case.halo, case.order, case.seed);
    let values32 = Field::from_fn(*values.shape(), |g| values.get(g).unwrap_or_default() as f32);
    let mut a = poisoned_parts(domains, &values, f64::NAN)?;
    let mut b = poisoned_parts(domains, &values32, f32::NAN)?;
    let mut ex = HaloExchange::new(domains);
    ex.append::<f64>("a", HaloWidths(case.halo)).append::<f32>("b", HaloWidths(case.depth));
    // By seed (mod 6): 0 and 1 copy the halos field to field where the subdomains are in this
    // process, every axis in one round; 2 and 3 the same axis by axis; 4 and 5 move them through
    // message buffers.
    ex.through_buffers(case.seed % 6 >= 4).by_axes(case.seed % 6 >= 2);
    {
        let mut fields: Vec<Vec<ErasedField<'_, D>>> =
            a.iter_mut().zip(b.iter_mut()).map(|(a, b)| vec![ErasedField::of(a), ErasedField::of(b)]).collect();
        // Odd seeds take the timed path (synchronised phases): it must fill the same halos.
        if case.seed % 2 == 1 {
            let t = ex.exchange_timed(&mut fields)?;
            let phases = [t.pack, t.transfer, t.unpack];
            assert!(phases.iter().all(|v| v.is_finite() && *v >= 0.0), "{what}: phase times {t:?}");
        } else {
            ex.exchange(&mut fields)?;
        }
    }
    let mut checked = 0;
    for ((s, e), (a, b)) in domains.subdomains().zip(domains.execs()).zip(a.iter().zip(&b)) {
        checked += assert_exchanged(&values, case.periodic, case.halo, &s, &e.download(a)?, &what);
        checked += assert_exchanged(&values32, case.periodic, case.depth, &s, &e.download(b)?, &what);
    }

    // Exchange + boundary fills = one fill of the whole field, everywhere in the part.
    let mut c = poisoned_parts(domains, &values, f64::NAN)?;
    domains.exchange(&mut c)?;
    domains.fill_boundary(&mut [(&mut c[..], wall_fills(case.periodic, case.walls))])?;
    let whole = filled_whole(&values, case.periodic, case.walls);
    for ((s, e), c) in domains.subdomains().zip(domains.execs()).zip(&c) {
        checked += assert_matches_whole(&whole, &s, &e.download(c)?, &what);
    }

    // Gather on rank 0, and the reductions.
    let like = *values.shape();
    if let Some(all) = domains.gather(&like, &a)? {
        for p in like.storage_points() {
            let g = like.to_global(p);
            let inside = (0..D).all(|x| g[x] >= 0 && g[x] < case.global[x] as isize);
            let want = if inside { values.get(g).unwrap() } else { 0.0 };
            assert_eq!(all.get(g).unwrap().to_bits(), want.to_bits(), "{what}: gathered point {g:?}");
        }
    }
    let n = d.len();
    assert_eq!(domains.max(domains.subdomains().map(|s| s.index as f64)), (n - 1) as f64, "{what}");
    assert_eq!(domains.sum(domains.subdomains().map(|_| 1.0)), n as f64, "{what}");
    let nan_last = domains.max(domains.subdomains().map(|s| if s.index == n - 1 { f64::NAN } else { 0.0 }));
    assert!(nan_last.is_nan(), "{what}: a NaN on one subdomain is the maximum");
    Ok(checked)
}
