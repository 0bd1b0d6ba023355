//! [`DistributionError`]: what a decomposition, the subdomains of a process, a halo exchange or
//! the distributed executor refuses, as data (error code S0107). Each variant names what was
//! given and what fits; `Display` says what to change. The helpers a distributed run is set up
//! with refuse with their own small types, which a variant wraps: [`PlacementError`] (a
//! process's node-local rank and GPUs), [`TransportError`] (`STENCIL_TRANSPORT`) and
//! [`BoundaryFillError`] (`Decomposition::check_boundary_fills`).

use super::decomposition::{BoundaryFillError, DecompositionError};
use crate::field::HaloFill;
use std::fmt;

const SIDES: [&str; 2] = ["low", "high"];

/// What a decomposition, the subdomains of a process, a halo exchange or the distributed
/// executor refuses ([`Error::Decomposition`](crate::Error::Decomposition), S0107).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DistributionError {
    /// The decomposition cannot be built.
    Grid(DecompositionError),
    /// Boundary fills a subdomain cannot apply from its own interior.
    BoundaryFill(BoundaryFillError),
    /// A process's node-local rank or GPUs cannot be had.
    Placement(PlacementError),
    /// A transport name that is not one.
    Transport(TransportError),
    /// The subdomains cannot be shared evenly by the ranks.
    UnevenRanks {
        /// The process grid.
        grid: Vec<usize>,
        /// Its subdomains.
        subdomains: usize,
        /// The ranks.
        ranks: usize,
    },
    /// Not one executor per subdomain of the rank.
    ExecutorCount {
        /// Executors given.
        given: usize,
        /// The rank.
        rank: usize,
        /// Its subdomains.
        local: usize,
        /// The process grid.
        grid: Vec<usize>,
    },
    /// Not one field per subdomain of the rank.
    FieldCount {
        /// The call.
        call: String,
        /// Fields given.
        given: usize,
        /// The rank.
        rank: usize,
        /// Its subdomains.
        local: usize,
    },
    /// Not one range per subdomain of the rank (the hand-written binder).
    RangeCount {
        /// Ranges given.
        given: usize,
        /// The rank's subdomains.
        local: usize,
        /// The rank.
        rank: usize,
    },
    /// A gather into a shape that is not the global grid's.
    GatherExtent {
        /// The shape given.
        shape: String,
        /// The global interior.
        global: Vec<usize>,
    },
    /// A gather into a shape of another element order than the fields'.
    GatherOrder {
        /// A field's shape.
        field: String,
        /// The shape given.
        global: String,
    },
    /// Messages to other ranks from domains of one process.
    SingleProcess {
        /// The messages.
        messages: Vec<String>,
    },
    /// A box of a halo message that leaves its field.
    BoxOutside {
        /// Its first storage point.
        at: Vec<usize>,
        /// Its points per axis.
        len: Vec<usize>,
        /// The field's shape.
        shape: String,
        /// The axis it leaves along.
        axis: usize,
    },
    /// A box of a halo message that does not fit in its buffer.
    BoxOverflow {
        /// The box's bytes.
        bytes: usize,
        /// Its offset in the buffer.
        offset: usize,
        /// The buffer's bytes.
        capacity: usize,
    },
    /// A field of a halo message in another memory than the executor packing it.
    ForeignMemory {
        /// The field's shape.
        shape: String,
        /// The executor.
        executor: String,
    },
    /// Boxes of a copy from field to field that do not pair up (count, points per axis, element
    /// size or element order).
    BoxPairs {
        /// The boxes written, described.
        into: String,
        /// The boxes read, described.
        from: String,
    },
    /// A copy from field to field asked of an executor that cannot make one.
    NoDirectCopy {
        /// The executor's type.
        executor: &'static str,
    },
    /// A message longer than a buffer it is copied between.
    MessageSize {
        /// The message's bytes.
        bytes: usize,
        /// The source buffer's bytes.
        source: usize,
        /// The destination buffer's bytes.
        destination: usize,
    },
    /// Not one list of fields per subdomain of the process.
    FieldLists {
        /// The rank.
        rank: usize,
        /// Lists given.
        given: usize,
        /// Its subdomains.
        local: usize,
    },
    /// A list of fields that is not the exchange's.
    FieldList {
        /// Fields given.
        given: usize,
        /// The subdomain.
        subdomain: usize,
        /// The exchange's fields, in order.
        expected: Vec<String>,
    },
    /// A field of another element type than it was appended as.
    FieldElement {
        /// The field.
        field: String,
        /// The subdomain.
        subdomain: usize,
        /// Its element type.
        element: &'static str,
        /// The type it was appended as.
        appended: &'static str,
    },
    /// A field that is not of its subdomain's shape.
    FieldExtent {
        /// The field.
        field: String,
        /// The subdomain.
        subdomain: usize,
        /// The field's shape.
        shape: String,
        /// The subdomain's points per axis.
        extent: Vec<usize>,
        /// The rank.
        rank: usize,
    },
    /// A halo narrower than the layers an exchange fills.
    HaloDepth {
        /// The field.
        field: String,
        /// The axis.
        axis: usize,
        /// Its halo there.
        halo: usize,
        /// The layers exchanged.
        depth: usize,
    },
    /// A subdomain thinner than the layers exchanged.
    ThinForExchange {
        /// The field.
        field: String,
        /// The subdomain.
        subdomain: usize,
        /// The axis.
        axis: usize,
        /// Its points there.
        points: usize,
        /// The layers exchanged.
        depth: usize,
    },
    /// A halo in host memory where messages between ranks move device to device.
    HostHalo {
        /// The halo: `axis 1 high halo` for a face, `halo [-1, 1, 0]` for an edge or a corner.
        halo: String,
        /// The subdomain.
        subdomain: usize,
    },
    /// More subdomains than MPI message tags can tell apart.
    TooManySubdomains {
        /// The receiving subdomain.
        receiver: usize,
        /// The most that fit.
        limit: usize,
    },
    /// A neighbour that the decomposition does not know (an internal inconsistency).
    MissingNeighbour {
        /// The local subdomain.
        local: usize,
        /// The side (0 low, 1 high).
        side: usize,
        /// The axis.
        axis: usize,
    },
    /// `Overlap::Auto` given to the hand-written binder.
    BinderAuto,
    /// A subdomain's host thread could not start.
    HostThread {
        /// The subdomain.
        subdomain: usize,
        /// The system's reason.
        reason: String,
    },
    /// A halo narrower than a stencil's reach across the cuts.
    HaloNarrowerThanReach {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The axis.
        axis: usize,
        /// How far the stencil reads.
        reach: usize,
        /// The halo there.
        halo: usize,
    },
    /// `Distributed::gpus` with no GPU.
    NoGpu,
    /// An earlier call panicked while it held the distributed executor.
    Poisoned,
    /// A handle of `fork_join` whose work could not be ordered against the subdomains' own
    /// executors (an event failed): its later work is refused.
    ForkOrder {
        /// What failed.
        error: String,
    },
    /// A field or range of another dimension than the distributed grid.
    Dimensions {
        /// The field's or range's dimensions.
        field: usize,
        /// The grid's.
        grid: usize,
    },
    /// A field of another executor or decomposition.
    ForeignField {
        /// The call.
        call: String,
        /// The field.
        field: String,
        /// The executor.
        executor: String,
    },
    /// A field that is not of the global grid's shape.
    GlobalShape {
        /// The call.
        call: String,
        /// The field's shape.
        shape: String,
        /// The global interior.
        global: Vec<usize>,
    },
    /// A subdomain thinner than a field's halo.
    ThinForHalo {
        /// The call.
        call: String,
        /// The subdomain.
        subdomain: usize,
        /// The axis.
        axis: usize,
        /// Its points there.
        points: usize,
        /// The field's shape.
        shape: String,
        /// The halo there.
        halo: usize,
        /// The process grid.
        grid: Vec<usize>,
    },
    /// A read across the grid's edge of a field whose halo there is stale.
    StaleEdge {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The axis.
        axis: usize,
        /// The side (0 low, 1 high).
        side: usize,
    },
    /// A column sweep along a split axis.
    SplitColumns {
        /// The stencil.
        stencil: &'static str,
        /// The axis of the columns.
        axis: usize,
        /// The process grid.
        grid: Vec<usize>,
    },
    /// A `Periodic` fill along a split axis the decomposition does not wrap.
    PeriodicNotWrapped {
        /// The call and field.
        what: String,
        /// The axis.
        axis: usize,
        /// Its subdomains.
        parts: usize,
    },
    /// Another fill than `Periodic` along an axis the decomposition wraps.
    FillOnWrappedAxis {
        /// The call and field.
        what: String,
        /// The axis.
        axis: usize,
        /// The fill.
        fill: HaloFill,
    },
    /// A message-buffer call on the distributed executor.
    Buffers {
        /// The call.
        call: &'static str,
    },
}

impl fmt::Display for DistributionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DistributionError as E;
        match self {
            E::Grid(..)
            | E::BoundaryFill(..)
            | E::Placement(..)
            | E::Transport(..)
            | E::UnevenRanks { .. }
            | E::ExecutorCount { .. }
            | E::FieldCount { .. }
            | E::RangeCount { .. }
            | E::GatherExtent { .. }
            | E::GatherOrder { .. }
            | E::SingleProcess { .. } => self.fmt_setup(f),
            E::BoxOutside { .. }
            | E::BoxOverflow { .. }
            | E::ForeignMemory { .. }
            | E::BoxPairs { .. }
            | E::NoDirectCopy { .. }
            | E::MessageSize { .. }
            | E::FieldLists { .. }
            | E::FieldList { .. }
            | E::FieldElement { .. }
            | E::FieldExtent { .. }
            | E::HaloDepth { .. }
            | E::ThinForExchange { .. }
            | E::HostHalo { .. }
            | E::TooManySubdomains { .. }
            | E::MissingNeighbour { .. }
            | E::BinderAuto
            | E::HostThread { .. } => self.fmt_exchange(f),
            _ => self.fmt_executor(f),
        }
    }
}

impl DistributionError {
    /// The decomposition, placement and set-up refusals.
    fn fmt_setup(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DistributionError as E;
        match self {
            E::Grid(e) => write!(f, "{e}"),
            E::BoundaryFill(e) => write!(f, "{e}"),
            E::Placement(e) => write!(f, "{e}"),
            E::Transport(e) => write!(f, "{e}"),
            E::UnevenRanks { grid, subdomains: n, ranks } => write!(
                f,
                "process grid {grid:?} has {n} subdomains, which {ranks} ranks cannot share evenly: run `mpiexec -n` \
                 with a divisor of {n}, or choose a grid whose number of subdomains is a multiple of {ranks} \
                 (`Decomposition::auto`)"
            ),
            E::ExecutorCount { given, rank, local, grid } => write!(
                f,
                "{given} executors on rank {rank} for its {local} subdomains of process grid {grid:?}: give one \
                 executor per subdomain of the rank"
            ),
            E::FieldCount { call, given, rank, local } => write!(
                f,
                "{call}: {given} fields, but rank {rank} holds {local} subdomains: pass one field per local \
                 subdomain, in order"
            ),
            E::RangeCount { given, local, rank } => write!(
                f,
                "CompCommBinder: {given} ranges for the {local} subdomains of rank {rank}: give one range per local \
                 subdomain"
            ),
            E::GatherExtent { shape, global } => {
                write!(f, "gather: the global shape {shape} must have the global extent {global:?}")
            }
            E::GatherOrder { field, global } => write!(
                f,
                "gather: a field of {field} has another element order than the global shape {global}: gather into a \
                 shape of the fields' order"
            ),
            E::SingleProcess { messages } => write!(
                f,
                "halo messages to other ranks ({}) in a single process: build the domains over the MPI world \
                 (`Domains::over_ranks`)",
                messages.join(", ")
            ),
            _ => unreachable!("`Display::fmt` routes only these variants here"),
        }
    }

    /// The halo exchange's refusals.
    fn fmt_exchange(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DistributionError as E;
        match self {
            E::BoxOutside { at, len, shape, axis } => {
                write!(f, "halo message: the box at {at:?} of {len:?} points leaves the field ({shape}) along axis {axis}")
            }
            E::BoxOverflow { bytes, offset, capacity } => write!(
                f,
                "halo message: a box of {bytes} bytes at offset {offset} does not fit in a buffer of {capacity} bytes"
            ),
            E::ForeignMemory { shape, executor } => write!(
                f,
                "halo message: a field of {shape} lives in another memory than its executor {executor}: pass each \
                 subdomain's fields with the executor that allocated them"
            ),
            E::BoxPairs { into, from } => write!(
                f,
                "halo copy from field to field: the boxes read ({from}) do not pair up with the boxes written ({into}): \
                 each pair needs the same points per axis, element size and element order"
            ),
            E::NoDirectCopy { executor } => write!(
                f,
                "halo copy from field to field: {executor} cannot read another executor's fields directly: exchange \
                 its halos through message buffers (set STENCIL_DIRECT_HALOS=0)"
            ),
            E::MessageSize { bytes, source, destination } => {
                write!(f, "halo message of {bytes} bytes between buffers of {source} and {destination} bytes")
            }
            E::FieldLists { rank, given, local } => write!(
                f,
                "exchange on rank {rank}: fields of {given} subdomains, but this process holds {local}: pass one list \
                 of fields per subdomain of the process, in order"
            ),
            E::FieldList { given, subdomain, expected } => write!(
                f,
                "exchange: {given} fields for subdomain {subdomain}, but the exchange was built with {} ({}): pass \
                 them in the order they were appended",
                expected.len(),
                expected.join(", ")
            ),
            E::FieldElement { field, subdomain, element, appended } => write!(
                f,
                "exchange: field `{field}` of subdomain {subdomain} holds {element}, but it was appended as {appended}"
            ),
            E::FieldExtent { field, subdomain, shape, extent, rank } => write!(
                f,
                "exchange: field `{field}` of subdomain {subdomain} has {shape}, but the subdomain is {extent:?} points \
                 (on rank {rank}): allocate it with `Subdomain::shape`, or pass the fields of these domains"
            ),
            E::HaloDepth { field, axis, halo, depth } => write!(
                f,
                "exchange: field `{field}` has halo {halo} along axis {axis}, but the exchange fills {depth} layers: \
                 allocate it with a halo of at least {depth} or append it with a smaller depth"
            ),
            E::ThinForExchange { field, subdomain, axis, points, depth } => write!(
                f,
                "exchange of `{field}`: subdomain {subdomain} has {points} points along axis {axis}, fewer than the \
                 {depth} layers exchanged: use fewer subdomains along that axis or a smaller depth"
            ),
            E::HostHalo { halo, subdomain } => write!(
                f,
                "exchange: the {halo} of subdomain {subdomain} is in host memory, but the domains move messages \
                 between ranks device to device: give such domains GPU executors"
            ),
            E::TooManySubdomains { receiver, limit } => write!(
                f,
                "exchange: subdomain {receiver} is beyond the {limit} subdomains whose halo messages MPI can tell \
                 apart: use fewer subdomains"
            ),
            E::MissingNeighbour { local, side, axis } => write!(
                f,
                "exchange: local subdomain {local} has no neighbour on the {} side of axis {axis}, though one points \
                 to it",
                SIDES[*side]
            ),
            E::BinderAuto => f.write_str(
                "CompCommBinder: Overlap::Auto is the distributed executor's measured choice; give the binder None, \
                 OneDivided or TwoDivided",
            ),
            E::HostThread { subdomain, reason } => {
                write!(f, "starting the host thread of subdomain {subdomain}: {reason}")
            }
            _ => unreachable!("`Display::fmt` routes only these variants here"),
        }
    }

    /// The distributed executor's refusals.
    fn fmt_executor(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DistributionError as E;
        match self {
            E::HaloNarrowerThanReach { stencil, field, axis, reach, halo } => write!(
                f,
                "stencil `{stencil}` reads field `{field}` {reach} points away along axis {axis}, but its halo is \
                 {halo} wide there: allocate it with a halo of at least {reach} along axis {axis}"
            ),
            E::NoGpu => {
                f.write_str("Distributed::gpus: the CUDA driver sees no GPU: run on the host (`Distributed::host`)")
            }
            E::Poisoned => f.write_str("the distributed executor: an earlier call panicked while holding it"),
            E::ForkOrder { error } => write!(
                f,
                "a handle of the distributed executor's fork_join could not order its work against the subdomains' \
                 executors ({error}); its later work is refused: end the fork_join and issue that work after it"
            ),
            E::Dimensions { field, grid } => write!(
                f,
                "a {field}D field or range on a distributed executor of a {grid}D grid: distribute {grid}D fields \
                 only, and keep fields of other dimensions on the subdomains' executors"
            ),
            E::ForeignField { call, field, executor } => write!(
                f,
                "{call}: {field} is not a field of this distributed executor ({executor}): allocate it with this \
                 executor's `alloc` or `upload` (fields of another executor or decomposition cannot be mixed)"
            ),
            E::GlobalShape { call, shape, global } => write!(
                f,
                "{call}: a field of {shape} on a distributed executor of a grid of {global:?} points: give the shape \
                 of the whole grid (its interior {global:?}, with the halo the stencils need)"
            ),
            E::ThinForHalo { call, subdomain, axis, points, shape, halo, grid } => write!(
                f,
                "{call}: subdomain {subdomain} is {points} points thick along axis {axis}, thinner than the halo of \
                 {shape} ({halo} points): split that axis over fewer subdomains (process grid {grid:?}) or give the \
                 field a narrower halo"
            ),
            E::StaleEdge { stencil, field, axis, side } => write!(
                f,
                "stencil `{stencil}` reads field `{field}` at an offset across the {} edge of the grid along axis \
                 {axis}, but the field was written since `fill_halos` last filled it, and declares no boundary: its \
                 halo there is stale. Declare its boundary once with `exec.declare_boundary(&mut field, fills)` \
                 (filled after every write), or fill it again before this launch",
                SIDES[*side]
            ),
            E::SplitColumns { stencil, axis, grid } => write!(
                f,
                "stencil `{stencil}` sweeps its columns along axis {axis}, which the decomposition splits over {} \
                 subdomains: a column must lie in one subdomain; use a process grid of 1 along axis {axis} (process \
                 grid {grid:?})",
                grid[*axis]
            ),
            E::PeriodicNotWrapped { what, axis, parts } => write!(
                f,
                "{what} is filled Periodic along axis {axis}, which is split over {parts} subdomains and not periodic \
                 in the decomposition: build the executor's Decomposition with axis {axis} periodic"
            ),
            E::FillOnWrappedAxis { what, axis, fill } => write!(
                f,
                "{what} is filled {fill:?} along axis {axis}, which the decomposition makes periodic (its halo is the \
                 other end's): fill it Periodic, or build the executor's Decomposition with axis {axis} not periodic"
            ),
            E::Buffers { call } => write!(
                f,
                "`{call}` on a distributed executor: it moves halos itself (before the launches that need them); \
                 message buffers belong to its subdomains' executors (`Distributed::domains().exec(i)`)"
            ),
            _ => unreachable!("`Display::fmt` routes only the remaining variants here"),
        }
    }
}

impl std::error::Error for DistributionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DistributionError::Grid(e) => Some(e),
            DistributionError::BoundaryFill(e) => Some(e),
            DistributionError::Placement(e) => Some(e),
            DistributionError::Transport(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DecompositionError> for DistributionError {
    fn from(e: DecompositionError) -> Self {
        DistributionError::Grid(e)
    }
}

impl From<BoundaryFillError> for DistributionError {
    fn from(e: BoundaryFillError) -> Self {
        DistributionError::BoundaryFill(e)
    }
}

impl From<PlacementError> for DistributionError {
    fn from(e: PlacementError) -> Self {
        DistributionError::Placement(e)
    }
}

impl From<TransportError> for DistributionError {
    fn from(e: TransportError) -> Self {
        DistributionError::Transport(e)
    }
}

/// Why a process's node-local rank or the GPUs of its subdomains cannot be had
/// ([`NodeRank::from_vars`](crate::NodeRank::from_vars), [`NodeRank::gpus`](crate::NodeRank::gpus)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlacementError {
    /// A launcher's variable for the node-local rank that is not a number.
    NotARank {
        /// The variable (`SLURM_LOCALID`, `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`).
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The CUDA driver sees no GPU on the node.
    NoGpu {
        /// The node, for the message (`node NAME` or `this node`).
        node: String,
    },
    /// More subdomains on the node than GPUs, and sharing them is not allowed.
    SharedGpu {
        /// The node, for the message (`node NAME` or `this node`).
        node: String,
        /// The node's processes, where known.
        processes: Option<usize>,
        /// This process's node-local rank.
        rank: usize,
        /// Subdomains per process.
        per_rank: usize,
        /// The GPUs the process sees.
        gpus: usize,
    },
}

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementError::NotARank { variable, value } => {
                write!(f, "{variable}={value:?} is not a node-local rank: the launcher sets a number (0, 1, ...)")
            }
            PlacementError::NoGpu { node } => {
                write!(f, "{node}: the CUDA driver sees no GPU: check `CUDA_VISIBLE_DEVICES` and the driver")
            }
            PlacementError::SharedGpu { node, processes, rank, per_rank, gpus } => {
                let processes = processes.map_or_else(|| format!("at least {}", rank + 1), |s| s.to_string());
                write!(
                    f,
                    "{node}: {processes} processes with {per_rank} subdomain(s) each, but {gpus} GPU(s): process \
                     {rank} of the node would share a GPU; start fewer ranks per node (e.g. srun \
                     --ntasks-per-node={}) or allow sharing with STENCIL_OVERSUBSCRIBE=1",
                    (*gpus / (*per_rank).max(1)).max(1)
                )
            }
        }
    }
}

impl std::error::Error for PlacementError {}

/// A transport name that is not one ([`Transport::parse`](crate::Transport::parse),
/// `STENCIL_TRANSPORT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportError {
    /// The name given (trimmed, lower case).
    pub given: String,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "transport `{}`: use auto, mpi (host-staged) or nccl", self.given)?;
        if self.given.contains("cuda") || self.given.contains("aware") {
            // Named in the docs: the transport is not built, as no CUDA-aware MPI could test it.
            write!(f, " (a CUDA-aware MPI transport is not built; nccl sends device buffers directly)")?;
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {}
