//! Checks of halo exchanges between subdomains, on any executor and across MPI ranks, with
//! poisoned halos: a random global field is scattered, every subdomain halo is set to NaN, the
//! exchange runs, and every halo point must then hold the global value at its (periodically
//! wrapped) global coordinate, or, beyond a walled side, still NaN. Faces, edges and corners
//! alike. The steps are public so that the MPI test (`tests/ranks.rs`) checks its rank the same
//! way.

use crate::SplitMix64;
use stencil_runtime::{Decomposition, Domains, Executor, Field, HaloFill, Host, LaunchError, Order, Shape, Subdomain};

/// A global field of random values in `[-1, 1)`, halo included, the same for a given seed.
pub fn random_global<const D: usize>(global: [usize; D], halo: [usize; D], order: Order, seed: u64) -> Field<f64, D> {
    let mut rng = SplitMix64::new(seed);
    Field::from_fn(Shape::new(global).halo_per_axis(halo).order(order), |_| rng.uniform(-1.0, 1.0))
}

/// Subdomain `s`'s part (as `Decomposition::scatter` cuts it) with its halo set to NaN.
pub fn poisoned<const D: usize>(s: &Subdomain<D>, mut part: Field<f64, D>) -> Field<f64, D> {
    let local = *part.shape();
    for p in local.storage_points() {
        let l = local.to_global(p);
        if (0..D).any(|a| l[a] < 0 || l[a] >= s.extent[a] as isize) {
            part.set(l, f64::NAN).expect("a point of the field");
        }
    }
    part
}

/// Asserts that every halo point of `got` (subdomain `s`'s field after an exchange) holds the
/// value of `values` at its wrapped global coordinate, or NaN beyond a wall; returns the number
/// of halo points checked. `what` names the case in a failure.
pub fn assert_exchanged<const D: usize>(
    values: &Field<f64, D>,
    periodic: [bool; D],
    s: &Subdomain<D>,
    got: &Field<f64, D>,
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
        let mut inside = true;
        for a in 0..D {
            let n = global[a] as isize;
            if periodic[a] {
                g[a] = g[a].rem_euclid(n);
            } else if g[a] < 0 || g[a] >= n {
                inside = false;
            }
        }
        let v = got.get(l).expect("a point of the field");
        let ok = if inside { v.to_bits() == values.get(g).expect("interior").to_bits() } else { v.is_nan() };
        assert!(
            ok,
            "{what}: subdomain {} (coords {:?}, extent {:?}) halo point {l:?} (global {g:?}, {}) holds {v}",
            s.index,
            s.coords,
            s.extent,
            if inside { "inside: expected the global value" } else { "beyond a wall: expected NaN" }
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

/// `Domains::exchange` for one decomposition on executors `exec_of(i)` (subdomain `i`); returns
/// the number of halo points checked.
pub fn check_exchange<E: Executor, const D: usize>(
    global: [usize; D],
    grid: [usize; D],
    periodic: [bool; D],
    halo: [usize; D],
    order: Order,
    seed: u64,
    exec_of: impl Fn(usize) -> E,
) -> Result<usize, LaunchError> {
    let d = Decomposition::new(global, grid, periodic, halo)?;
    let domains = Domains::new(d, (0..d.len()).map(exec_of).collect())?;
    let values = random_global(global, halo, order, seed);
    let mut parts = d
        .subdomains()
        .zip(d.scatter(&values))
        .map(|(s, part)| domains.exec(s.index).upload(&poisoned(&s, part)))
        .collect::<Result<Vec<_>, _>>()?;
    domains.exchange(&mut parts)?;
    let what = format!("process grid {grid:?}, periodic {periodic:?}, halo {halo:?}, {order:?}");
    let mut checked = 0;
    for (s, part) in d.subdomains().zip(&parts) {
        checked += assert_exchanged(&values, periodic, &s, &domains.exec(s.index).download(part)?, &what);
    }
    Ok(checked)
}

/// The halos of a decomposed field after `exchange` then `fill_boundary` equal those of the
/// whole field after one `fill_halos`, point for point, edges and corners included; the
/// subdomains start with NaN halos. Returns the number of points compared.
#[allow(clippy::too_many_arguments)]
pub fn check_boundary<E: Executor, const D: usize>(
    global: [usize; D],
    grid: [usize; D],
    periodic: [bool; D],
    walls: [HaloFill; D],
    halo: [usize; D],
    order: Order,
    seed: u64,
    exec_of: impl Fn(usize) -> E,
) -> Result<usize, LaunchError> {
    let d = Decomposition::new(global, grid, periodic, halo)?;
    let domains = Domains::new(d, (0..d.len()).map(exec_of).collect())?;
    let values = random_global(global, halo, order, seed);
    let mut parts = d
        .subdomains()
        .zip(d.scatter(&values))
        .map(|(s, part)| domains.exec(s.index).upload(&poisoned(&s, part)))
        .collect::<Result<Vec<_>, _>>()?;
    domains.exchange(&mut parts)?;
    domains.fill_boundary(&mut [(&mut parts[..], wall_fills(periodic, walls))])?;
    let whole = filled_whole(&values, periodic, walls);
    let what = format!("grid {grid:?}, periodic {periodic:?}, walls {walls:?}, halo {halo:?}, {order:?}");
    let mut compared = 0;
    for (s, part) in d.subdomains().zip(&parts) {
        compared += assert_matches_whole(&whole, &s, &domains.exec(s.index).download(part)?, &what);
    }
    Ok(compared)
}
