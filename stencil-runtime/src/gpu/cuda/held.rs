//! Held scalars on a GPU: one value in device memory ([`DeviceHeld`]), set on the stream, and
//! the fold of several of them (the distributed executor's parts' pieces of a reduction) by a
//! one-thread kernel that reads them on this device or on peers.

use super::error::CudaError;
use super::memory::DeviceField;
use super::{Gpu, KernelArg, LaunchDims};
use crate::executor::{HeldStorage, Messages};
use crate::field::Element;
use crate::reduce::ReduceOp;
use crate::LaunchError;
use stencil_codegen::ir::ScalarType;

/// A held scalar on a GPU ([`Gpu`]'s `HeldScalar<T>`): one value in device memory, which
/// kernels read through its address when they run.
#[derive(Debug)]
pub struct DeviceHeld<T: Element> {
    pub(crate) field: DeviceField<T, 1>,
}

impl<T: Element> DeviceHeld<T> {
    /// Sets the value on `gpu`'s stream, after the work issued before: 32-bit words written by
    /// `cuMemsetD32Async` (nothing for the host to keep alive, and recordable: inside a recorded
    /// step the value is the one given when recording).
    pub(crate) fn set(&self, gpu: &Gpu, value: T) -> Result<(), CudaError> {
        let mut bytes = Vec::with_capacity(8);
        value.put_le(&mut bytes);
        gpu.bind()?;
        for (k, word) in bytes.chunks(4).enumerate() {
            let word = u32::from_le_bytes(word.try_into().expect("elements are 4 or 8 bytes"));
            // SAFETY: word `k` of the one element of this held scalar's device allocation.
            unsafe {
                cudarc::driver::sys::cuMemsetD32Async(self.field.device_ptr() + 4 * k as u64, word, 1, gpu.cu_stream())
            }
            .result()
            .map_err(|e| gpu.fail("setting a held scalar", e))?;
        }
        Ok(())
    }
}

impl<T: Element> HeldStorage<T> for DeviceHeld<T> {
    fn address(&self) -> u64 {
        self.field.device_ptr()
    }
    fn home(&self) -> usize {
        crate::FieldStorage::home(&self.field)
    }
}

/// The most held scalars one fold reads (its parameter block holds their addresses).
pub(crate) const MAX_SOURCES: usize = 64;

/// One thread folds `count` doubles (each an `f64` or an `f32` value) from the identity in
/// order, as a reducer folds its pieces: `acc + v`, or `v` where it is smaller (larger) or NaN.
const SOURCE: &str = r#"
struct Fold {
    unsigned long long into;
    int count;
    int op;
    int single;
    unsigned long long from[64];
};

extern "C" __global__ void fold_held(const Fold a) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    if (a.single) {
        float acc = a.op == 0 ? 0.0f : (a.op == 1 ? __int_as_float(0x7f800000) : __int_as_float(0xff800000));
        for (int i = 0; i < a.count; ++i) {
            const float v = (float)*(const double*)a.from[i];
            if (a.op == 0) acc = __fadd_rn(acc, v);
            else if (a.op == 1) acc = (v < acc || isnan(v)) ? v : acc;
            else acc = (v > acc || isnan(v)) ? v : acc;
        }
        *(double*)a.into = (double)acc;
    } else {
        double acc = a.op == 0 ? 0.0 : (a.op == 1 ? __longlong_as_double(0x7ff0000000000000LL)
                                                    : __longlong_as_double(0xfff0000000000000LL));
        for (int i = 0; i < a.count; ++i) {
            const double v = *(const double*)a.from[i];
            if (a.op == 0) acc = __dadd_rn(acc, v);
            else if (a.op == 1) acc = (v < acc || isnan(v)) ? v : acc;
            else acc = (v > acc || isnan(v)) ? v : acc;
        }
        *(double*)a.into = acc;
    }
}
"#;

/// [`Executor::fold_held_from`](crate::Executor::fold_held_from) on `gpu`: after the work issued
/// on each source's stream, one thread on `gpu`'s stream folds the sources into `into`; `false`
/// (nothing issued) where a source is beyond this device's reach or there are too many.
pub(crate) fn fold(
    gpu: &Gpu,
    into: &DeviceHeld<f64>,
    op: ReduceOp,
    elem: ScalarType,
    sources: &[(&Gpu, &DeviceHeld<f64>)],
) -> Result<bool, LaunchError> {
    if sources.len() > MAX_SOURCES || into.home() != gpu.home() {
        return Ok(false);
    }
    for (src, _) in sources {
        if !gpu.reaches(src)? {
            return Ok(false);
        }
    }
    for (src, _) in sources {
        if src.cu_stream() != gpu.cu_stream() {
            gpu.after(&src.mark()?)?;
        }
    }
    let op_code: i32 = match op {
        ReduceOp::Sum => 0,
        ReduceOp::Min => 1,
        ReduceOp::Max => 2,
    };
    let mut block = vec![0u8; 24 + MAX_SOURCES * 8];
    block[0..8].copy_from_slice(&into.address().to_le_bytes());
    block[8..12].copy_from_slice(&(sources.len() as i32).to_le_bytes());
    block[12..16].copy_from_slice(&op_code.to_le_bytes());
    block[16..20].copy_from_slice(&i32::from(elem == ScalarType::F32).to_le_bytes());
    for (i, (_, h)) in sources.iter().enumerate() {
        block[24 + 8 * i..32 + 8 * i].copy_from_slice(&h.address().to_le_bytes());
    }
    let kernel = gpu.builtin_kernel(SOURCE, "fold_held")?;
    let one = LaunchDims { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0 };
    // SAFETY: the block is the kernel's `Fold` (8 + 4 + 4 + 4 bytes, padding to 24, then 64
    // addresses); `into` is a live `f64` on this device, each source a live `f64` on this
    // device or a peer whose access is enabled (`reaches`), written before the marks waited for.
    unsafe { gpu.launch(&kernel, one, &[KernelArg::Bytes(&block)]) }?;
    Ok(true)
}
