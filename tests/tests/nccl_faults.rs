//! NCCL between ranks when a rank fails or stops (feature `nccl`, one GPU per rank; `scripts/gpu-check
//! run-faults` runs it under `mpiexec -n 2`):
//!
//! - `nccl_faults init-fail`, in a build with stencil-runtime's `fault-injection` feature and
//!   `STENCIL_TEST_NCCL_INIT_FAIL=1`: rank 1's `ncclCommInitRankConfig` fails on purpose; asking
//!   for the NCCL transport must then be an `Err` on every rank that names rank 1's error (rank 0
//!   is not left waiting in NCCL's bootstrap). Prints `OK` with the time it took on each rank.
//! - `nccl_faults stall`: exchanges halos over NCCL, one synchronised exchange after another;
//!   the rank that `NCCL_FAULTS_STOP_RANK` names (default 1) stops itself with SIGSTOP after
//!   `NCCL_FAULTS_STOP_AFTER` exchanges (default 50). The other ranks must end the run within
//!   `STENCIL_EXCHANGE_TIMEOUT` seconds with a message naming the stopped rank; the process never
//!   ends by itself otherwise, so the script checks that the job ended, how fast, and the message.
//! - `nccl_faults fold`: the minimum of random values reduced into a held scalar, folded between
//!   the subdomains by NCCL's all-reduce, against a plain loop; with `STENCIL_TEST_NCCL_SKIP_FOLD=1`
//!   (a `fault-injection` build) the all-reduce is left out on purpose and the held copy must keep
//!   the NaN it held, which shows that the fold runs through NCCL and that its check can fail.

use mpi::topology::Communicator;
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains, Executor, Transport, World};

fn main() {
    let universe = mpi::initialize().expect("MPI_Init failed");
    let world = universe.world();
    World::mpi(world.duplicate()).abort_on_panic();
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let mode = std::env::args().nth(1).unwrap_or_default();
    let count = Gpu::count().expect("a CUDA driver");
    assert!(count >= 1, "no GPU");
    let gpu = Gpu::new(rank % count).expect("the GPU");
    let global = [64, 32, 32];
    let d = Decomposition::auto(global, n, [true, false, false], [1; 3]).expect("a process grid");
    let domains = Domains::over_ranks(World::mpi(world.duplicate()), d, vec![gpu.clone()]).expect("domains");
    let started = std::time::Instant::now();
    println!("rank {rank} (pid {}): {mode}, GPU {} of {count}", std::process::id(), gpu.ordinal());
    match mode.as_str() {
        "init-fail" => {
            let e = domains.with_transport(Transport::Nccl).expect_err("the injected failure must be an Err");
            let text = e.to_string();
            assert!(text.contains("rank 1: ncclCommInitRankConfig"), "rank 1's failure not named: {text}");
            assert!(text.contains("injected by STENCIL_TEST_NCCL_INIT_FAIL"), "{text}");
            println!("OK rank {rank}: Err after {:.1} s: {text}", started.elapsed().as_secs_f64());
        }
        "stall" => {
            let domains = domains.with_transport(Transport::Nccl).expect("the NCCL transport");
            assert_eq!(domains.transport(), Transport::Nccl);
            let env =
                |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
            let (stop_rank, stop_after) = (env("NCCL_FAULTS_STOP_RANK", 1), env("NCCL_FAULTS_STOP_AFTER", 50));
            let field = Field3::<f32>::filled(Shape3::new(global).halo(1), 1.0);
            let mut fields = domains.scatter(&field).expect("scatter");
            for step in 0.. {
                if rank == stop_rank && step == stop_after {
                    println!("rank {rank}: stopping itself (SIGSTOP) after {step} exchanges");
                    let me = std::process::id().to_string();
                    std::process::Command::new("kill").args(["-STOP", &me]).status().expect("kill -STOP");
                }
                domains.exchange(&mut fields).expect("exchange");
                gpu.synchronize().expect("synchronize");
                if step == stop_after {
                    println!("rank {rank}: {step} exchanges done, waiting on the stopped rank");
                }
            }
        }
        "fold" => {
            use stencil_tests::held_check::HeldSmallest;
            let skip = std::env::var("STENCIL_TEST_NCCL_SKIP_FOLD").is_ok_and(|v| v.trim() == "1");
            let domains = domains.with_transport(Transport::Nccl).expect("the NCCL transport");
            let exec = stencil_runtime::Distributed::new(domains);
            let shape = Shape3::new(global).halo(1);
            let mut rng = stencil_tests::SplitMix64::new(7);
            let host = Field3::from_fn(shape, |_| rng.uniform(-3.0, 5.0));
            let want = host.interior_view().iter().fold(f64::INFINITY, |m, &v| m.min(v));
            let x = exec.upload(&host).expect("upload");
            let low = exec.held(f64::NAN).expect("held");
            let all = Loop3D::interior(&shape);
            exec.reduce_into(&all, HeldSmallest, None, (&x, &mut Min::new()), &[&low]).expect("reduce_into");
            let got = exec.read_held(&low).expect("read_held");
            if skip {
                assert!(got.is_nan(), "the all-reduce was skipped on purpose, yet the copy holds {got}");
                println!(
                    "OK rank {rank}: the all-reduce left out on purpose leaves the copy at {got}: its check fails"
                );
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "the minimum folded over NCCL: {got}, a plain loop: {want}");
                println!("OK rank {rank}: the minimum {got} folded over NCCL equals a plain loop's");
            }
        }
        other => panic!("mode {other:?}: use init-fail, stall or fold"),
    }
}
