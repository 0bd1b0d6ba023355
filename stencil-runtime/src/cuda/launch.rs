//! Running a stencil on device fields: the same launch checks as on the host, then the kernel
//! for the chosen strategy (printed, compiled once, cached), its grid, and its arguments.

use super::device::{Gpu, KernelArg, LaunchDims};
use crate::cuda_source::{cuda_kernel, layout_lengths, Strategy};
use crate::device_args::ArgValue;
use crate::launch::{validate, LaunchError};
use crate::range::Loop;
use crate::stencil::Stencil;

/// NVRTC options of every stencil kernel. `--fmad=false` keeps `a * b + c` two roundings, as
/// the CPU nest computes it, so GPU and CPU results agree bit for bit where the arithmetic is
/// the same; the kernels are memory-bound, so fused multiply-adds would buy nothing measurable.
pub const KERNEL_OPTIONS: &[&str] = &["--fmad=false"];

/// A range with an explicit CUDA strategy: `range.with_strategy(s).run_on(&gpu, F, args)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrategyLoop<const D: usize> {
    range: Loop<D>,
    strategy: Strategy,
}

impl<const D: usize> Loop<D> {
    /// This range with an explicit CUDA strategy instead of [`Strategy::default_for`].
    pub fn with_strategy(self, strategy: Strategy) -> StrategyLoop<D> {
        StrategyLoop { range: self, strategy }
    }

    /// Runs `stencil` over this range on device fields with the default strategy for it.
    /// The launch is asynchronous on `gpu`'s stream; downloads wait for it.
    pub fn run_on<S: Stencil<D>>(&self, gpu: &Gpu, stencil: S, args: S::DeviceArgs<'_>) -> Result<(), LaunchError> {
        self.with_strategy(Strategy::default_for(S::ir())).run_on(gpu, stencil, args)
    }
}

impl<const D: usize> StrategyLoop<D> {
    /// Runs `stencil` over the range on device fields with this strategy.
    pub fn run_on<S: Stencil<D>>(&self, gpu: &Gpu, stencil: S, args: S::DeviceArgs<'_>) -> Result<(), LaunchError> {
        let _ = stencil;
        let range = &self.range;
        let values = S::device_args(args);
        let shapes: Vec<_> = S::INFO
            .fields
            .iter()
            .zip(values.iter().filter_map(|v| match v {
                ArgValue::Field { shape, .. } => Some(*shape),
                _ => None,
            }))
            .map(|(info, shape)| (info.name, shape))
            .collect();
        let shape = validate(range, &S::INFO, &shapes)?;
        if range.points() == 0 {
            return Ok(());
        }
        let kernel = cuda_kernel::<S, D>(self.strategy, &shape, range).map_err(|e| {
            LaunchError::Cuda(super::CudaError::InvalidArgument(format!("stencil `{}`: {e}", S::INFO.name)))
        })?;
        let (compiled, _) = gpu.kernel_with_stats(&kernel.source, &kernel.entry, KERNEL_OPTIONS)?;
        let len = layout_lengths(&shape, range);
        let mut args: Vec<KernelArg> = values
            .iter()
            .map(|v| match *v {
                ArgValue::F32(x) => KernelArg::F32(x),
                ArgValue::F64(x) => KernelArg::F64(x),
                ArgValue::I32(x) => KernelArg::I32(x),
                ArgValue::U32(x) => KernelArg::U32(x),
                ArgValue::Bool(x) => KernelArg::I32(x as i32),
                ArgValue::Field { ptr, .. } => KernelArg::Ptr(ptr),
            })
            .collect();
        let too_long = |n: usize| {
            i32::try_from(n).map_err(|_| {
                LaunchError::Cuda(super::CudaError::InvalidArgument(format!(
                    "stencil `{}`: range of {n} points along one axis exceeds the kernel's 32-bit coordinates",
                    S::INFO.name
                )))
            })
        };
        args.push(KernelArg::I64(shape.offset(range.begin()) as i64));
        for n in len {
            args.push(KernelArg::I32(too_long(n)?));
        }
        let dims = LaunchDims { grid: kernel.grid(len), block: kernel.block, shared_bytes: kernel.shared_bytes };
        gpu.launch(&compiled, dims, &args)?;
        Ok(())
    }
}
