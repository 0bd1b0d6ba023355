//! [`Executor::add_at`](crate::Executor::add_at) on a GPU: values added at many points of a
//! field in one launch, the points and values passed in the kernel's parameter block (no upload).

use super::{DeviceField, Gpu, KernelArg, LaunchDims};
use crate::error::LaunchError;
use crate::field::Element;

/// Additions one launch takes (the parameter block stays under the 4 KiB every driver allows);
/// more take further launches, in order.
const PER_LAUNCH: usize = 240;

/// The kernel: thread `i` handles the run of equal offsets that entry `i` starts (the entries
/// are sorted by offset, stably), adding its values in their order, so that a point listed
/// twice gets the bits of two additions one after the other. `kind`: 0 f64, 1 f32, 2 32-bit
/// integer (wrapping).
const SOURCE: &str = r#"
struct Adds {
    unsigned long long field;
    int count;
    int kind;
    unsigned long long offset[240];
    unsigned long long bits[240];
};

extern "C" __global__ void add_at(const Adds a) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.count || (i > 0 && a.offset[i - 1] == a.offset[i])) return;
    const unsigned long long o = a.offset[i];
    if (a.kind == 0) {
        double* f = (double*)a.field;
        double v = f[o];
        for (int j = i; j < a.count && a.offset[j] == o; ++j) v = __dadd_rn(v, __longlong_as_double(a.bits[j]));
        f[o] = v;
    } else if (a.kind == 1) {
        float* f = (float*)a.field;
        float v = f[o];
        for (int j = i; j < a.count && a.offset[j] == o; ++j) v = __fadd_rn(v, __uint_as_float((unsigned int)a.bits[j]));
        f[o] = v;
    } else {
        unsigned int* f = (unsigned int*)a.field;
        unsigned int v = f[o];
        for (int j = i; j < a.count && a.offset[j] == o; ++j) v += (unsigned int)a.bits[j];
        f[o] = v;
    }
}
"#;

/// Adds `values` at the storage `offsets` of `field` (checked to lie in its interior), in order
/// per point, on `gpu`'s stream.
pub(crate) fn add_at<T: Element, const D: usize>(
    gpu: &Gpu,
    field: &mut DeviceField<T, D>,
    offsets: &[usize],
    values: &[T],
) -> Result<(), LaunchError> {
    if field.gpu().home() != gpu.home() {
        return Err(LaunchError::WrongDevice { stencil: "add_at", field: "field", executor: format!("{gpu:?}") });
    }
    let kind: i32 = match T::NAME {
        "f64" => 0,
        "f32" => 1,
        _ => 2,
    };
    let mut entries: Vec<(usize, u64)> = offsets
        .iter()
        .zip(values)
        .map(|(&o, &v)| {
            let mut bytes = Vec::with_capacity(8);
            v.put_le(&mut bytes);
            bytes.resize(8, 0);
            (o, u64::from_le_bytes(bytes.try_into().expect("eight bytes")))
        })
        .collect();
    // Stable: the values of one point keep their order.
    entries.sort_by_key(|e| e.0);
    if entries.is_empty() {
        return Ok(());
    }
    let kernel = gpu.builtin_kernel(SOURCE, "add_at")?;
    for chunk in entries.chunks(PER_LAUNCH) {
        let mut block = vec![0u8; 16 + PER_LAUNCH * 16];
        block[0..8].copy_from_slice(&field.device_ptr().to_le_bytes());
        block[8..12].copy_from_slice(&(chunk.len() as i32).to_le_bytes());
        block[12..16].copy_from_slice(&kind.to_le_bytes());
        for (i, (o, bits)) in chunk.iter().enumerate() {
            block[16 + 8 * i..24 + 8 * i].copy_from_slice(&(*o as u64).to_le_bytes());
            let at = 16 + 8 * PER_LAUNCH + 8 * i;
            block[at..at + 8].copy_from_slice(&bits.to_le_bytes());
        }
        let dims = LaunchDims::covering([chunk.len(), 1, 1], [256, 1, 1]);
        // SAFETY: the block is the kernel's `Adds` (layout above: 8 + 4 + 4 bytes, then the
        // offsets and the values, 8 bytes each); every offset lies in the field's storage
        // (inside its interior, checked by the caller), whose element `kind` names; the field
        // is on this device and borrowed mutably until the call returns, and dropping it waits
        // for the stream.
        unsafe { gpu.launch(&kernel, dims, &[KernelArg::Bytes(&block)]) }?;
    }
    Ok(())
}
