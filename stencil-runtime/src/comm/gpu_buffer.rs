//! Halo messages on the device: a [`GpuBuffer`] (device memory, with a pinned host mirror for
//! messages between ranks), packed and unpacked by one kernel for all the boxes of a message,
//! and copied between devices by the copy engine (peer copies, ordered by events).
//!
//! A copy out of a buffer on another stream waits for the event recorded after the buffer's
//! last pack, not for everything its owner has issued, and the owner's next write into the
//! buffer waits for the copies out of it. So the copies of one exchange wait for the packs
//! alone: a subdomain's copies do not queue behind its neighbours' copies, nor theirs behind
//! its own, however many neighbours each has and in whatever order host threads issue them.

use super::peer::{enable_peer_access, ordered_between};
use crate::comm::buffer::{direct_halos, DirectHalos};
use crate::domain::DistributionError;
use crate::error::LaunchError;
use crate::executor::{check_pairs, check_parts, BoxPart, MessageBuffer};
use crate::gpu::cuda::DeviceAlloc;
use crate::gpu::cuda::Gpu;
use crate::gpu::cuda::{ArgumentError, CudaError};
use crate::gpu::cuda::{KernelArg, LaunchDims};
use cudarc::driver::result;
use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::CudaEvent;
use std::sync::{Mutex, PoisonError};

/// A message buffer on a device: device memory, and a pinned host mirror made on first use.
pub struct GpuBuffer {
    mem: DeviceAlloc,
    bytes: usize,
    mirror: Option<PinnedHost>,
    order: Mutex<Order>,
}

/// The events that order copies out of a buffer on other streams (module docs).
#[derive(Default)]
struct Order {
    /// Recorded on the owner's stream after the last pack into the buffer; `None` after any
    /// other write, or when the pack was recorded into a step.
    packed: Option<CudaEvent>,
    /// Recorded on other streams after each copy out of the buffer since its last write.
    readers: Vec<CudaEvent>,
}

const NO_TIMING: Option<CUevent_flags> = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);

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
        Ok(GpuBuffer { mem, bytes, mirror: None, order: Mutex::default() })
    }

    fn order(&self) -> std::sync::MutexGuard<'_, Order> {
        self.order.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Orders a write into the buffer on `gpu`'s stream after the copies out of it (their
    /// events; waited for on the host while `gpu` records a step, as a recording cannot wait
    /// for work outside it), and forgets the last pack.
    fn before_write(&self, gpu: &Gpu) -> Result<(), CudaError> {
        let mut order = self.order();
        order.packed = None;
        if order.readers.is_empty() {
            return Ok(());
        }
        let recording = gpu.is_recording()?;
        for copied in order.readers.drain(..) {
            // A finished copy needs no wait (a wait for another device's event costs the
            // stream several microseconds even then).
            let done = copied.try_is_complete().map_err(|e| gpu.fail("querying a copy's event", e))?;
            if done {
                continue;
            } else if recording {
                copied.synchronize().map_err(|e| gpu.fail("waiting for a copy out of a halo buffer", e))?;
            } else {
                gpu.stream().wait(&copied).map_err(|e| gpu.fail("waiting for a copy out of a halo buffer", e))?;
            }
        }
        Ok(())
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

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        // Copies out of the buffer on other streams may still read it (the memory's own drop
        // waits for the owner's stream only). Errors are kept in the contexts.
        for copied in self.order().readers.drain(..) {
            let _ = copied.synchronize();
        }
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
        return Err(CudaError::InvalidArgument(ArgumentError::UnalignedBox {
            offset: p.offset(),
            elem_bytes: p.elem_bytes(),
        })
        .into());
    }
    let kernel = gpu.builtin_kernel(SOURCE, "pack_boxes")?;
    if !unpack {
        buffer.before_write(gpu)?;
    }
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
    if !unpack && !gpu.is_recording()? {
        let packed = gpu.stream().record_event(NO_TIMING).map_err(|e| gpu.fail("recording an event", e))?;
        buffer.order().packed = Some(packed);
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
/// streams' earlier work and before their later work. Where `src` was packed last (and nothing
/// is being recorded), "earlier work" of `src_gpu` is the pack alone, and its later work waits
/// only where it writes `src` again (module docs).
pub(crate) fn copy_buffer(
    gpu: &Gpu,
    dst: &mut GpuBuffer,
    src_gpu: &Gpu,
    src: &GpuBuffer,
    bytes: usize,
) -> Result<(), LaunchError> {
    if bytes > dst.bytes || bytes > src.bytes {
        return Err(CudaError::InvalidArgument(ArgumentError::MessageSize {
            bytes,
            source: src.bytes,
            destination: dst.bytes,
        })
        .into());
    }
    if bytes == 0 {
        return Ok(());
    }
    dst.before_write(gpu)?;
    let same_stream = src_gpu.home() == gpu.home() && src_gpu.cu_stream() == gpu.cu_stream();
    let recording = gpu.is_recording()? || src_gpu.is_recording()?;
    let mut order = src.order();
    let Some(packed) = order.packed.as_ref().filter(|_| !same_stream && !recording) else {
        drop(order);
        return ordered_between(gpu, src_gpu, |direct| issue_copy(gpu, dst, src_gpu, src, bytes, direct));
    };
    let direct = src_gpu.home() == gpu.home() || enable_peer_access(gpu, src_gpu)?;
    gpu.stream().wait(packed).map_err(|e| gpu.fail("waiting for a halo message's pack", e))?;
    issue_copy(gpu, dst, src_gpu, src, bytes, direct)?;
    let copied = gpu.stream().record_event(NO_TIMING).map_err(|e| gpu.fail("recording an event", e))?;
    order.readers.push(copied);
    Ok(())
}

/// Issues the copy of [`copy_buffer`] on `gpu`'s stream (`direct`: peer access is on).
fn issue_copy(
    gpu: &Gpu,
    dst: &GpuBuffer,
    src_gpu: &Gpu,
    src: &GpuBuffer,
    bytes: usize,
    direct: bool,
) -> Result<(), LaunchError> {
    gpu.bind()?;
    // SAFETY: both ranges lie in their allocations (checked by the caller), alive while
    // borrowed, and the caller orders the copy after the source's pack.
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
}

/// A point in a GPU stream's work ([`Messages::mark`](crate::Messages::mark)): an event, the
/// stream it was recorded on, and whether that stream was being recorded (an event of a
/// recording cannot be queried).
pub struct GpuMark {
    event: CudaEvent,
    home: usize,
    stream: usize,
    recorded: bool,
}

/// Marks the work issued on `gpu`'s stream so far.
pub(crate) fn mark(gpu: &Gpu) -> Result<GpuMark, LaunchError> {
    let event = gpu.stream().record_event(NO_TIMING).map_err(|e| gpu.fail("recording an event", e))?;
    Ok(GpuMark { event, home: gpu.home(), stream: gpu.cu_stream() as usize, recorded: gpu.is_recording()? })
}

/// Orders `gpu`'s later work after `mark`: nothing on the stream that recorded it, nothing when it
/// has passed (a wait for another device's event costs a stream several microseconds even then).
pub(crate) fn after(gpu: &Gpu, mark: &GpuMark) -> Result<(), LaunchError> {
    if mark.home == gpu.home() && mark.stream == gpu.cu_stream() as usize {
        return Ok(());
    }
    let recording = gpu.is_recording()?;
    if !mark.recorded {
        let done = mark.event.try_is_complete().map_err(|e| gpu.fail("querying an event", e))?;
        if done {
            return Ok(());
        }
        if recording {
            // A recording cannot wait for work outside it: wait here.
            return mark.event.synchronize().map_err(|e| gpu.fail("waiting for another stream's event", e).into());
        }
    }
    gpu.stream().wait(&mark.event).map_err(|e| gpu.fail("waiting for another stream's event", e))?;
    Ok(())
}

/// Pairs one direct copy launch takes; more take further launches.
const MAX_PAIRS: usize = 16;
/// Bytes of one pair in the kernel's parameter block (see `COPY_SOURCE`).
const PAIR_BYTES: usize = 104;

/// The direct copy kernel: thread `t` moves one element from a box of one field (possibly in
/// another device's memory, through peer access) to a box of another, both walked in layout
/// order.
const COPY_SOURCE: &str = r#"
struct Pair {
    unsigned long long from, into;   // storage starts
    long long from_base, into_base;  // element offsets of the boxes' first points
    long long from_stride[3];        // per layout axis, elements
    long long into_stride[3];
    long long first;                 // first thread of this pair
    int len[3];                      // points per layout axis
    int elem_bytes;                  // 4 or 8
};
struct Pairs { int count; int pad; Pair pair[16]; };

extern "C" __global__ void copy_boxes(const Pairs pairs) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int j = 0;
    while (j + 1 < pairs.count && t >= pairs.pair[j + 1].first) ++j;
    const Pair& p = pairs.pair[j];
    const long long r = t - p.first;
    if (r < 0 || r >= (long long)p.len[0] * p.len[1] * p.len[2]) return;
    const long long c0 = r % p.len[0], c1 = (r / p.len[0]) % p.len[1], c2 = r / ((long long)p.len[0] * p.len[1]);
    const long long a = p.from_base + c0 * p.from_stride[0] + c1 * p.from_stride[1] + c2 * p.from_stride[2];
    const long long b = p.into_base + c0 * p.into_stride[0] + c1 * p.into_stride[1] + c2 * p.into_stride[2];
    if (p.elem_bytes == 8) {
        ((unsigned long long*)p.into)[b] = ((const unsigned long long*)p.from)[a];
    } else {
        ((unsigned int*)p.into)[b] = ((const unsigned int*)p.from)[a];
    }
}
"#;

/// Copies each box of `from` (fields of `src_gpu`, read through peer access on another device)
/// into the box of `into` at the same index, on `gpu`'s stream, up to [`MAX_PAIRS`] per launch.
/// The caller orders it ([`mark`], [`after`]).
pub(crate) fn copy_boxes<const D: usize>(
    gpu: &Gpu,
    into: &[BoxPart<'_, D>],
    src_gpu: &Gpu,
    from: &[BoxPart<'_, D>],
) -> Result<(), LaunchError> {
    copy_boxes_from(gpu, &[(src_gpu, into, from)])
}

/// [`copy_boxes`] from several GPUs (or this one) at once: the copy engine takes what it would
/// take from each source alone ([`engine_may_copy`]), and every other box is moved by one
/// kernel launch (up to [`MAX_PAIRS`] boxes each), whichever field it reads.
pub(crate) fn copy_boxes_from<const D: usize>(
    gpu: &Gpu,
    sources: &[(&Gpu, &[BoxPart<'_, D>], &[BoxPart<'_, D>])],
) -> Result<(), LaunchError> {
    for (src_gpu, into, from) in sources {
        check_pairs(into, from, (gpu.home(), src_gpu.home()), &format!("{gpu:?}"))?;
        if src_gpu.home() != gpu.home() && !enable_peer_access(gpu, src_gpu)? {
            return Err(DistributionError::NoDirectCopy { executor: "a GPU without peer access to the other" }.into());
        }
    }
    let setting = direct_halos()?;
    let mut pairs = Vec::new();
    for (_, into, from) in sources {
        let engine = engine_may_copy(setting, into.iter().filter(|p| !p.is_empty()).count());
        for (to, part) in into.iter().zip(from.iter()).filter(|(p, _)| !p.is_empty()) {
            if !(engine && by_copy_engine(gpu, to, part)?) {
                pairs.push((to, part));
            }
        }
    }
    if pairs.is_empty() {
        return Ok(());
    }
    let kernel = gpu.builtin_kernel(COPY_SOURCE, "copy_boxes")?;
    for chunk in pairs.chunks(MAX_PAIRS) {
        let mut block = vec![0u8; 8 + MAX_PAIRS * PAIR_BYTES];
        block[0..4].copy_from_slice(&(chunk.len() as i32).to_le_bytes());
        let mut first = 0i64;
        for (i, (to, part)) in chunk.iter().enumerate() {
            let bytes = pair_bytes(to, part, first)?;
            block[8 + i * PAIR_BYTES..8 + (i + 1) * PAIR_BYTES].copy_from_slice(&bytes);
            first += to.points() as i64;
        }
        let dims = LaunchDims::covering([first as usize, 1, 1], [256, 1, 1]);
        // SAFETY: the block is the kernel's `Pairs` (layout above); every box lies in its field
        // (checked when the part was made), the boxes pair up (`check_pairs`), the fields read
        // are on this device or reachable through peer access (enabled above), and all are
        // alive while the streams use them (the exchange's callers keep them borrowed).
        unsafe { gpu.launch(&kernel, dims, &[KernelArg::Bytes(&block)]) }?;
    }
    Ok(())
}

/// Whether the copy engine may take the boxes of one exchange side, or of one source of a round
/// (`boxes` of them, one per field): under the default, only a side of one box. The copy engine takes one operation per
/// box and shares no SMs with the kernels it overlaps; one kernel moves every box of a side at
/// once, which wins where a side carries several fields.
fn engine_may_copy(setting: DirectHalos, boxes: usize) -> bool {
    match setting {
        DirectHalos::On => boxes == 1,
        DirectHalos::Engine => true,
        DirectHalos::Kernel | DirectHalos::Off => false,
    }
}

/// Rows at least this long go by the copy engine (no SMs taken from the kernels the copy
/// overlaps); shorter ones, which the copy engine moves slowly, by the kernel.
const ENGINE_ROW_BYTES: usize = 512;

/// The pitch and rows per plane of a box's field when its layout is dense (the layout's first
/// axis contiguous, each later axis spanning whole earlier ones), in bytes and rows.
fn pitch_of<const D: usize>(part: &BoxPart<'_, D>) -> Option<(usize, usize)> {
    let axes = part.shape().element_order().axes::<D>();
    let strides = part.shape().strides();
    let elem = part.elem_bytes();
    if strides[axes[0]] != 1 {
        return None;
    }
    match D {
        1 => Some((part.len()[axes[0]] * elem, 1)),
        2 => Some((strides[axes[1]] * elem, part.len()[axes[1]])),
        _ => strides[axes[2]]
            .is_multiple_of(strides[axes[1]])
            .then(|| (strides[axes[1]] * elem, strides[axes[2]] / strides[axes[1]])),
    }
}

/// Issues one box's copy from field to field on the copy engine (a 3D copy between unified
/// addresses) when its rows are long enough and both fields dense; `Ok(false)` (nothing issued)
/// otherwise.
fn by_copy_engine<const D: usize>(
    gpu: &Gpu,
    into: &BoxPart<'_, D>,
    from: &BoxPart<'_, D>,
) -> Result<bool, LaunchError> {
    let axes = into.shape().element_order().axes::<D>();
    let elem = into.elem_bytes();
    let width = into.len()[axes[0]] * elem;
    let (Some((into_pitch, into_height)), Some((from_pitch, from_height))) = (pitch_of(into), pitch_of(from)) else {
        return Ok(false);
    };
    if width < ENGINE_ROW_BYTES || D > 3 {
        return Ok(false);
    }
    let len = |r: usize| if r < D { into.len()[axes[r]] } else { 1 };
    let at = |p: &BoxPart<'_, D>| p.address() + (p.shape().offset(p.at()) * elem) as u64;
    let copy = sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        srcHost: std::ptr::null(),
        srcDevice: at(from),
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: from_pitch,
        srcHeight: from_height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        dstHost: std::ptr::null_mut(),
        dstDevice: at(into),
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: into_pitch,
        dstHeight: into_height,
        WidthInBytes: width,
        Height: len(1),
        Depth: len(2),
    };
    gpu.bind()?;
    // SAFETY: both boxes lie in their fields (checked when the parts were made) and pair up
    // (`check_pairs`); the pitches and plane heights are the fields' own, so every row copied
    // is a row of the box; the fields are alive while the stream uses them (the exchange's
    // callers keep them borrowed), and peer access is on where they are on two devices.
    let r = unsafe { sys::cuMemcpy3DAsync_v2(&copy, gpu.cu_stream()) };
    r.result().map_err(|e| gpu.fail("a halo copy from field to field", e))?;
    Ok(true)
}

/// One pair in the direct copy kernel's layout: the layout axes of `into`'s field.
fn pair_bytes<const D: usize>(
    into: &BoxPart<'_, D>,
    from: &BoxPart<'_, D>,
    first: i64,
) -> Result<[u8; PAIR_BYTES], LaunchError> {
    let axes = into.shape().element_order().axes::<D>();
    let (from_strides, into_strides) = (from.shape().strides(), into.shape().strides());
    let mut out = [0u8; PAIR_BYTES];
    let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &from.address().to_le_bytes());
    put(8, &into.address().to_le_bytes());
    put(16, &(from.shape().offset(from.at()) as i64).to_le_bytes());
    put(24, &(into.shape().offset(into.at()) as i64).to_le_bytes());
    for r in 0..3 {
        let (fs, is) = if r < D { (from_strides[axes[r]] as i64, into_strides[axes[r]] as i64) } else { (0, 0) };
        put(32 + 8 * r, &fs.to_le_bytes());
        put(56 + 8 * r, &is.to_le_bytes());
        let len = if r < D { into.len()[axes[r]] } else { 1 };
        let len =
            i32::try_from(len).map_err(|_| CudaError::TooLarge { what: "a halo box's extent".into(), value: len })?;
        put(88 + 4 * r, &len.to_le_bytes());
    }
    put(80, &first.to_le_bytes());
    put(100, &(into.elem_bytes() as i32).to_le_bytes());
    Ok(out)
}

/// Copies the first `bytes` bytes of the buffer to its mirror (`to_host`) and waits, or from
/// its mirror to the device, in stream order.
pub(crate) fn stage(gpu: &Gpu, buffer: &mut GpuBuffer, bytes: usize, to_host: bool) -> Result<(), LaunchError> {
    if bytes > buffer.bytes {
        return Err(CudaError::InvalidArgument(ArgumentError::Staging { bytes, buffer: buffer.bytes }).into());
    }
    let what = if to_host { "a halo message to the host" } else { "a halo message from the host" };
    gpu.refuse_while_recording(what)?;
    let device = buffer.device_ptr();
    let host = buffer.mirror()?.ptr;
    if bytes == 0 {
        return Ok(());
    }
    if !to_host {
        buffer.before_write(gpu)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{ErasedField, Executor, Messages};
    use crate::field::{Field3, Shape3};

    #[test]
    fn the_copy_engine_takes_a_side_of_one_box_by_default() {
        assert!(engine_may_copy(DirectHalos::On, 1));
        assert!(!engine_may_copy(DirectHalos::On, 2) && !engine_may_copy(DirectHalos::On, 6));
        assert!(engine_may_copy(DirectHalos::Engine, 1) && engine_may_copy(DirectHalos::Engine, 6));
        assert!(!engine_may_copy(DirectHalos::Kernel, 1) && !engine_may_copy(DirectHalos::Off, 1));
    }

    /// A copy out of a send buffer waits for the pack alone, so the sender's next pack into it
    /// must wait for the copy. Here the copy queues behind long work on the receiver's stream
    /// while the sender, idle, packs other values at once: the copy must still deliver the first
    /// ones. Runs where there is a GPU (on one, the two handles have streams of their own).
    #[test]
    fn a_send_buffer_is_not_packed_again_before_the_copy_out_of_it_has_read_it() {
        let count = Gpu::count().unwrap_or(0);
        if count == 0 {
            eprintln!("skipped: no GPU");
            return;
        }
        let (sender, receiver) = (Gpu::new(0).unwrap(), Gpu::new(count - 1).unwrap());
        let shape = Shape3::new([64, 64, 64]);
        let points = 64 * 64 * 64;
        let bytes = points * 8;
        let packed = |value: f64, buffer: &mut GpuBuffer| {
            let mut f = sender.upload(&Field3::from_fn(shape, |_| value)).unwrap();
            let erased = ErasedField::of(&mut f);
            sender.pack(&[erased.part([0; 3], [64; 3], 0).unwrap()], buffer).unwrap();
            f // dropped by the caller, after the pack has been issued
        };
        let (mut send, mut recv) = (sender.alloc_buffer(bytes).unwrap(), receiver.alloc_buffer(bytes).unwrap());
        let first = packed(1.0, &mut send);
        // About 10 ms of copies (40 GB moved) on the receiver's stream, ahead of the copy out of
        // `send`.
        let big = Shape3::new([512, 512, 256]);
        let (a, mut b) = (receiver.alloc::<f64, 3>(big).unwrap(), receiver.alloc::<f64, 3>(big).unwrap());
        for _ in 0..40 {
            receiver.copy(&mut b, &a).unwrap();
        }
        receiver.copy_buffer(&mut recv, &sender, &send, bytes).unwrap();
        let second = packed(2.0, &mut send);
        receiver.buffer_to_host(&mut recv, bytes).unwrap();
        let got: Vec<f64> = recv.host_bytes().unwrap()[..bytes]
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        drop((first, second));
        let wrong = got.iter().filter(|&&v| v != 1.0).count();
        assert_eq!(got.len(), points);
        assert_eq!(wrong, 0, "{wrong} of {points} values arrived from the second pack");
    }
}
