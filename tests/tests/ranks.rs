//! One subdomain per MPI rank (feature `mpi`; CI runs it under `mpiexec -n 1`, `-n 2` and
//! `-n 4`). Every rank builds the same random global field, takes its part, poisons its halo
//! with NaN, exchanges, and checks every halo point against the global field (periodic axes
//! wrapped; beyond a wall still NaN); then exchange + boundary fills against one fill of the
//! whole field, the gather on rank 0, and the global reductions. A failed check panics, which
//! makes `mpiexec` end every rank with the message.

use mpi::topology::Communicator;
use stencil_runtime::domain::Ranks;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, HaloFill};
use stencil_tests::exchange_check::{
    assert_exchanged, assert_matches_whole, filled_whole, poisoned, random_global, wall_fills,
};

/// Exchange, boundary fills, gather and reductions for one decomposition; returns points checked.
fn check<const D: usize>(
    world: &mpi::topology::SimpleCommunicator,
    global: [usize; D],
    periodic: [bool; D],
    halo: [usize; D],
    walls: [HaloFill; D],
    order: Order,
    seed: u64,
) -> usize {
    let n = world.size() as usize;
    let d = Decomposition::auto(global, n, periodic, halo).expect("a process grid fits");
    let ranks = Ranks::new(world.duplicate(), d, Host).expect("one subdomain per rank");
    let me = ranks.subdomain();
    let values = random_global(global, halo, order, seed);
    let what = format!("rank {} of {n}, process grid {:?}", me.index, d.grid());
    let mut part = poisoned(&me, d.scatter(&values).swap_remove(me.index));
    ranks.exchange(&mut part).unwrap();
    let mut checked = assert_exchanged(&values, periodic, &me, &part, &what);

    // Exchange + boundary fills = one fill of the whole field, everywhere in the part.
    let mut part = poisoned(&me, d.scatter(&values).swap_remove(me.index));
    ranks.exchange(&mut part).unwrap();
    ranks.fill_boundary(&mut [(&mut part, wall_fills(periodic, walls))]).unwrap();
    checked += assert_matches_whole(&filled_whole(&values, periodic, walls), &me, &part, &what);

    // Gather on rank 0, and the reductions.
    let like = *values.shape();
    if let Some(all) = ranks.gather(&part, &like).unwrap() {
        for p in like.storage_points() {
            let g = like.to_global(p);
            if (0..D).all(|a| g[a] >= 0 && g[a] < global[a] as isize) {
                assert_eq!(all.get(g).unwrap().to_bits(), values.get(g).unwrap().to_bits(), "gathered point {g:?}");
            }
        }
    }
    assert_eq!(ranks.max(me.index as f64), (n - 1) as f64);
    assert_eq!(ranks.sum(1.0), n as f64);
    assert!(ranks.max(if me.index == n - 1 { f64::NAN } else { 0.0 }).is_nan(), "a NaN on one rank is the maximum");
    checked
}

fn main() {
    let universe = mpi::initialize().expect("MPI_Init failed");
    let world = universe.world();
    let n = world.size();
    let walls3 = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];
    let mut checked = 0;
    for (case, order) in [Order::Ijk, Order::Kij].into_iter().enumerate() {
        let seed = case as u64;
        checked += check(&world, [13, 9, 7], [false, true, false], [2, 1, 2], walls3, order, seed);
        checked += check(&world, [8, 11, 10], [true, true, true], [1, 2, 1], walls3, order, seed + 10);
        checked += check(
            &world,
            [12, 16],
            [false, false],
            [3, 2],
            [HaloFill::Mirror, HaloFill::ZeroGradient],
            order,
            seed + 20,
        );
    }
    checked += check(&world, [40], [true], [3], [HaloFill::ZeroGradient], Order::Ijk, 30);
    checked += check(&world, [40], [false], [2], [HaloFill::MirrorNegated], Order::Ijk, 31);
    // A grid of the wrong size is an error that says how many ranks to start.
    let d = Decomposition::new([8, 8, 8], [n as usize + 1, 1, 1], [false; 3], [1; 3]).unwrap();
    let e = Ranks::new(world.duplicate(), d, Host).err().expect("a grid of n + 1 subdomains is refused");
    assert!(e.to_string().contains(&format!("mpiexec -n {}", n + 1)), "{e}");
    let total =
        Ranks::new(world.duplicate(), Decomposition::auto([8; 3], n as usize, [false; 3], [1; 3]).unwrap(), Host)
            .unwrap()
            .sum(checked as f64);
    if world.rank() == 0 {
        println!("ranks: {n} rank(s), {total} halo and field points checked: OK");
    }
}
