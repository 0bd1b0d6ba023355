//! CUDA C for a stencil and a blocking [`Strategy`]: one kernel source per (stencil, strategy,
//! element types, layout), with the launch configuration computed next to it.
//!
//! Every strategy works in *layout axes*: `c` is the contiguous axis (thread x, coalesced, vector
//! loads), `m` the middle one, `o` the outer one (the marching axis). For `Ijk` fields that is
//! (i, j, k); for `Kij` (k, i, j). A 2D stencil has a phantom `o` of length 1, a 1D one phantom
//! `m` and `o`. Strides are baked into the source as constants so that every neighbour offset is
//! an immediate; the range (origin and lengths) is a kernel argument, so one kernel serves every
//! range over fields of one shape.

mod boxes;
mod c_body;
mod column;
mod column_staged;
mod depot;
mod kernel;
mod plane_tile;
mod point_per_thread;
mod queue;
mod reduce;
mod shared_tile3d;
mod staging;
mod temporal;
mod text;
mod zmarch;

pub use boxes::{boxes_param, LaunchBox, BOXES_MAX, BOXES_PLANES, BOXES_THREADS};
pub use c_body::{c_type, Access};
pub use column::COLUMN_BLOCK;
pub use reduce::{print_reduce_kernel, ReduceKernel, REDUCE_THREADS, REDUCE_UNROLL};
pub use temporal::{steps_output, TimeTiling, MAX_SHARED_BYTES};

use crate::analysis::Analysis;
use crate::ir::{ParamId, StencilIr};
use crate::pipeline::{prepare, Prepared, Target};
use std::fmt;

/// How the points of a range are mapped to CUDA threads, and where neighbours are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One thread per point, a 3D block; neighbours through the read-only cache (Sai et al. 2020, `gmem`).
    PointPerThread {
        /// Threads per block along (c, m, o).
        block: [u32; 3],
    },
    /// A 2D block over (c, m); each thread walks `points_per_thread` points along `o`, keeping the
    /// `o`-neighbours of every field in a register queue, and (where the range is aligned) handles
    /// 16 bytes of consecutive points with vector loads and stores (ASUCA's (64, 2, n/16) launch).
    /// Blocks of 256 threads or more load one plane ahead where the queues fit the registers.
    ZMarch {
        /// Threads along c (each handles 16 bytes of points when vectorised).
        block_x: u32,
        /// Threads along m.
        block_y: u32,
        /// Points each thread walks along o.
        points_per_thread: u32,
    },
    /// 2.5D streaming (Micikevicius; Sai et al. 2020, `st_smem`): z-marching whose in-plane neighbours
    /// come from the current (c, m) plane in shared memory, with the block's halo, as vectors of
    /// consecutive points (double-buffered, one barrier per plane); the o column in a register
    /// queue; each block walks `STREAM_PLANES` planes.
    Stream25D {
        /// Tile (= block) width along c.
        tile_x: u32,
        /// Tile height along m.
        tile_y: u32,
    },
    /// A 3D tile with its halo in shared memory, one thread per point (Sai et al. 2020, `smem_u`).
    SharedTile3D {
        /// Tile (= block) size along (c, m, o).
        tile: [u32; 3],
    },
    /// For stencils with point functions (the data depot of Xu et al. 2019): a 2D block over (c, m) walks
    /// `planes` planes along o, one point per thread, and keeps each point function's values
    /// in shared memory (a ring of planes where they are needed at several o offsets, the tile
    /// widened by the offsets across the plane where other threads read them), so each value
    /// is computed once per block rather than once per point that reads it. Without point
    /// functions it is a plain z-march through the read-only cache.
    Depot {
        /// Threads along c.
        block_x: u32,
        /// Threads along m.
        block_y: u32,
        /// Planes each block walks along o.
        planes: u32,
    },
    /// For stencils that read point functions at neighbours: two kernels. The first writes the
    /// values the body reads at neighbours into scratch fields (one thread per point, over the
    /// range grown by the offsets they are read at; [`print_first_pass`]), the second is the
    /// body reading them back from those fields, z-marching as [`Strategy::ZMarch`] with these
    /// sizes (see [`crate::passes::materialise()`]). The runtime allocates the scratch fields and
    /// keeps them for later launches.
    TwoPass {
        /// Threads along c of the second pass.
        block_x: u32,
        /// Threads along m of the second pass.
        block_y: u32,
        /// Points each thread of the second pass walks along o.
        points_per_thread: u32,
    },
    /// As [`Strategy::TwoPass`], the second pass streaming as [`Strategy::Stream25D`].
    TwoPassStream {
        /// Tile width along c of the second pass.
        tile_x: u32,
        /// Tile height along m of the second pass.
        tile_y: u32,
    },
}

/// The blocking of [`print_first_pass`]: its values are all read at the point itself, so
/// z-marching with 16-byte accesses runs it as a copy.
pub const FIRST_PASS: Strategy = Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 };

impl Strategy {
    /// The strategy the runtime picks when none is given: for 3D stencils the depot kernel where
    /// they have point functions (the Euler stage with point functions: 1.8× the inlined form,
    /// see the guide's chapter on writing stencils, "Point functions"), else z-marching with 16-byte accesses (the fastest
    /// strategy in every `gpu_bench` measurement; see "What the GPU rewards"); one thread per
    /// point for 1D and 2D, where there is no third axis to march along.
    pub fn default_for(ir: &StencilIr) -> Strategy {
        if ir.dim == 3 && !ir.point_fns.is_empty() {
            Strategy::Depot { block_x: 32, block_y: 8, planes: 16 }
        } else if ir.dim == 3 {
            Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 }
        } else {
            Strategy::PointPerThread { block: [128, 2, 1] }
        }
    }

    /// A short name for tables and kernel names (`zmarch_64x4x16`).
    pub fn label(&self) -> String {
        match self {
            Strategy::PointPerThread { block: [x, y, z] } => format!("point_{x}x{y}x{z}"),
            Strategy::ZMarch { block_x, block_y, points_per_thread } => {
                format!("zmarch_{block_x}x{block_y}x{points_per_thread}")
            }
            Strategy::Stream25D { tile_x, tile_y } => format!("stream25d_{tile_x}x{tile_y}"),
            Strategy::SharedTile3D { tile: [x, y, z] } => format!("smem3d_{x}x{y}x{z}"),
            Strategy::Depot { block_x, block_y, planes } => format!("depot_{block_x}x{block_y}x{planes}"),
            Strategy::TwoPass { block_x, block_y, points_per_thread } => {
                format!("twopass_{block_x}x{block_y}x{points_per_thread}")
            }
            Strategy::TwoPassStream { tile_x, tile_y } => format!("twopassstream_{tile_x}x{tile_y}"),
        }
    }

    /// Whether the strategy runs two kernels with scratch fields between them
    /// ([`Strategy::TwoPass`], [`Strategy::TwoPassStream`]).
    pub fn is_two_pass(&self) -> bool {
        matches!(self, Strategy::TwoPass { .. } | Strategy::TwoPassStream { .. })
    }

    /// The one-kernel strategy of a two-pass strategy's second pass (`self` for the others).
    pub fn second_pass(&self) -> Strategy {
        match *self {
            Strategy::TwoPass { block_x, block_y, points_per_thread } => {
                Strategy::ZMarch { block_x, block_y, points_per_thread }
            }
            Strategy::TwoPassStream { tile_x, tile_y } => Strategy::Stream25D { tile_x, tile_y },
            other => other,
        }
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    /// The strategy a [`Strategy::label`] names (`zmarch_64x4x16`, `point_128x2x1`,
    /// `stream25d_32x8`, `smem3d_32x4x4`, `depot_32x4x16`, `twopass_64x4x16`,
    /// `twopassstream_32x8`).
    fn from_str(label: &str) -> Result<Self, String> {
        let bad = || {
            format!("`{label}` is not a strategy label: use e.g. zmarch_64x4x16, point_128x2x1, stream25d_32x8, smem3d_32x4x4, depot_32x4x16, twopass_64x4x16 or twopassstream_32x8")
        };
        let (kind, sizes) = label.split_once('_').ok_or_else(bad)?;
        let n: Vec<u32> = sizes.split('x').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad())?;
        Ok(match (kind, n.as_slice()) {
            ("point", &[x, y, z]) => Strategy::PointPerThread { block: [x, y, z] },
            ("zmarch", &[block_x, block_y, points_per_thread]) => {
                Strategy::ZMarch { block_x, block_y, points_per_thread }
            }
            ("stream25d", &[tile_x, tile_y]) => Strategy::Stream25D { tile_x, tile_y },
            ("smem3d", &[x, y, z]) => Strategy::SharedTile3D { tile: [x, y, z] },
            ("depot", &[block_x, block_y, planes]) => Strategy::Depot { block_x, block_y, planes },
            ("twopass", &[block_x, block_y, points_per_thread]) => {
                Strategy::TwoPass { block_x, block_y, points_per_thread }
            }
            ("twopassstream", &[tile_x, tile_y]) => Strategy::TwoPassStream { tile_x, tile_y },
            _ => return Err(bad()),
        })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The layout facts a kernel is specialised for (from the fields' shape, identical for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Stride in elements of each stencil axis (i, j, k); unused axes 0.
    pub strides: [i64; 3],
    /// The stencil axes in layout order (contiguous first); phantom axes of a 1D/2D stencil are
    /// numbered `dim..3`.
    pub layout: [usize; 3],
    /// Points per thread along c handled with one vector access per field (1 = scalar). The
    /// runtime sets it only when the range's first point and every row are aligned to it.
    pub lanes: u32,
}

impl Geometry {
    /// Stride of a layout axis (0 for phantom axes).
    fn layout_stride(&self, layout_axis: usize) -> i64 {
        let a = self.layout[layout_axis];
        if a < 3 {
            self.strides[a]
        } else {
            0
        }
    }

    /// A stencil offset (i, j, k) in layout axes (c, m, o).
    fn layout_offset_of(&self, offset: [i32; 3]) -> [i32; 3] {
        std::array::from_fn(|l| if self.layout[l] < 3 { offset[self.layout[l]] } else { 0 })
    }

    /// Linear element offset of a stencil offset.
    fn linear(&self, offset: [i32; 3]) -> i64 {
        (0..3).map(|a| offset[a] as i64 * self.strides[a]).sum()
    }
}

/// A kernel ready to compile and launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaKernel {
    /// Complete CUDA C source (no includes needed).
    pub source: String,
    /// The `extern "C" __global__` function's name.
    pub entry: String,
    /// Threads per block.
    pub block: [u32; 3],
    /// Points each block covers along (c, m, o): the grid is `ceil(range / per_block)`
    /// (`u32::MAX`: the whole axis in one block, as a column sweep's column).
    pub points_per_block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
    /// Points of a 128-byte line along c (for the widest element), when the kernel aligns its
    /// threads to lines: the first thread along c starts at the line boundary at or before the
    /// range's first point, and the threads before the range do nothing, so every warp reads
    /// and writes whole lines (0 or 1: no alignment).
    pub line_points: u32,
}

impl CudaKernel {
    /// Grid dimensions for a range of `len` points along the layout axes (c, m, o) whose first
    /// point is element `origin` of the fields' storage.
    pub fn grid(&self, len: [usize; 3], origin: i64) -> [u32; 3] {
        grid(self.points_per_block, self.line_points, len, origin)
    }
}

/// Grid dimensions of a kernel covering `points_per_block` points per block, aligned to lines
/// of `line_points` points along c (see [`CudaKernel::line_points`]), for a range of `len`
/// points from element `origin`.
pub fn grid(points_per_block: [u32; 3], line_points: u32, len: [usize; 3], origin: i64) -> [u32; 3] {
    // The kernel takes `origin & (line_points - 1)`: the same as this for powers of two only.
    debug_assert!(line_points <= 1 || line_points.is_power_of_two(), "line of {line_points} points");
    let shift = if line_points > 1 { origin.rem_euclid(line_points as i64) as usize } else { 0 };
    let len = [len[0] + shift, len[1], len[2]];
    std::array::from_fn(|a| (len[a].div_ceil(points_per_block[a] as usize)).max(1) as u32)
}

/// Why a strategy cannot print a kernel for a stencil.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrategyError {
    /// A block or tile size is zero or exceeds CUDA's limits.
    BadBlock {
        /// The strategy.
        strategy: String,
        /// What is wrong and what to use.
        reason: String,
    },
    /// The stencil reduces: it runs as its reduction kernel ([`print_reduce_kernel`]), whatever
    /// the strategy.
    Reduces {
        /// The stencil.
        stencil: String,
    },
    /// The stencil cannot run several time steps per sweep ([`print_steps_kernel`]).
    NotSteppable {
        /// The stencil.
        stencil: String,
        /// Why, and what to change.
        reason: String,
    },
    /// A two-pass strategy for a stencil that cannot be split ([`crate::passes::materialise()`]).
    NoTwoPass(crate::passes::materialise::MaterialiseError),
}

impl fmt::Display for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrategyError::BadBlock { strategy, reason } => write!(f, "strategy {strategy}: {reason}"),
            StrategyError::Reduces { stencil } => write!(
                f,
                "stencil `{stencil}` folds into a reduction, so it runs as its one-pass reduction kernel \
                 (print_reduce_kernel), not under a blocking strategy"
            ),
            StrategyError::NotSteppable { stencil, reason } => {
                write!(f, "stencil `{stencil}` cannot run several time steps per sweep: {reason}")
            }
            StrategyError::NoTwoPass(e) => write!(f, "no two-pass kernels: {e}"),
        }
    }
}

impl std::error::Error for StrategyError {}

/// Planes each block of `Strategy::Stream25D` walks (the hand-written kernel of this form was
/// fastest with 32 on the 25-point update: 83.0% of copy against 82.3% with 16).
pub const STREAM_PLANES: u32 = 32;

/// Prints the kernel of `ir` for `strategy` and fields laid out as `geometry` says (analysing
/// `ir` first; a caller printing several kernels of one stencil analyses it once and calls
/// [`print_kernel_with`]).
/// A stencil's point functions are inlined first, except for [`Strategy::Depot`], which keeps
/// them (the field facts are still those of the inlined IR).
///
/// For a two-pass strategy ([`Strategy::TwoPass`], [`Strategy::TwoPassStream`]) it prints the
/// second pass, the body reading the written-out values (the first is [`print_first_pass`]).
pub fn print_kernel(ir: &StencilIr, strategy: Strategy, geometry: &Geometry) -> Result<CudaKernel, StrategyError> {
    if strategy.is_two_pass() {
        let split = crate::passes::materialise(ir).map_err(StrategyError::NoTwoPass)?;
        return print_kernel(&split.second, strategy.second_pass(), geometry);
    }
    let target = match strategy {
        Strategy::Depot { .. } if ir.sweep.is_none() => Target::CudaDepot,
        _ => Target::Cuda,
    };
    let prepared = prepare(ir, target);
    print_kernel_with(&prepared.ir, &prepared.analysis, strategy, geometry)
}

/// Prints the kernel that runs `ir` over several disjoint boxes of points in one launch,
/// z-marching with blocks shaped per box (point functions inlined), with vector accesses where
/// `geometry` allows them in every box: its last parameter is the boxes, as [`boxes_param`]
/// writes them, and its grid `[blocks, 1, 1]` of [`BOXES_THREADS`] threads. An
/// error for a column sweep or a reduction.
pub fn print_boxes_kernel(ir: &StencilIr, geometry: &Geometry) -> Result<CudaKernel, StrategyError> {
    let not = |reason: &str| StrategyError::BadBlock { strategy: "boxes".into(), reason: reason.into() };
    if ir.reduces() {
        return Err(StrategyError::Reduces { stencil: ir.name.clone() });
    }
    if ir.sweep.is_some() {
        return Err(not("a column sweep runs whole columns, not boxes"));
    }
    let prepared = prepare(ir, Target::Cuda);
    let strategy = Strategy::ZMarch { block_x: BOXES_THREADS, block_y: 1, points_per_thread: BOXES_PLANES };
    let k = kernel::KernelParts::new(&prepared.ir, &prepared.analysis, strategy, geometry);
    let k = kernel::KernelParts { entry: format!("{}_boxes", ir.name), ..k };
    Ok(zmarch::print(&k, BOXES_THREADS, 1, BOXES_PLANES, zmarch::Columns::Boxes))
}

/// Prints first pass `pass` of `ir` under a two-pass strategy: it writes the values the body
/// reads at neighbours over the same box of offsets into the scratch fields that follow the
/// stencil's parameters ([`crate::passes::materialise()`]), over fields laid out as `geometry`
/// says (the geometry of the range grown by that pass's
/// [`ValuePass::lo`](crate::passes::materialise::ValuePass::lo) and `hi`). An error where `ir`
/// cannot be split or has no pass `pass`.
pub fn print_first_pass(ir: &StencilIr, pass: usize, geometry: &Geometry) -> Result<CudaKernel, StrategyError> {
    let split = crate::passes::materialise(ir).map_err(StrategyError::NoTwoPass)?;
    let count = split.first.len();
    let first = split.first.get(pass).ok_or_else(|| {
        StrategyError::NoTwoPass(crate::passes::materialise::MaterialiseError::NoSuchPass {
            stencil: ir.name.clone(),
            pass,
            count,
        })
    })?;
    print_kernel(&first.ir, FIRST_PASS, geometry)
}

/// Prints the point pass of `ir` under a two-pass strategy, where it has one
/// ([`Materialised::point`](crate::passes::materialise::Materialised::point)): over the launch's
/// range, it stores the parts of the sums that need values at the point only and writes the
/// values out; the first pass then covers only the rest of the grown range.
pub fn print_point_pass(ir: &StencilIr, geometry: &Geometry) -> Result<CudaKernel, StrategyError> {
    let split = crate::passes::materialise(ir).map_err(StrategyError::NoTwoPass)?;
    let point = split.point.ok_or_else(|| {
        StrategyError::NoTwoPass(crate::passes::materialise::MaterialiseError::NoPointPass { stencil: ir.name.clone() })
    })?;
    print_kernel(&point, FIRST_PASS, geometry)
}

/// Prints the kernel of `ir`, whose analysis is `analysis` (of the inlined IR), for `strategy`
/// and `geometry`.
///
/// # Panics
/// If `ir` still has point functions and the strategy is not [`Strategy::Depot`]: inline them
/// first (`passes::inline_point_fns`).
pub fn print_kernel_with(
    ir: &StencilIr,
    analysis: &Analysis,
    strategy: Strategy,
    geometry: &Geometry,
) -> Result<CudaKernel, StrategyError> {
    assert!(
        ir.point_fns.is_empty() || matches!(strategy, Strategy::Depot { .. }),
        "stencil `{}`: inline its point functions (passes::inline_point_fns) before printing CUDA",
        ir.name
    );
    if ir.reduces() {
        return Err(StrategyError::Reduces { stencil: ir.name.clone() });
    }
    // A column sweep runs its one kernel whatever the strategy (one thread per column).
    if let Some(sweep) = &ir.sweep {
        let k = kernel::KernelParts::new(ir, analysis, strategy, geometry);
        let k = kernel::KernelParts { entry: format!("{}_column", ir.name), ..k };
        return Ok(column::print(&k, sweep));
    }
    let threads: u32 = match strategy {
        Strategy::PointPerThread { block } => block.iter().product(),
        Strategy::ZMarch { block_x, block_y, points_per_thread } => {
            if points_per_thread == 0 {
                return Err(bad(strategy, "points_per_thread must be at least 1"));
            }
            block_x * block_y
        }
        Strategy::Stream25D { tile_x, tile_y } => tile_x * tile_y,
        Strategy::SharedTile3D { tile } => tile.iter().product(),
        Strategy::Depot { block_x, block_y, planes } => {
            if planes == 0 {
                return Err(bad(strategy, "planes must be at least 1"));
            }
            block_x * block_y
        }
        Strategy::TwoPass { .. } | Strategy::TwoPassStream { .. } => {
            return Err(bad(strategy, "a two-pass strategy prints two kernels: use print_kernel and print_first_pass"))
        }
    };
    if threads == 0 || threads > 1024 {
        return Err(bad(strategy, &format!("a block needs 1 to 1024 threads, this one has {threads}")));
    }
    let k = kernel::KernelParts::new(ir, analysis, strategy, geometry);
    Ok(match strategy {
        Strategy::PointPerThread { block } => point_per_thread::print(&k, block),
        Strategy::ZMarch { block_x, block_y, points_per_thread } => {
            zmarch::print(&k, block_x, block_y, points_per_thread, zmarch::Columns::Range { tiled: false })
        }
        Strategy::Stream25D { tile_x, tile_y } => {
            zmarch::print(&k, tile_x, tile_y, STREAM_PLANES, zmarch::Columns::Range { tiled: true })
        }
        Strategy::SharedTile3D { tile } => shared_tile3d::print(&k, tile),
        Strategy::Depot { block_x, block_y, planes } => depot::print(&k, block_x, block_y, planes)?,
        Strategy::TwoPass { .. } | Strategy::TwoPassStream { .. } => unreachable!("refused above"),
    })
}

/// Prints the temporally blocked kernel of `ir` ([`TimeTiling`]): `tiling.steps` time steps
/// per sweep of a stencil whose field parameter `input` is read and whose one written field
/// ([`steps_output`]) becomes the next step's `input`. Point functions are inlined first.
pub fn print_steps_kernel(
    ir: &StencilIr,
    tiling: TimeTiling,
    input: ParamId,
    geometry: &Geometry,
) -> Result<CudaKernel, StrategyError> {
    with_steps_kernel(ir, tiling, input, geometry, |k, output, shared| {
        temporal::print(k, tiling, input, output, shared)
    })
}

/// Whether [`print_steps_kernel`] prints a kernel for these arguments: the output parameter
/// and the shared memory a block uses if so, its error if not.
pub fn check_steps_kernel(
    ir: &StencilIr,
    tiling: TimeTiling,
    input: ParamId,
    geometry: &Geometry,
) -> Result<(ParamId, u32), StrategyError> {
    with_steps_kernel(ir, tiling, input, geometry, |_, output, shared| (output, shared))
}

/// Checks a temporally blocked kernel's arguments and calls `then` with its parts, the output
/// parameter and the shared memory a block uses.
fn with_steps_kernel<R>(
    ir: &StencilIr,
    tiling: TimeTiling,
    input: ParamId,
    geometry: &Geometry,
    then: impl FnOnce(&kernel::KernelParts, ParamId, u32) -> R,
) -> Result<R, StrategyError> {
    let Prepared { ir, analysis } = prepare(ir, Target::Cuda);
    let ir = &*ir;
    let not = |reason: String| StrategyError::NotSteppable { stencil: ir.name.clone(), reason };
    let output = steps_output(ir, &analysis, input).map_err(not)?;
    let k = kernel::KernelParts::new(ir, &analysis, Strategy::default_for(ir), geometry);
    let k = kernel::KernelParts { entry: format!("{}_{}", ir.name, tiling.label()), ..k };
    let fa = k.field(input);
    let (lo, hi) = k.reach(fa);
    let offsets: Vec<[i32; 3]> = fa.offsets.iter().map(|&o| k.geo.layout_offset_of(o)).collect();
    let planes = temporal::shared_planes(&offsets, hi);
    let shared = temporal::check(tiling, lo, hi, planes, fa.elem.size_bytes() as u32)
        .map_err(|reason| StrategyError::BadBlock { strategy: tiling.label(), reason })?;
    Ok(then(&k, output, shared))
}

fn bad(strategy: Strategy, reason: &str) -> StrategyError {
    StrategyError::BadBlock { strategy: strategy.label(), reason: reason.to_string() }
}

/// Whether the stencil reads any field at a non-zero offset (strategies that stage neighbours in
/// shared memory have nothing to stage otherwise).
pub fn has_neighbours(ir: &StencilIr) -> bool {
    prepare(ir, Target::Facts).analysis.has_neighbours()
}
