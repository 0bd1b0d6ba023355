//! Subdomains over MPI ranks (feature `mpi`; CI runs it under `mpiexec -n 1`, `-n 2` and
//! `-n 4`): one subdomain per rank, and two per rank (messages both within the process and
//! between ranks; the subdomains numbered in blocks of two, `Decomposition::in_blocks_of`). Every rank builds the same random global fields, takes its parts, poisons
//! their halos with NaN and runs the checks of `stencil_tests::exchange_check::check_domains`:
//! an f64 and an f32 field exchanged in one message per side (every face, edge and corner, and
//! NaN beyond a wall or the depth), exchange + boundary fills against one fill of the whole
//! field, the gather on rank 0 and the global reductions; and held scalars
//! (`stencil_tests::held_check`), whose reductions are folded between the ranks. A failed check
//! panics, which makes `mpiexec` end every rank with the message.

use mpi::topology::Communicator;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains, HaloFill, PlacementError, World};
use stencil_tests::distributed_check;
use stencil_tests::exchange_check::{check_domains, Case};
use stencil_tests::held_check::check_held;

/// Checks `case` with the grid `Decomposition::auto` picks for `per_rank` subdomains per rank,
/// on host subdomains and, with the cuda feature and a GPU, on GPU subdomains (subdomain `i` on
/// GPU `i % count`; messages between ranks staged through pinned host buffers, and with the
/// nccl feature also through NCCL where every subdomain has a GPU of its own).
#[allow(clippy::too_many_arguments)]
fn check<const D: usize>(
    world: &mpi::topology::SimpleCommunicator,
    per_rank: usize,
    global: [usize; D],
    periodic: [bool; D],
    halo: [usize; D],
    depth: [usize; D],
    walls: [HaloFill; D],
    order: Order,
    seed: u64,
) -> usize {
    let n = world.size() as usize * per_rank;
    // Two subdomains per rank: numbered in blocks of two (each rank a compact pair).
    let d = Decomposition::auto(global, n, periodic, halo).expect("a process grid fits").in_blocks_of(per_rank);
    let case = Case { global, grid: d.grid(), periodic, halo, depth, walls, order, seed };
    let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host; per_rank]).expect("domains");
    #[allow(unused_mut)]
    let mut checked = check_domains(&domains, &case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    #[cfg(feature = "cuda")]
    if let Ok(count @ 1..) = stencil_runtime::cuda::Gpu::count() {
        let first = world.rank() as usize * per_rank;
        let gpus = (first..first + per_rank).map(|i| stencil_runtime::cuda::Gpu::new(i % count).unwrap()).collect();
        let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, gpus).expect("domains");
        checked += check_domains(&domains, &case).unwrap_or_else(|e| panic!("{case:?} on GPUs: {e}"));
        // NCCL where every subdomain has a GPU of its own (else refused: checked), between ranks
        // and, asked for explicitly, in one process too (halos then stay peer copies).
        #[cfg(feature = "nccl")]
        {
            use stencil_runtime::Transport;
            let nccl = domains.with_transport(Transport::Nccl);
            if n <= count {
                let domains = nccl.unwrap_or_else(|e| panic!("NCCL transport: {e}"));
                assert_eq!(domains.transport(), Transport::Nccl);
                checked += check_domains(&domains, &case).unwrap_or_else(|e| panic!("{case:?} over NCCL: {e}"));
            } else {
                let e = nccl.expect_err("NCCL with two subdomains on one GPU");
                assert!(e.to_string().contains("one GPU per subdomain"), "{e}");
            }
        }
    }
    checked
}

fn main() {
    let universe = mpi::initialize().expect("MPI_Init failed");
    let world = universe.world();
    World::mpi(world.duplicate()).abort_on_panic();
    let n = world.size();
    let walls3 = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];
    let mut checked = 0;
    for per_rank in [1, 2] {
        for (case, order) in [Order::Ijk, Order::Kij].into_iter().enumerate() {
            let seed = case as u64 + 100 * per_rank as u64;
            let w = &world;
            checked += check(w, per_rank, [13, 9, 7], [false, true, false], [2, 1, 2], [1, 1, 2], walls3, order, seed);
            checked +=
                check(w, per_rank, [8, 11, 10], [true, true, true], [1, 2, 1], [1, 0, 1], walls3, order, seed + 10);
            let walls2 = [HaloFill::Mirror, HaloFill::ZeroGradient];
            checked += check(w, per_rank, [12, 16], [false, false], [3, 2], [3, 1], walls2, order, seed + 20);
        }
        let zg = [HaloFill::ZeroGradient];
        // 1D: long enough for a halo of 3 in every one of the subdomains (8 ranks x 2 included).
        let long = [40.max(4 * n as usize * per_rank + 3)];
        checked += check(&world, per_rank, long, [true], [3], [2], zg, Order::Ijk, 30);
        checked += check(&world, per_rank, long, [false], [2], [2], [HaloFill::MirrorNegated], Order::Ijk, 31);
    }
    // A grid the ranks cannot share evenly is an error that says what to start.
    let d = Decomposition::new([16, 8, 8], [n as usize + 1, 1, 1], [false; 3], [1; 3]).unwrap();
    if n > 1 {
        let e = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host]).expect_err("refused");
        assert!(e.to_string().contains("cannot share evenly"), "{e}");
    }
    let d = Decomposition::auto([8; 3], n as usize, [false; 3], [1; 3]).unwrap();
    let e = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host, Host]).expect_err("refused");
    assert!(e.to_string().contains("2 executors on rank"), "{e}");
    // The distributed executor over the ranks: a model written once gives one host domain's
    // bits (downloads on every rank, reductions over every rank), in both overlap modes.
    for (per_rank, seed) in [(1, 40), (2, 41)] {
        let global = [9 + n as usize, 8, 7];
        let d = Decomposition::auto(global, n as usize * per_rank, [true, false, false], [2; 3])
            .expect("fits")
            .in_blocks_of(per_rank);
        let walls = [HaloFill::Mirror, HaloFill::ZeroGradient, HaloFill::MirrorNegated];
        let case = distributed_check::Case {
            global,
            grid: d.grid(),
            periodic: d.periodic(),
            walls,
            damped: ([1, 2, 0], [6, 7, 4]),
            seed,
            declare: seed % 2 == 1,
        };
        let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host; per_rank]).expect("domains");
        checked += distributed_check::check(domains, &case, 3).unwrap_or_else(|e| panic!("distributed: {e}"));
        #[cfg(feature = "cuda")]
        if let Ok(count @ 1..) = stencil_runtime::cuda::Gpu::count() {
            let first = world.rank() as usize * per_rank;
            let gpus = (first..first + per_rank).map(|i| stencil_runtime::cuda::Gpu::new(i % count).unwrap()).collect();
            let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, gpus).expect("domains");
            checked +=
                distributed_check::check(domains, &case, 3).unwrap_or_else(|e| panic!("distributed on GPUs: {e}"));
        }
    }
    // Held scalars over the ranks (`stencil_tests::held_check`): reductions into them folded
    // between the ranks on the host, and on GPUs with NCCL (one GPU per subdomain, in one
    // process too) minima and maxima folded on the streams.
    for (per_rank, seed) in [(1, 50), (2, 51)] {
        let d = Decomposition::auto([12, 10, 8], n as usize * per_rank, [false; 3], [1; 3]).expect("fits");
        let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host; per_rank]).expect("domains");
        check_held(&stencil_runtime::Distributed::new(domains), seed);
        #[cfg(feature = "cuda")]
        if let Ok(count @ 1..) = stencil_runtime::cuda::Gpu::count() {
            let first = world.rank() as usize * per_rank;
            let gpus: Vec<_> =
                (first..first + per_rank).map(|i| stencil_runtime::cuda::Gpu::new(i % count).unwrap()).collect();
            let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, gpus.clone()).expect("domains");
            check_held(&stencil_runtime::Distributed::new(domains), seed + 10);
            #[cfg(feature = "nccl")]
            if d.len() <= count {
                use stencil_runtime::Transport;
                let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, gpus).expect("domains");
                let domains = domains.with_transport(Transport::Nccl).unwrap_or_else(|e| panic!("NCCL: {e}"));
                assert_eq!(domains.transport(), Transport::Nccl);
                check_held(&stencil_runtime::Distributed::new(domains), seed + 20);
            }
        }
    }
    // A fork of three handles over the ranks (exchanges between ranks for some handles, halos
    // brought up to date by another handle's exchange for one): one host domain's bits.
    for per_rank in [1, 2] {
        let global = [10 + n as usize, 9, 8];
        let d = Decomposition::auto(global, n as usize * per_rank, [true; 3], [2; 3]).expect("fits");
        let one = distributed_check::forked(&Host, global, 0, 42, 3).expect("one domain");
        let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![Host; per_rank]).expect("domains");
        let many = distributed_check::forked(&stencil_runtime::Distributed::new(domains), global, 1, 42, 3)
            .unwrap_or_else(|e| panic!("forked over ranks: {e}"));
        assert!(many == one, "{per_rank} subdomain(s) per rank: the forked run differs from one domain");
        checked += many.len();
    }
    // GPUs by node-local rank: the ranks split into two simulated nodes, in blocks (0, 1 | 2, 3)
    // and round robin (0, 2 | 1, 3); each node's processes take its GPUs in turn, so no two
    // processes of a node share one (the global rank modulo the GPU count would put ranks 0 and
    // 2 of a round-robin node on the same GPU).
    if n % 2 == 0 {
        use mpi::topology::Color;
        let r = world.rank() as usize;
        for (layout, color) in [("blocks", r / (n as usize / 2)), ("round robin", r % 2)] {
            let node = world.split_by_color(Color::with_value(color as i32)).expect("a node communicator");
            let local = stencil_runtime::domain::node_rank_of(&node);
            let gpus_per_node = n as usize / 2;
            let mine = local.gpus(1, gpus_per_node, false).unwrap_or_else(|e| panic!("{layout}: {e}"));
            let all = World::mpi(node.duplicate()).gather_bytes(&[mine[0] as u8]);
            if let Some(all) = all {
                let mut got: Vec<u8> = all.into_iter().flatten().collect();
                got.sort_unstable();
                assert_eq!(
                    got,
                    (0..gpus_per_node as u8).collect::<Vec<_>>(),
                    "{layout}: one GPU per process of a node"
                );
            }
            // Two subdomains per process on a node with one GPU per process: a process whose two
            // would go past the node's GPUs is refused unless sharing is allowed.
            let two = local.gpus(2, gpus_per_node, false);
            if (local.rank + 1) * 2 <= gpus_per_node {
                assert_eq!(two, Ok(vec![2 * local.rank, 2 * local.rank + 1]), "{layout}");
            } else {
                let e = two.expect_err("more subdomains than GPUs");
                assert!(matches!(e, PlacementError::SharedGpu { per_rank: 2, .. }), "{e:?}");
                assert!(e.to_string().contains("STENCIL_OVERSUBSCRIBE=1"), "{e}");
                assert!(local.gpus(2, gpus_per_node, true).is_ok());
            }
        }
    }
    // On this machine every rank shares one node: the node-local rank is the rank.
    let here = World::mpi(world.duplicate()).node_rank().expect("node rank");
    assert_eq!((here.rank, here.size), (world.rank() as usize, Some(n as usize)));
    let total = World::mpi(world.duplicate()).sum(checked as f64);
    if world.rank() == 0 {
        println!("ranks: {n} rank(s), {total} halo and field points checked: OK");
    }
}
