//! Where a process sits on its node ([`NodeRank`]), and which GPUs its subdomains take: GPUs are
//! assigned by the rank among the processes of the same node, not by the global rank, so that a
//! job whose ranks are spread over nodes in any order (blocks, round robin) uses every GPU of
//! every node once. The node-local rank comes from MPI (the ranks that share memory,
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`) in an MPI world, else from the launcher's
//! environment: `SLURM_LOCALID` (`srun`), `OMPI_COMM_WORLD_LOCAL_RANK` (Open MPI's `mpirun`),
//! `MPI_LOCALRANKID` (MPICH's `mpiexec`). The GPUs counted are those the process sees, so
//! `CUDA_VISIBLE_DEVICES` and Slurm's per-task binding, which narrow them, are respected: a task
//! that sees only the GPUs Slurm gave it (`--gpus-per-task`) takes them all
//! ([`NodeRank::for_gpus`]).

use super::world::World;
use crate::domain::{DistributionError, PlacementError};
use crate::error::LaunchError;

/// A process's place among the processes of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRank {
    /// Its rank among them (0 first).
    pub rank: usize,
    /// How many there are, where known.
    pub size: Option<usize>,
}

/// The launchers' variables for the node-local rank, each with its node's process count.
const LAUNCHERS: [(&str, &str); 3] = [
    ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
];

impl NodeRank {
    /// The only process of its node.
    pub const ALONE: NodeRank = NodeRank { rank: 0, size: Some(1) };

    /// The node-local rank a launcher set, read through `var` (the environment, or a table in a
    /// test): the first of `SLURM_LOCALID`, `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`
    /// that is set, with the count from `SLURM_NTASKS_PER_NODE`, `OMPI_COMM_WORLD_LOCAL_SIZE` or
    /// `MPI_LOCALNRANKS`. `None` when none is set; [`PlacementError::NotARank`] names a variable
    /// that is not a number.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<NodeRank>, PlacementError> {
        for (rank_var, size_var) in LAUNCHERS {
            let Some(text) = var(rank_var) else { continue };
            let rank = text
                .trim()
                .parse()
                .map_err(|_| PlacementError::NotARank { variable: rank_var, value: text.clone() })?;
            // Slurm writes `4(x2)` for uneven layouts: the count is then unknown.
            let size = var(size_var).and_then(|s| s.trim().parse().ok());
            return Ok(Some(NodeRank { rank, size }));
        }
        Ok(None)
    }

    /// This process's place for choosing among the `count` GPUs it sees, read through `var`: the
    /// first of its node where Slurm gave each task GPUs of its own (`--gpus-per-task=K`, which
    /// sets `SLURM_GPUS_PER_TASK`) and the process sees no more than those `K`: every GPU it
    /// sees is then its own. Otherwise itself (a task that sees the node's GPUs takes its turn).
    pub fn for_gpus(self, count: usize, var: impl Fn(&str) -> Option<String>) -> NodeRank {
        // `K`, or `TYPE:K` when the job asked for a GPU type (`--gpus-per-task=h100:2`).
        let own = var("SLURM_GPUS_PER_TASK").and_then(|k| k.rsplit(':').next()?.trim().parse::<usize>().ok());
        match own {
            Some(k) if count <= k => NodeRank::ALONE,
            _ => self,
        }
    }

    /// The GPU ordinals of this process's `per_rank` subdomains among the `count` GPUs it sees:
    /// the node's processes take consecutive blocks (`rank · per_rank ..`), wrapping around when
    /// the node runs more subdomains than it has GPUs, which is an error unless `oversubscribe`
    /// ([`PlacementError::SharedGpu`] names the node, its processes, subdomains and GPUs).
    pub fn gpus(self, per_rank: usize, count: usize, oversubscribe: bool) -> Result<Vec<usize>, PlacementError> {
        if count == 0 {
            return Err(PlacementError::NoGpu { node: node_name() });
        }
        let first = self.rank * per_rank;
        if first + per_rank > count && !oversubscribe {
            return Err(PlacementError::SharedGpu {
                node: node_name(),
                processes: self.size,
                rank: self.rank,
                per_rank,
                gpus: count,
            });
        }
        Ok((first..first + per_rank).map(|i| i % count).collect())
    }
}

/// The host's name, for messages.
fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| format!("node {}", s.trim()))
        .unwrap_or_else(|_| "this node".into())
}

impl World {
    /// This process's place among the processes of its node: in an MPI world, among the ranks
    /// that share its memory; else from the launcher's environment ([`NodeRank::from_vars`]),
    /// or [`NodeRank::ALONE`].
    pub fn node_rank(&self) -> Result<NodeRank, LaunchError> {
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.communicator() {
            use mpi::topology::Communicator;
            return Ok(node_rank_of(&comm.split_shared(self.rank() as i32)));
        }
        let from_env = NodeRank::from_vars(|name| std::env::var(name).ok()).map_err(DistributionError::from)?;
        Ok(from_env.unwrap_or(NodeRank::ALONE))
    }

    /// The GPU ordinals of this process's `per_rank` subdomains among the `count` GPUs it sees,
    /// by its node-local rank ([`NodeRank::for_gpus`], [`NodeRank::gpus`]); sharing a GPU is
    /// allowed unless `STENCIL_OVERSUBSCRIBE=0`.
    pub fn gpu_ordinals(&self, per_rank: usize, count: usize) -> Result<Vec<usize>, LaunchError> {
        let oversubscribe = std::env::var("STENCIL_OVERSUBSCRIBE").map_or(true, |v| v.trim() != "0");
        let node = self.node_rank()?.for_gpus(count, |name| std::env::var(name).ok());
        Ok(node.gpus(per_rank, count, oversubscribe).map_err(DistributionError::from)?)
    }
}

/// The place of this rank among the ranks of `node` (a communicator of one node's ranks, as
/// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` gives, or a test's split).
#[cfg(feature = "mpi")]
pub fn node_rank_of(node: &mpi::topology::SimpleCommunicator) -> NodeRank {
    use mpi::topology::Communicator;
    NodeRank { rank: node.rank() as usize, size: Some(node.size() as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(table: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| table.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn each_launchers_variables_are_read() {
        let read = |t: &[(&str, &str)]| NodeRank::from_vars(vars(t)).unwrap();
        assert_eq!(read(&[]), None);
        assert_eq!(
            read(&[("SLURM_LOCALID", "3"), ("SLURM_NTASKS_PER_NODE", "4")]),
            Some(NodeRank { rank: 3, size: Some(4) })
        );
        assert_eq!(
            read(&[("SLURM_LOCALID", "1"), ("SLURM_NTASKS_PER_NODE", "4(x2)")]),
            Some(NodeRank { rank: 1, size: None })
        );
        assert_eq!(
            read(&[("OMPI_COMM_WORLD_LOCAL_RANK", "2"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "8")]),
            Some(NodeRank { rank: 2, size: Some(8) })
        );
        assert_eq!(
            read(&[("MPI_LOCALRANKID", "5"), ("MPI_LOCALNRANKS", "6")]),
            Some(NodeRank { rank: 5, size: Some(6) })
        );
        // Slurm first: srun under an MPI that sets its own too.
        assert_eq!(read(&[("MPI_LOCALRANKID", "5"), ("SLURM_LOCALID", "0")]).map(|n| n.rank), Some(0));
        let e = NodeRank::from_vars(vars(&[("OMPI_COMM_WORLD_LOCAL_RANK", "two")])).unwrap_err();
        assert_eq!(e, PlacementError::NotARank { variable: "OMPI_COMM_WORLD_LOCAL_RANK", value: "two".into() });
        let m = e.to_string();
        assert!(m.contains("OMPI_COMM_WORLD_LOCAL_RANK") && m.contains("\"two\""), "{m}");
    }

    #[test]
    fn gpus_follow_the_node_local_rank() {
        let at = |rank, size| NodeRank { rank, size: Some(size) };
        // 4 processes on a node of 4 GPUs: one each; 2 per process on a node of 8.
        assert_eq!((0..4).map(|r| at(r, 4).gpus(1, 4, false).unwrap()).collect::<Vec<_>>(), [[0], [1], [2], [3]]);
        assert_eq!(at(3, 4).gpus(2, 8, false).unwrap(), [6, 7]);
        // Per-task binding (`--gpus-per-task=1`): each process sees one GPU, its own, and takes it
        // without counting as sharing; a task that sees more than its share takes its turn.
        let slurm = |k: &'static str| move |name: &str| (name == "SLURM_GPUS_PER_TASK").then(|| k.to_string());
        assert_eq!(at(3, 4).for_gpus(1, slurm("1")).gpus(1, 1, false).unwrap(), [0]);
        assert_eq!(at(3, 4).for_gpus(2, slurm("2")).gpus(2, 2, false).unwrap(), [0, 1]);
        assert_eq!(at(3, 4).for_gpus(2, slurm("h100:2")).gpus(2, 2, false).unwrap(), [0, 1]);
        assert_eq!(at(3, 4).for_gpus(4, slurm("1")), at(3, 4));
        assert_eq!(at(3, 4).for_gpus(1, slurm("many")), at(3, 4));
        assert_eq!(at(3, 4).for_gpus(1, |_| None), at(3, 4));
        // Without the binding, one GPU seen by the node's fourth process is shared.
        assert!(at(3, 4).gpus(1, 1, false).is_err());
        assert_eq!(at(3, 4).gpus(1, 1, true).unwrap(), [0]);
        // More subdomains on the node than GPUs: an error naming the counts, or shared when allowed.
        let e = at(2, 4).gpus(1, 2, false).unwrap_err();
        assert!(
            matches!(e, PlacementError::SharedGpu { processes: Some(4), rank: 2, per_rank: 1, gpus: 2, .. }),
            "{e:?}"
        );
        let m = e.to_string();
        assert!(m.contains("4 processes") && m.contains("2 GPU(s)") && m.contains("STENCIL_OVERSUBSCRIBE=1"), "{m}");
        assert_eq!(at(2, 4).gpus(1, 2, true).unwrap(), [0]);
        // A process whose node's size is unknown counts at least itself and those before it.
        let unsized_node = NodeRank { rank: 2, size: None }.gpus(1, 2, false).unwrap_err();
        assert!(unsized_node.to_string().contains("at least 3 processes"), "{unsized_node}");
        let none = NodeRank::ALONE.gpus(1, 0, true).unwrap_err();
        assert!(matches!(none, PlacementError::NoGpu { .. }) && none.to_string().contains("no GPU"), "{none}");
    }
}
