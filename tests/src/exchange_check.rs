//! A check of `Domains::exchange` on any executor, with poisoned halos: a random global field is
//! scattered, every subdomain halo is set to NaN, the exchange runs, and every halo point must
//! then hold the global value at its (periodically wrapped) global coordinate, or, beyond a
//! walled side, still NaN. Faces, edges and corners alike.

use crate::SplitMix64;
use stencil_runtime::{Decomposition, Domains, Executor, Field, LaunchError, Order, Shape};

/// Runs the check for one decomposition on executors `exec_of(i)` (subdomain `i`); returns the
/// number of halo points checked.
pub fn check_exchange<E: Executor, const D: usize>(
    global: [usize; D],
    grid: [usize; D],
    periodic: [bool; D],
    halo: [usize; D],
    order: Order,
    seed: u64,
    exec_of: impl Fn(usize) -> E,
) -> Result<usize, LaunchError> {
    let decomposition = Decomposition::new(global, grid, periodic, halo)?;
    let domains = Domains::new(decomposition, (0..decomposition.len()).map(exec_of).collect())?;
    let shape = Shape::new(global).halo_per_axis(halo).order(order);
    let mut rng = SplitMix64::new(seed);
    let values = Field::<f64, D>::from_fn(shape, |_| rng.uniform(-1.0, 1.0));
    let mut parts = Vec::new();
    for (s, mut part) in decomposition.subdomains().zip(decomposition.scatter(&values)) {
        let local = *part.shape();
        for p in local.storage_points() {
            let l = local.to_global(p);
            if (0..D).any(|a| l[a] < 0 || l[a] >= s.extent[a] as isize) {
                part.set(l, f64::NAN).expect("a point of the field");
            }
        }
        parts.push(domains.exec(s.index).upload(&part)?);
    }
    domains.exchange(&mut parts)?;
    let mut checked = 0;
    for (s, part) in decomposition.subdomains().zip(&parts) {
        let got = domains.exec(s.index).download(part)?;
        let local = *got.shape();
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
                "subdomain {} (coords {:?}, extent {:?}) halo point {l:?} (global {g:?}, {}) holds {v}, process grid \
                 {grid:?}, periodic {periodic:?}, halo {halo:?}, {order:?}",
                s.index,
                s.coords,
                s.extent,
                if inside { "inside: expected the global value" } else { "beyond a wall: expected NaN" }
            );
            checked += 1;
        }
    }
    Ok(checked)
}

/// The halos of a decomposed field after `exchange` then `fill_boundary` equal the halos of the
/// whole field after one `fill_halos` (periodic axes wrap, walled axes take `walls[a]`), point
/// for point, edges and corners included; the subdomains start with NaN halos. Returns the
/// number of points compared.
#[allow(clippy::too_many_arguments)]
pub fn check_boundary<E: Executor, const D: usize>(
    global: [usize; D],
    grid: [usize; D],
    periodic: [bool; D],
    walls: [stencil_runtime::HaloFill; D],
    halo: [usize; D],
    order: Order,
    seed: u64,
    exec_of: impl Fn(usize) -> E,
) -> Result<usize, LaunchError> {
    use stencil_runtime::{HaloFill, Host};
    let decomposition = Decomposition::new(global, grid, periodic, halo)?;
    let domains = Domains::new(decomposition, (0..decomposition.len()).map(exec_of).collect())?;
    let shape = Shape::new(global).halo_per_axis(halo).order(order);
    let mut rng = SplitMix64::new(seed);
    let mut whole = Field::<f64, D>::from_fn(shape, |_| rng.uniform(-1.0, 1.0));
    let mut parts = Vec::new();
    for (s, mut part) in decomposition.subdomains().zip(decomposition.scatter(&whole)) {
        let local = *part.shape();
        for p in local.storage_points() {
            let l = local.to_global(p);
            if (0..D).any(|a| l[a] < 0 || l[a] >= s.extent[a] as isize) {
                part.set(l, f64::NAN).expect("a point of the field");
            }
        }
        parts.push(domains.exec(s.index).upload(&part)?);
    }
    let fills: [Option<HaloFill>; D] =
        std::array::from_fn(|a| Some(if periodic[a] { HaloFill::Periodic } else { walls[a] }));
    Host.fill_halos(&mut [(&mut whole, fills)])?;
    domains.exchange(&mut parts)?;
    let wall_fills = std::array::from_fn(|a| (!periodic[a]).then_some(walls[a]));
    domains.fill_boundary(&mut [(&mut parts[..], wall_fills)])?;
    let mut compared = 0;
    for (s, part) in decomposition.subdomains().zip(&parts) {
        let got = domains.exec(s.index).download(part)?;
        let local = *got.shape();
        for p in local.storage_points() {
            let l = local.to_global(p);
            let (v, want) = (got.get(l).expect("in the field"), whole.get(s.to_global(l)).expect("in the whole field"));
            assert!(
                v.to_bits() == want.to_bits(),
                "subdomain {} (coords {:?}) point {l:?} (global {:?}) holds {v}, the whole field's fill gives {want}; \
                 grid {grid:?}, periodic {periodic:?}, walls {walls:?}, halo {halo:?}, {order:?}",
                s.index,
                s.coords,
                s.to_global(l)
            );
            compared += 1;
        }
    }
    Ok(compared)
}
