//! Halo messages on the device: a [`GpuBuffer`] (device memory, with a pinned host mirror for
//! messages between ranks), packed and unpacked by one kernel for all the boxes of a message,
//! and copied between devices by the copy engine (peer copies, ordered by events).

use super::context::Gpu;
use super::error::CudaError;
use super::launch::{KernelArg, LaunchDims};
use super::memory::DeviceAlloc;
use super::peer::ordered_between;
use crate::error::LaunchError;
use crate::executor::{check_parts, BoxPart, MessageBuffer};
use cudarc::driver::result;
use cudarc::driver::sys;

/// A message buffer on a device: device memory, and a pinned host mirror made on first use.
pub struct GpuBuffer {
    mem: DeviceAlloc,
    bytes: usize,
    mirror: Option<PinnedHost>,
}

/// Page-locked host memory (`cuMemHostAlloc`), freed on drop.
struct PinnedHost {
    gpu: Gpu,
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the pinned memory is owned by this value alone; access goes through `&mut`.
unsafe impl Send for PinnedHost {}
// SAFETY: as above: shared references give no access to the bytes.
unsafe impl Sync for PinnedHost {}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        // Copies still queued may use the memory: wait for the stream first.
        let ctx = &self.gpu.inner.ctx;
        // SAFETY: the context and stream are alive (held through `gpu`); the memory came from
        // `malloc_host` and is freed once, after the stream is done with it.
        unsafe {
            ctx.record_err(result::ctx::set_current(ctx.cu_ctx()));
            ctx.record_err(result::stream::synchronize(self.gpu.cu_stream()));
            ctx.record_err(result::free_host(self.ptr.cast()));
        }
    }
}

impl GpuBuffer {
    /// `bytes` bytes of device memory on `gpu`.
    pub(crate) fn new(gpu: &Gpu, bytes: usize) -> Result<Self, CudaError> {
        let mem = DeviceAlloc::new(gpu, bytes, || format!("a halo message buffer of {bytes} bytes"))?;
        Ok(GpuBuffer { mem, bytes, mirror: None })
    }

    /// The device address of the first byte.
    pub(crate) fn device_ptr(&self) -> u64 {
        self.mem.ptr()
    }

    /// The pinned mirror, made on first use.
    fn mirror(&mut self) -> Result<&mut PinnedHost, CudaError> {
        if self.mirror.is_none() {
            let gpu = self.mem.gpu().clone();
            gpu.bind()?;
            let bytes = self.bytes.max(1);
            // SAFETY: plain allocation of page-locked memory, freed by `PinnedHost::drop`.
            let ptr =
                unsafe { result::malloc_host(bytes, 0) }.map_err(|e| gpu.fail("allocating pinned host memory", e))?;
            self.mirror = Some(PinnedHost { gpu, ptr: ptr.cast(), bytes: self.bytes });
        }
        Ok(self.mirror.as_mut().expect("made above"))
    }
}

impl MessageBuffer for GpuBuffer {
    fn capacity(&self) -> usize {
        self.bytes
    }

    fn host_bytes(&mut self) -> Result<&mut [u8], LaunchError> {
        let m = self.mirror()?;
        // SAFETY: `m.bytes` bytes of pinned memory owned by the mirror, borrowed mutably.
        Ok(unsafe { std::slice::from_raw_parts_mut(m.ptr, m.bytes) })
    }

    fn device_address(&self) -> Option<u64> {
        Some(self.device_ptr())
    }
}

/// Boxes one launch packs; more take further launches.
const MAX_PARTS: usize = 16;
/// Bytes of one part in the kernel's parameter block (see `SOURCE`).
const PART_BYTES: usize = 72;

/// The pack kernel: thread `t` moves one element between a field's box (layout order,
/// contiguous axis fastest) and the buffer, in the direction `unpack` says.
const SOURCE: &str = r#"
struct Part {
    unsigned long long field;  // storage start
    long long base;            // element offset of the box's first point
    long long stride[3];       // per layout axis, elements
    long long offset;          // byte offset in the buffer
    long long first;           // first thread of this part
    int len[3];                // points per layout axis
    int elem_bytes;            // 4 or 8
};
struct Parts { int count; int unpack; unsigned long long buffer; Part part[16]; };

extern "C" __global__ void pack_boxes(const Parts parts) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int j = 0;
    while (j + 1 < parts.count && t >= parts.part[j + 1].first) ++j;
    const Part& p = parts.part[j];
    const long long r = t - p.first;
    if (r < 0 || r >= (long long)p.len[0] * p.len[1] * p.len[2]) return;
    const long long c0 = r % p.len[0], c1 = (r / p.len[0]) % p.len[1], c2 = r / ((long long)p.len[0] * p.len[1]);
    const long long e = p.base + c0 * p.stride[0] + c1 * p.stride[1] + c2 * p.stride[2];
    char* b = (char*)parts.buffer + p.offset;
    if (p.elem_bytes == 8) {
        unsigned long long* f = (unsigned long long*)p.field + e;
        unsigned long long* m = (unsigned long long*)b + r;
        if (parts.unpack) *f = *m; else *m = *f;
    } else {
        unsigned int* f = (unsigned int*)p.field + e;
        unsigned int* m = (unsigned int*)b + r;
        if (parts.unpack) *f = *m; else *m = *f;
    }
}
"#;

/// Packs (`unpack` false) or unpacks the parts on `gpu`'s stream, up to [`MAX_PARTS`] per launch.
pub(crate) fn pack<const D: usize>(
    gpu: &Gpu,
    parts: &[BoxPart<'_, D>],
    buffer: &GpuBuffer,
    unpack: bool,
) -> Result<(), LaunchError> {
    check_parts(parts, buffer.capacity(), gpu.home(), &format!("{gpu:?}"))?;
    if let Some(p) = parts.iter().find(|p| p.offset() % p.elem_bytes() != 0) {
        return Err(CudaError::InvalidArgument(format!(
            "halo message: a box at byte {} of the buffer is not aligned to its {}-byte elements",
            p.offset(),
            p.elem_bytes()
        ))
        .into());
    }
    let kernel = gpu.builtin_kernel(SOURCE, "pack_boxes")?;
    let parts: Vec<&BoxPart<'_, D>> = parts.iter().filter(|p| !p.is_empty()).collect();
    for chunk in parts.chunks(MAX_PARTS) {
        let mut block = vec![0u8; 16 + MAX_PARTS * PART_BYTES];
        block[0..4].copy_from_slice(&(chunk.len() as i32).to_le_bytes());
        block[4..8].copy_from_slice(&i32::from(unpack).to_le_bytes());
        block[8..16].copy_from_slice(&buffer.device_ptr().to_le_bytes());
        let mut first = 0i64;
        for (i, part) in chunk.iter().enumerate() {
            let bytes = part_bytes(part, first)?;
            block[16 + i * PART_BYTES..16 + (i + 1) * PART_BYTES].copy_from_slice(&bytes);
            first += part.points() as i64;
        }
        let dims = LaunchDims::covering([first as usize, 1, 1], [256, 1, 1]);
        // SAFETY: the block is the kernel's `Parts` (layout above); every box lies in its field
        // (checked when the part was made) and every message in the buffer (`check_parts`), all
        // on this device and alive while the stream uses them.
        unsafe { gpu.launch(&kernel, dims, &[KernelArg::Bytes(&block)]) }?;
    }
    Ok(())
}

/// One part in the kernel's layout.
fn part_bytes<const D: usize>(part: &BoxPart<'_, D>, first: i64) -> Result<[u8; PART_BYTES], LaunchError> {
    let axes = part.shape().element_order().axes::<D>();
    let strides = part.shape().strides();
    let mut out = [0u8; PART_BYTES];
    let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &part.address().to_le_bytes());
    put(8, &(part.shape().offset(part.at()) as i64).to_le_bytes());
    for r in 0..3 {
        let stride = if r < D { strides[axes[r]] as i64 } else { 0 };
        put(16 + 8 * r, &stride.to_le_bytes());
        let len = if r < D { part.len()[axes[r]] } else { 1 };
        let len = i32::try_from(len)
            .map_err(|_| CudaError::TooLarge { what: "a halo message box's extent".into(), value: len })?;
        put(56 + 4 * r, &len.to_le_bytes());
    }
    put(40, &(part.offset() as i64).to_le_bytes());
    put(48, &first.to_le_bytes());
    put(68, &(part.elem_bytes() as i32).to_le_bytes());
    Ok(out)
}

/// Copies `bytes` bytes from `src` (on `src_gpu`) to `dst` (on `gpu`), ordered after both
/// streams' earlier work and before their later work.
pub(crate) fn copy_buffer(
    gpu: &Gpu,
    dst: &mut GpuBuffer,
    src_gpu: &Gpu,
    src: &GpuBuffer,
    bytes: usize,
) -> Result<(), LaunchError> {
    if bytes > dst.bytes || bytes > src.bytes {
        return Err(CudaError::InvalidArgument(format!(
            "halo message of {bytes} bytes between buffers of {} and {} bytes",
            src.bytes, dst.bytes
        ))
        .into());
    }
    if bytes == 0 {
        return Ok(());
    }
    ordered_between(gpu, src_gpu, |direct| {
        gpu.bind()?;
        // SAFETY: both ranges lie in their allocations (checked above), alive while borrowed,
        // and the copy is ordered after the source's earlier work.
        let r = unsafe {
            if src_gpu.home() == gpu.home() {
                sys::cuMemcpyDtoDAsync_v2(dst.device_ptr(), src.device_ptr(), bytes, gpu.cu_stream())
            } else if direct {
                // Peer access on: a copy between unified addresses, which (unlike a peer copy
                // between contexts) a recorded step can hold.
                sys::cuMemcpyAsync(dst.device_ptr(), src.device_ptr(), bytes, gpu.cu_stream())
            } else {
                sys::cuMemcpyPeerAsync(
                    dst.device_ptr(),
                    gpu.inner.ctx.cu_ctx(),
                    src.device_ptr(),
                    src_gpu.inner.ctx.cu_ctx(),
                    bytes,
                    gpu.cu_stream(),
                )
            }
        };
        r.result().map_err(|e| gpu.fail("a halo message copy", e).into())
    })
}

/// Copies the first `bytes` bytes of the buffer to its mirror (`to_host`) and waits, or from
/// its mirror to the device, in stream order.
pub(crate) fn stage(gpu: &Gpu, buffer: &mut GpuBuffer, bytes: usize, to_host: bool) -> Result<(), LaunchError> {
    if bytes > buffer.bytes {
        return Err(CudaError::InvalidArgument(format!(
            "staging {bytes} bytes of a halo message buffer of {} bytes",
            buffer.bytes
        ))
        .into());
    }
    let what = if to_host { "a halo message to the host" } else { "a halo message from the host" };
    gpu.refuse_while_recording(what)?;
    let device = buffer.device_ptr();
    let host = buffer.mirror()?.ptr;
    if bytes == 0 {
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: both ranges hold `bytes` bytes (checked above); the mirror is pinned and lives as
    // long as the buffer, whose drop waits for the stream.
    let r = unsafe {
        if to_host {
            sys::cuMemcpyDtoHAsync_v2(host.cast(), device, bytes, gpu.cu_stream())
        } else {
            sys::cuMemcpyHtoDAsync_v2(device, host.cast(), bytes, gpu.cu_stream())
        }
    };
    r.result().map_err(|e| gpu.fail(what, e))?;
    if to_host {
        gpu.synchronize()?;
    }
    Ok(())
}
