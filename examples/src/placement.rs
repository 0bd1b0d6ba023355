//! The command-line options every example shares for where it runs (`--gpu N`, `--domains N`,
//! `--gpus N`, `--grid PX,PY,PZ`), what they resolve to, the processes of the run ([`Processes`]:
//! MPI ranks with the `mpi` feature) and the subdomains of each, and the printout of a
//! decomposition.

use stencil_runtime::{Decomposition, Distributed, Domains, Executor, Host, LaunchError, Overlap, World};

/// The processes of a run: the ranks `mpiexec` started (a build with the `mpi` feature), else
/// this one. Keep it alive for the whole run (dropping it ends MPI). On ranks other than 0 the
/// standard output is discarded, so a run prints once; errors still reach the standard error.
pub struct Processes {
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
    world: World,
}

impl Processes {
    /// Starts MPI where the build has it (one rank when not run under `mpiexec`), and the
    /// tracing output when `STENCIL_LOG` asks for it ([`crate::logging`]).
    pub fn start() -> Result<Self, String> {
        crate::logging::init();
        #[cfg(feature = "mpi")]
        {
            let universe = mpi::initialize().ok_or("MPI was already initialised")?;
            let world = World::mpi(universe.world());
            world.abort_on_panic();
            if world.rank() != 0 {
                // SAFETY: replaces file descriptor 1 by /dev/null; nothing else holds it.
                unsafe {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                    if null >= 0 {
                        libc::dup2(null, 1);
                        libc::close(null);
                    }
                }
            }
            Ok(Processes { _universe: Some(universe), world })
        }
        #[cfg(not(feature = "mpi"))]
        Ok(Processes { world: World::single() })
    }

    /// The world of the run.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Refuses a run of several ranks that is not decomposed (every rank would run it all).
    pub fn check(&self, target: Target) -> Result<(), String> {
        if self.world.size() > 1 && target.domains().is_none() {
            return Err(format!(
                "{} ranks, but the run is not decomposed: give --domains N or --gpus N (a multiple of the rank count)",
                self.world.size()
            ));
        }
        Ok(())
    }

    /// This rank's host subdomains of `d` (any dimension: swe2d's are 2D), numbered by node
    /// ([`Processes::by_node`]).
    pub fn host_domains<const D: usize>(&self, d: Decomposition<D>) -> Result<Domains<Host, D>, LaunchError> {
        let per_rank = (d.len() / self.world.size()).max(1);
        let d = self.by_node(d, per_rank)?;
        Domains::over_ranks(self.world.clone(), d, vec![Host; per_rank])
    }

    /// `d` numbered in blocks of one node's subdomains ([`Decomposition::in_blocks_of`]) where
    /// the run spans several nodes, each with the same number of ranks: a node's ranks (numbered
    /// one node after the other, as launchers place them by default) then hold a compact block of
    /// the process grid, and more of the halos stay inside the node. Unchanged on one node, or
    /// where the nodes hold different numbers of ranks. Every rank calls it (it asks the others).
    pub fn by_node<const D: usize>(
        &self,
        d: Decomposition<D>,
        per_rank: usize,
    ) -> Result<Decomposition<D>, LaunchError> {
        let ranks = self.world.size();
        let here = self.world.node_rank()?.size.unwrap_or(0) as f64;
        // The same count on every node (unknown counts as 0), agreed by all ranks.
        let (most, fewest) = (self.world.max(here), -self.world.max(-here));
        Ok(node_blocks(d, ranks, (most == fewest).then_some(most as usize), per_rank))
    }

    /// This rank's subdomains of `d` on GPUs, by its rank among the processes of its node
    /// ([`World::gpu_ordinals`]): the node's processes take the GPUs this process sees in turn
    /// (`CUDA_VISIBLE_DEVICES` and Slurm's per-task binding narrow them), sharing them when
    /// there are more subdomains than GPUs (an error with `STENCIL_OVERSUBSCRIBE=0`). Messages
    /// between ranks travel as `STENCIL_TRANSPORT` says (`auto`, `mpi`, `nccl`:
    /// [`stencil_runtime::Transport`]). Notes on stderr when GPUs run several subdomains, and
    /// the transport between ranks. Each subdomain's work is issued from a host thread of its own
    /// ([`Domains::with_host_threads`]).
    #[cfg(feature = "cuda")]
    pub fn gpu_domains<const D: usize>(
        &self,
        d: Decomposition<D>,
        bin: &str,
    ) -> Result<Domains<stencil_runtime::cuda::Gpu, D>, Box<dyn std::error::Error>> {
        use stencil_runtime::cuda::Gpu;
        let count = Gpu::count()?;
        let ranks = self.world.size();
        let per_rank = (d.len() / ranks).max(1);
        let ordinals = self.world.gpu_ordinals(per_rank, count)?;
        let gpus = ordinals.iter().map(|&g| Gpu::new(g)).collect::<Result<Vec<_>, _>>()?;
        let node = self.world.node_rank()?.for_gpus(count, |name| std::env::var(name).ok());
        if (node.rank + 1) * per_rank > count {
            eprintln!(
                "{bin}: note: process {} of its node runs {per_rank} subdomain(s) on GPUs {ordinals:?} of {count}: \
                 some GPUs run several subdomains",
                node.rank
            );
        }
        let d = self.by_node(d, per_rank)?;
        let domains = Domains::over_ranks(self.world.clone(), d, gpus)?
            .with_transport(stencil_runtime::Transport::from_env()?)?
            .with_host_threads()?;
        if ranks > 1 && self.world.rank() == 0 {
            eprintln!("{bin}: halo messages between ranks: {}", domains.transport());
        }
        Ok(domains)
    }
}

/// `d` numbered in blocks of one node's `per_node_ranks × per_rank` subdomains when `ranks`
/// span several nodes of `per_node_ranks` ranks each ([`Processes::by_node`]).
pub fn node_blocks<const D: usize>(
    d: Decomposition<D>,
    ranks: usize,
    per_node_ranks: Option<usize>,
    per_rank: usize,
) -> Decomposition<D> {
    match per_node_ranks {
        Some(k) if k > 0 && k < ranks && ranks.is_multiple_of(k) => d.in_blocks_of(k * per_rank),
        _ => d,
    }
}

/// A binary's `main`: starts the processes (MPI, in a build with it), runs `run`, and reports an
/// error as `BIN: error: …` with exit status 1 and no backtrace.
pub fn main_of(bin: &str, run: impl FnOnce(&Processes) -> Result<(), Box<dyn std::error::Error>>) {
    if let Err(e) = Processes::start().map_err(Into::into).and_then(|p| run(&p)) {
        eprintln!("{bin}: error: {e}");
        std::process::exit(1);
    }
}

/// Where a run goes, checked before anything is allocated ([`Processes::place`]).
pub struct Placement<const D: usize> {
    /// The host, a GPU, or subdomains.
    pub target: Target,
    /// The decomposition, for subdomains.
    pub decomposition: Option<Decomposition<D>>,
}

impl<const D: usize> Placement<D> {
    /// Prints the decomposition, for subdomains.
    pub fn print(&self) {
        if let Some(d) = &self.decomposition {
            print_decomposition(d);
        }
    }
}

impl Processes {
    /// The placement `args` ask for, checked against the processes, then the grid of `shape`
    /// decomposed (`decompose(subdomains)`, for subdomains) and the memory a model of
    /// `footprint` needs there checked: a placement that does not fit is an error before
    /// anything is allocated.
    pub fn place<const D: usize, E: Into<Box<dyn std::error::Error>>>(
        &self,
        bin: &str,
        args: &PlacementArgs<D>,
        shape: &stencil_runtime::Shape<D>,
        footprint: Footprint,
        decompose: impl FnOnce(usize) -> Result<Decomposition<D>, E>,
    ) -> Result<Placement<D>, Box<dyn std::error::Error>> {
        let target = args.target(bin)?;
        self.check(target)?;
        let decomposition = target.domains().map(decompose).transpose().map_err(Into::into)?;
        let memory = Memory::of_this_machine(target);
        let (global, halo) = (shape.interior(), shape.halo_widths());
        check_fits(target, decomposition.as_ref(), global, halo, footprint, &memory, self.world().size())?;
        Ok(Placement { target, decomposition })
    }

    /// [`Processes::on_executor`] where `placement` says.
    pub fn run<J: OnExecutor, const D: usize>(
        &self,
        placement: Placement<D>,
        overlap: Overlap,
        bin: &str,
        job: J,
    ) -> Result<J::Output, Box<dyn std::error::Error>> {
        self.on_executor(placement.target, placement.decomposition, overlap, bin, job)
    }
}

/// A run written once for any executor: what [`Processes::on_executor`] calls with the executor
/// the options chose.
pub trait OnExecutor {
    /// What the run returns.
    type Output;
    /// Runs on `exec`.
    fn run<E: Executor>(self, exec: &E) -> Result<Self::Output, Box<dyn std::error::Error>>;
}

impl Processes {
    /// Runs `job` where `target` says: on the host, on one GPU, or on the subdomains of
    /// `decomposition` (host subdomains, or GPUs as `Processes::gpu_domains` places them, over
    /// this process's ranks) through the distributed executor with `overlap`. The same code for
    /// every placement: `job` never knows which.
    pub fn on_executor<J: OnExecutor, const D: usize>(
        &self,
        target: Target,
        decomposition: Option<Decomposition<D>>,
        overlap: Overlap,
        bin: &str,
        job: J,
    ) -> Result<J::Output, Box<dyn std::error::Error>> {
        if target.domains().is_some() && decomposition.is_none() {
            return Err("a decomposed run needs its decomposition".into());
        }
        match (target, decomposition) {
            (Target::HostDomains(_), Some(d)) => {
                job.run(&Distributed::new(self.host_domains(d)?).with_overlap(overlap)?)
            }
            #[cfg(feature = "cuda")]
            (Target::GpuDomains(_), Some(d)) => {
                job.run(&Distributed::new(self.gpu_domains(d, bin)?).with_overlap(overlap)?)
            }
            #[cfg(feature = "cuda")]
            (Target::Gpu(ordinal), _) => job.run(&stencil_runtime::cuda::Gpu::new(ordinal)?),
            #[cfg(not(feature = "cuda"))]
            (Target::GpuDomains(_) | Target::Gpu(_), _) => Err(format!(
                "this build has no GPU support: rebuild with `cargo run --release -p stencil-examples --features cuda \
                 --bin {bin}` (--gpu N, --gpus N)"
            )
            .into()),
            _ => job.run(&Host),
        }
    }
}

/// Bytes a model holds per grid point (halo points included): on its executor (every field of
/// its state), and on the host while it runs (the global fields it builds there, such as the
/// initial state and the result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes per point on the executor.
    pub executor: usize,
    /// Bytes per point of the global grid on the host.
    pub host: usize,
}

/// Memory free for a run, in bytes: the host's (when known) and each GPU's this process sees.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Free host memory (Linux `MemAvailable`).
    pub host: Option<u64>,
    /// Free memory of GPU `i`.
    pub gpus: Vec<u64>,
}

impl Memory {
    /// What this machine has free; the GPUs are asked only where `target` runs on them.
    pub fn of_this_machine(target: Target) -> Memory {
        let host = std::fs::read_to_string("/proc/meminfo").ok().and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
            Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
        });
        #[allow(unused_mut)]
        let mut gpus = Vec::new();
        #[cfg(feature = "cuda")]
        if matches!(target, Target::Gpu(_) | Target::GpuDomains(_)) {
            use stencil_runtime::cuda::Gpu;
            for i in 0..Gpu::count().unwrap_or(0) {
                gpus.extend(Gpu::new(i).and_then(|g| g.memory_info()).ok().map(|(free, _)| free as u64));
            }
        }
        let _ = target;
        Memory { host, gpus }
    }
}

/// Gigabytes, for messages.
fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Refuses a run that would not fit in `memory` before anything is allocated: a grid of `global`
/// interior points with halo `halo`, a model of `footprint`, placed as `target` (the subdomains of
/// `decomposition` over `ranks` ranks, subdomain `i` on GPU `i % count`). The message names the
/// bytes needed where they do not fit and a placement that would (`--gpus N`).
pub fn check_fits<const D: usize>(
    target: Target,
    decomposition: Option<&Decomposition<D>>,
    global: [usize; D],
    halo: [usize; D],
    footprint: Footprint,
    memory: &Memory,
    ranks: usize,
) -> Result<(), String> {
    let points = |extent: [usize; D]| (0..D).map(|a| (extent[a] + 2 * halo[a]) as u64).product::<u64>();
    let whole = points(global);
    // Per local part (this rank's share; every rank holds as much).
    let parts: Vec<u64> = match decomposition {
        Some(d) => {
            d.subdomains().take(d.len() / ranks.max(1)).map(|s| points(s.extent) * footprint.executor as u64).collect()
        }
        None => vec![whole * footprint.executor as u64],
    };
    let on_host = matches!(target, Target::Host | Target::HostDomains(_));
    let host_need = whole * footprint.host as u64 + if on_host { parts.iter().sum() } else { 0 };
    if let Some(free) = memory.host.filter(|&free| host_need > free) {
        return Err(format!(
            "the grid {global:?} needs {} of host memory on each rank ({} bytes per point of the global grid{}), but {} are free: use fewer points{}",
            gb(host_need),
            footprint.host,
            if on_host { ", and the fields of the run" } else { "" },
            gb(free),
            if on_host { ", or run on GPUs (--gpus N)" } else { "" }
        ));
    }
    if on_host || memory.gpus.is_empty() {
        return Ok(());
    }
    let count = memory.gpus.len();
    let mut per_gpu = vec![0u64; count];
    let first = match target {
        Target::Gpu(g) => g,
        _ => 0,
    };
    for (i, bytes) in parts.iter().enumerate() {
        per_gpu[(first + i) % count] += bytes;
    }
    let Some(g) = (0..count).find(|&g| per_gpu[g] > memory.gpus[g]) else { return Ok(()) };
    let total = whole * footprint.executor as u64;
    let smallest = *memory.gpus.iter().min().expect("at least one GPU");
    let n = total.div_ceil(smallest.max(1)).max(2);
    Err(format!(
        "the grid {global:?} needs {} on GPU {g} ({} bytes per point), but {} are free there: split it over more GPUs (--gpus {n}: about {} per GPU{}) or use fewer points",
        gb(per_gpu[g]),
        footprint.executor,
        gb(memory.gpus[g]),
        gb(total / n),
        if n > (count * ranks.max(1)) as u64 { format!("; this machine has {count}, so over several ranks or nodes") } else { String::new() }
    ))
}

/// Where to run: flattened into each example's options (`#[command(flatten)]`); `D` is the
/// number of axes of the process grid (3 unless said: `PlacementArgs<2>` for a 2D model). Each
/// option can come from the environment too (`STENCIL_GPU`, `STENCIL_DOMAINS`, `STENCIL_GPUS`,
/// `STENCIL_GRID`; the command line wins), so a batch script can place a run without changing
/// its command.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct PlacementArgs<const D: usize = 3> {
    /// Run on this GPU (needs a build with `--features cuda`).
    #[arg(long, env = "STENCIL_GPU")]
    pub gpu: Option<usize>,
    /// Split the grid over N host subdomains (halo exchange between them; over the MPI ranks of
    /// `mpiexec -n R` with the `mpi` feature, N a multiple of R).
    #[arg(long, value_name = "N", env = "STENCIL_DOMAINS")]
    pub domains: Option<usize>,
    /// Split the grid over N subdomains on GPUs, subdomain i on GPU i % (number of GPUs) (needs a
    /// build with `--features cuda`).
    #[arg(long, value_name = "N", env = "STENCIL_GPUS")]
    pub gpus: Option<usize>,
    /// Process grid of the subdomains, one count per axis (e.g. 2,2,1 or 2x2x1 in 3D; with
    /// --domains or --gpus, its product must be N). Chosen for the least halo surface when not given.
    #[arg(long, value_name = GRID_NAMES[D], value_parser = parse_grid_of::<D>, env = "STENCIL_GRID")]
    pub grid: Option<[usize; D]>,
}

/// The value names of `--grid` by the number of axes.
const GRID_NAMES: [&str; 4] = ["", "PX", "PX,PY", "PX,PY,PZ"];

/// How a decomposed run lays each step's halo exchange against the update (`--overlap`):
/// flattened into the examples that take it.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct OverlapArgs {
    /// With subdomains: none (exchange, then update), one (the inner region runs while the halos
    /// travel, then the boundary slabs), two (as one, and a launch whose output the next launch
    /// reads around a point computes its boundary slabs first and sends their halos while its
    /// inner region runs) or auto (the default: each launch site's first launches try none and
    /// one, timed, and the faster is kept).
    #[arg(long, value_parser = stencil_runtime::Overlap::parse, env = "STENCIL_OVERLAP")]
    pub overlap: Option<stencil_runtime::Overlap>,
}

impl OverlapArgs {
    /// The mode asked for, else the model's `default`.
    pub fn or(self, default: stencil_runtime::Overlap) -> stencil_runtime::Overlap {
        self.overlap.unwrap_or(default)
    }
}

/// Where a run goes: one executor, or subdomains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The host, one domain.
    Host,
    /// One GPU, one domain.
    Gpu(usize),
    /// N host subdomains.
    HostDomains(usize),
    /// N subdomains on GPUs.
    GpuDomains(usize),
}

impl Target {
    /// The number of subdomains, if the run is decomposed.
    pub fn domains(self) -> Option<usize> {
        match self {
            Target::HostDomains(n) | Target::GpuDomains(n) => Some(n),
            Target::Host | Target::Gpu(_) => None,
        }
    }
}

impl<const D: usize> PlacementArgs<D> {
    /// The target the options ask for, or why they contradict each other (`bin` names the
    /// example in the rebuild hint).
    pub fn target(&self, bin: &str) -> Result<Target, String> {
        match (self.gpu, self.domains, self.gpus) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                Err("--gpu runs on one GPU; to split the grid over GPUs use --gpus N alone".into())
            }
            (_, Some(_), Some(_)) => {
                Err("--domains N (host subdomains) and --gpus N (GPU subdomains) exclude each other: give one".into())
            }
            (None, None, None) if self.grid.is_some() => {
                Err("--grid gives the process grid of --domains N or --gpus N: give one of them too".into())
            }
            (None, None, Some(_)) if !cfg!(feature = "cuda") => Err(format!(
                "--gpus: this build has no GPU support: rebuild with `cargo run --release -p stencil-examples \
                 --features cuda --bin {bin} -- --gpus N`"
            )),
            (Some(g), None, None) => Ok(Target::Gpu(g)),
            (None, Some(n), None) => Ok(Target::HostDomains(n)),
            (None, None, Some(n)) => Ok(Target::GpuDomains(n)),
            (None, None, None) => Ok(Target::Host),
        }
    }
}

/// Parses `PX,PY,PZ`: three positive counts (`x` may separate them too, `2x2x1`).
pub fn parse_grid(s: &str) -> Result<[usize; 3], String> {
    parse_grid_of::<3>(s)
}

/// Parses a process grid of `N` positive counts separated by `,` or `x` (`2,3` or `2x3`).
pub fn parse_grid_of<const N: usize>(s: &str) -> Result<[usize; N], String> {
    let parts: Vec<&str> = s.split([',', 'x']).map(str::trim).collect();
    let example = ["2", "2", "1"][3 - N.min(3)..].join(",");
    let bad = || format!("`{s}` is not a process grid: give {N} positive counts, e.g. {example}");
    if parts.len() != N {
        return Err(bad());
    }
    let mut grid = [0; N];
    for (g, p) in grid.iter_mut().zip(parts) {
        *g = p.parse().ok().filter(|&v: &usize| v > 0).ok_or_else(bad)?;
    }
    Ok(grid)
}

/// Prints the process grid and every subdomain's place and extent.
pub fn print_decomposition<const D: usize>(d: &Decomposition<D>) {
    let join = |v: [usize; D], sep: &str| v.map(|c| c.to_string()).join(sep);
    let plural = if d.len() == 1 { "" } else { "s" };
    println!("process grid {} ({} subdomain{plural}):", join(d.grid(), "x"), d.len());
    for s in d.subdomains() {
        println!(
            "  subdomain {} at ({}): offset ({}), extent {}",
            s.index,
            join(s.coords, ", "),
            join(s.offset, ", "),
            join(s.extent, "x")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_over_several_nodes_numbers_its_subdomains_by_node() {
        let d = Decomposition::new([512; 3], [8; 3], [false; 3], [1; 3]).unwrap();
        // 512 ranks on 64 nodes of 8: a node holds a 2 x 2 x 2 block of subdomains.
        assert_eq!(node_blocks(d, 512, Some(8), 1).block(), [2, 2, 2]);
        // 128 processes of 4 subdomains each on 32 nodes of 4 processes: blocks of 16.
        assert_eq!(node_blocks(d, 128, Some(4), 4).block().iter().product::<usize>(), 16);
        // One node, an unknown count or nodes the ranks do not fill evenly: numbered as given.
        for (ranks, per_node) in [(512, Some(512)), (512, None), (512, Some(0)), (512, Some(7))] {
            assert_eq!(node_blocks(d, ranks, per_node, 1), d, "{ranks} {per_node:?}");
        }
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_with_the_bytes_and_a_placement_that_fits() {
        // Diffusion (two f32 fields on the executor, two global f32 fields on the host) on a
        // machine of one 139 GB GPU and 120 GB of host memory.
        let fp = Footprint { executor: 8, host: 8 };
        let one_gpu = Memory { host: Some(120_000_000_000), gpus: vec![139_000_000_000] };
        let n = [3000; 3];
        let e = check_fits::<3>(Target::Gpu(0), None, [2000; 3], [1; 3], fp, &one_gpu, 1);
        assert_eq!(e, Ok(()), "2000^3 fits");
        let e = check_fits::<3>(Target::Gpu(0), None, n, [1; 3], Footprint { host: 4, ..fp }, &one_gpu, 1).unwrap_err();
        assert!(e.contains("216.") && e.contains("GPU 0") && e.contains("--gpus 2") && e.contains("139.0 GB"), "{e}");
        // The host cannot hold the global fields either: said first, before any GPU.
        let e = check_fits::<3>(Target::Gpu(0), None, n, [1; 3], fp, &one_gpu, 1).unwrap_err();
        assert!(e.contains("host memory") && e.contains("216.") && e.contains("120.0 GB"), "{e}");
        // Four GPUs of 80 GB: split over 4 it fits, over 2 it does not.
        let four = Memory { host: Some(400_000_000_000), gpus: vec![80_000_000_000; 4] };
        let d4 = Decomposition::auto(n, 4, [false; 3], [1; 3]).unwrap();
        assert_eq!(check_fits(Target::GpuDomains(4), Some(&d4), n, [1; 3], fp, &four, 1), Ok(()));
        let d2 = Decomposition::auto(n, 2, [false; 3], [1; 3]).unwrap();
        let e = check_fits(Target::GpuDomains(2), Some(&d2), n, [1; 3], fp, &four, 1).unwrap_err();
        assert!(e.contains("--gpus 3"), "{e}");
        // Host subdomains: the parts are on the host too.
        let e = check_fits(Target::HostDomains(4), Some(&d4), n, [1; 3], fp, &four, 1).unwrap_err();
        assert!(e.contains("host memory") && e.contains("--gpus N"), "{e}");
        // Unknown host memory: not refused on its account.
        assert_eq!(check_fits::<3>(Target::Host, None, [64; 3], [1; 3], fp, &Memory::default(), 1), Ok(()));
    }

    #[test]
    fn options_resolve_or_say_what_contradicts() {
        let p = |gpu, domains, gpus, grid| PlacementArgs { gpu, domains, gpus, grid };
        assert_eq!(p(None, None, None, None).target("x"), Ok(Target::Host));
        assert_eq!(p(Some(1), None, None, None).target("x"), Ok(Target::Gpu(1)));
        assert_eq!(p(None, Some(4), None, Some([2, 2, 1])).target("x"), Ok(Target::HostDomains(4)));
        assert!(p(Some(0), Some(2), None, None).target("x").unwrap_err().contains("--gpus N alone"));
        assert!(p(None, Some(2), Some(2), None).target("x").unwrap_err().contains("exclude each other"));
        assert!(p(None, None, None, Some([1, 1, 1])).target("x").unwrap_err().contains("give one of them"));
        assert_eq!(parse_grid(" 2, 1,3"), Ok([2, 1, 3]));
        assert!(parse_grid("2,0,1").is_err() && parse_grid("2,2").is_err() && parse_grid("a,b,c").is_err());
        assert_eq!((parse_grid_of::<2>("3x2"), parse_grid_of::<2>("1, 4")), (Ok([3, 2]), Ok([1, 4])));
        let e = parse_grid_of::<2>("2,2,1").unwrap_err();
        assert!(e.contains("2 positive counts, e.g. 2,1"), "{e}");
    }
}
