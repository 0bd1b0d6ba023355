//! Loaded kernels: a [`Kernel`] (an entry point of a module loaded on a [`Gpu`](super::Gpu)), and the
//! per-device table's entries of kernels prepared for stencil launches. Plain data below the
//! device handle, so the handle can hold the table without depending on the launch path.

use cudarc::driver::CudaFunction;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use stencil_codegen::printer::cuda::{
    print_boxes_kernel, print_first_pass, print_kernel, print_point_pass, print_steps_kernel, CudaKernel, Geometry,
    Strategy, StrategyError, TimeTiling,
};
use stencil_codegen::StencilIr;

/// A kernel entry point loaded on a [`Gpu`](super::Gpu), ready for
/// [`Gpu::launch`](super::Gpu::launch). Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    function: CudaFunction,
    entry: Arc<str>,
    /// Dynamic shared memory the function has been opted in to (0: the default 48 KiB).
    dynamic_shared: Arc<AtomicU32>,
}

impl Kernel {
    /// A kernel of a loaded function.
    pub(crate) fn new(function: CudaFunction, entry: &str) -> Self {
        Kernel { function, entry: entry.into(), dynamic_shared: Arc::default() }
    }

    /// The entry point's name.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    pub(crate) fn function(&self) -> &CudaFunction {
        &self.function
    }

    pub(crate) fn entry_arc(&self) -> Arc<str> {
        self.entry.clone()
    }

    pub(crate) fn dynamic_shared_opted_in(&self) -> u32 {
        self.dynamic_shared.load(Ordering::Relaxed)
    }

    pub(crate) fn set_dynamic_shared_opted_in(&self, bytes: u32) {
        self.dynamic_shared.fetch_max(bytes, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({})", self.entry)
    }
}

/// What selects a compiled kernel: the stencil (the address of its embedded IR, unique per
/// stencil in a binary), which of its kernels and the layout facts the source was specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LaunchKey {
    pub(crate) stencil: usize,
    pub(crate) kernel: KernelChoice,
    pub(crate) geometry: Geometry,
}

/// Which kernel of a stencil a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelChoice {
    /// One step under a blocking strategy.
    Step(Strategy),
    /// Several steps per sweep of the ping-pong pair whose input is parameter `input`.
    Steps { tiling: TimeTiling, input: usize },
    /// First pass number `n` of a two-pass strategy (the same kernels for every such strategy).
    FirstPass(usize),
    /// The point pass of a two-pass strategy, where the stencil has one.
    PointPass,
    /// Several ranges in one launch (`boxes.rs`).
    Boxes,
}

impl KernelChoice {
    /// The kernel's source, printed for `ir` over fields laid out as `geometry` says.
    pub(crate) fn print(&self, ir: &StencilIr, geometry: &Geometry) -> Result<CudaKernel, StrategyError> {
        match *self {
            KernelChoice::Step(strategy) => print_kernel(ir, strategy, geometry),
            KernelChoice::Steps { tiling, input } => print_steps_kernel(ir, tiling, input, geometry),
            KernelChoice::FirstPass(n) => print_first_pass(ir, n, geometry),
            KernelChoice::PointPass => print_point_pass(ir, geometry),
            KernelChoice::Boxes => print_boxes_kernel(ir, geometry),
        }
    }
}

/// A loaded kernel with the launch shape its printer computed.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub(crate) kernel: Kernel,
    pub(crate) block: [u32; 3],
    pub(crate) points_per_block: [u32; 3],
    pub(crate) shared_bytes: u32,
    /// See `CudaKernel::line_points`.
    pub(crate) line_points: u32,
}

/// The two loaded kernels of a reducing stencil (see `reduce.rs`), pass 1's points per thread
/// per chunk and how many of its blocks a multiprocessor holds at once.
pub(crate) struct ReducePrepared {
    pub(crate) pass1: Kernel,
    pub(crate) pass2: Kernel,
    pub(crate) points_per_thread: usize,
    pub(crate) blocks_per_sm: usize,
}
