//! Box copies between device fields, on one GPU or between two (`cuMemcpy3DPeerAsync`, peer
//! access enabled once per pair of contexts): what [`crate::Domains::exchange`] moves halos with.
//! The copy is issued on the destination's stream, after an event of the source's stream, and
//! the source's stream waits for the copy before its later work, so neither side's kernels race
//! with it.

use super::context::Gpu;
use super::error::CudaError;
use super::launch::{KernelArg, LaunchDims};
use super::memory::DeviceField;
use crate::error::LaunchError;
use crate::executor::check_box;
use crate::field::{Element, Shape};
use cudarc::driver::sys::{self, CUevent_flags, CUmemorytype, CUresult};

/// [`Executor::copy_box`](crate::Executor::copy_box) on GPUs.
pub(crate) fn copy_box<T: Element, const D: usize>(
    gpu: &Gpu,
    dst: &mut DeviceField<T, D>,
    dst_at: [usize; D],
    src: Option<(&Gpu, &DeviceField<T, D>)>,
    src_at: [usize; D],
    len: [usize; D],
) -> Result<(), LaunchError> {
    let foreign = |what: &str, field_gpu: &Gpu, exec: &Gpu| {
        (field_gpu.home() != exec.home()).then(|| {
            LaunchError::Decomposition(format!(
                "box copy: the {what} field lives on {field_gpu:?}, not on its executor {exec:?}: pass each field \
                 with the executor that allocated it"
            ))
        })
    };
    if let Some(e) = foreign("destination", dst.gpu(), gpu) {
        return Err(e);
    }
    let (src_gpu, src_ptr, src_shape) = match src {
        Some((g, f)) => {
            if let Some(e) = foreign("source", f.gpu(), g) {
                return Err(e);
            }
            (g.clone(), f.device_ptr(), *f.shape())
        }
        None => (gpu.clone(), dst.device_ptr(), *dst.shape()),
    };
    let dst_shape = *dst.shape();
    check_box(&dst_shape, dst_at, &src_shape, src_at, len)?;
    if len.contains(&0) {
        return Ok(());
    }
    let elem = std::mem::size_of::<T>();
    let [width, _, _] = spans(&dst_shape, len);
    ordered_between(gpu, &src_gpu, || {
        if width * elem < NARROW_ROW_BYTES && src_gpu.ordinal() == gpu.ordinal() {
            copy_box_kernel(gpu, dst.device_ptr(), &dst_shape, dst_at, src_ptr, &src_shape, src_at, len, elem)
        } else {
            copy_box_3d(gpu, dst.device_ptr(), &dst_shape, dst_at, &src_gpu, src_ptr, &src_shape, src_at, len, elem)
        }
    })
}

/// Issues `copy` (work on `gpu`'s stream that reads memory of `src_gpu`) after the earlier work
/// of `src_gpu`'s stream, and makes `src_gpu`'s later work wait for it: neither side's kernels
/// race with the copy. Enables peer access between different devices first.
pub(super) fn ordered_between(
    gpu: &Gpu,
    src_gpu: &Gpu,
    copy: impl FnOnce() -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let same_stream = src_gpu.home() == gpu.home() && src_gpu.cu_stream() == gpu.cu_stream();
    if src_gpu.home() != gpu.home() {
        enable_peer_access(gpu, src_gpu)?;
    }
    let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
    if !same_stream {
        let written = src_gpu.stream().record_event(no_timing).map_err(|e| src_gpu.fail("recording an event", e))?;
        gpu.stream().wait(&written).map_err(|e| gpu.fail("waiting for the source's stream", e))?;
    }
    copy()?;
    if !same_stream {
        let copied = gpu.stream().record_event(no_timing).map_err(|e| gpu.fail("recording an event", e))?;
        src_gpu.stream().wait(&copied).map_err(|e| src_gpu.fail("waiting for a box copy", e))?;
    }
    Ok(())
}

/// Rows narrower than this many bytes are copied by a kernel (one thread per point) on one
/// device: the copy engine moves a 3D box of narrow rows slowly (26 GB/s for 16-byte rows of a
/// 512³ field, against about 800 GB/s for wide ones).
const NARROW_ROW_BYTES: usize = 256;

/// The box-copy kernel: point `t` of the box (contiguous axis fastest) from `src` to `dst`,
/// both described by a base offset and strides in layout order; 4- or 8-byte elements.
const COPY_SOURCE: &str = r#"
extern "C" __global__ void copy_box(unsigned long long dst, unsigned long long src, long long dbase,
    long long sbase, long long d0, long long d1, long long d2, long long s0, long long s1, long long s2,
    int l0, int l1, int l2, int elem_bytes) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= (long long)l0 * l1 * l2) return;
    const long long c0 = t % l0, c1 = (t / l0) % l1, c2 = t / ((long long)l0 * l1);
    const long long d = dbase + c0 * d0 + c1 * d1 + c2 * d2;
    const long long s = sbase + c0 * s0 + c1 * s1 + c2 * s2;
    if (elem_bytes == 8) ((unsigned long long*)dst)[d] = ((const unsigned long long*)src)[s];
    else ((unsigned int*)dst)[d] = ((const unsigned int*)src)[s];
}
"#;

/// A box copy on one device by [`COPY_SOURCE`], on `gpu`'s stream.
#[allow(clippy::too_many_arguments)]
fn copy_box_kernel<const D: usize>(
    gpu: &Gpu,
    dst_ptr: u64,
    dst_shape: &Shape<D>,
    dst_at: [usize; D],
    src_ptr: u64,
    src_shape: &Shape<D>,
    src_at: [usize; D],
    len: [usize; D],
    elem: usize,
) -> Result<(), LaunchError> {
    let kernel = gpu.builtin_kernel(COPY_SOURCE, "copy_box")?;
    let axes = dst_shape.element_order().axes::<D>();
    let strides = |shape: &Shape<D>| {
        let s = shape.strides();
        std::array::from_fn::<i64, 3, _>(|r| if r < D { s[axes[r]] as i64 } else { 0 })
    };
    let (ds, ss) = (strides(dst_shape), strides(src_shape));
    let l: [usize; 3] = std::array::from_fn(|r| if r < D { len[axes[r]] } else { 1 });
    let int =
        |v: usize| i32::try_from(v).map_err(|_| CudaError::TooLarge { what: "a box copy's extent".into(), value: v });
    let args = [
        KernelArg::Ptr(dst_ptr),
        KernelArg::Ptr(src_ptr),
        KernelArg::I64(dst_shape.offset(dst_at) as i64),
        KernelArg::I64(src_shape.offset(src_at) as i64),
        KernelArg::I64(ds[0]),
        KernelArg::I64(ds[1]),
        KernelArg::I64(ds[2]),
        KernelArg::I64(ss[0]),
        KernelArg::I64(ss[1]),
        KernelArg::I64(ss[2]),
        KernelArg::I32(int(l[0])?),
        KernelArg::I32(int(l[1])?),
        KernelArg::I32(int(l[2])?),
        KernelArg::I32(elem as i32),
    ];
    let points: usize = l.iter().product();
    // SAFETY: the arguments match the kernel's parameters; `check_box` kept both boxes inside
    // their fields' storage, both on this device and alive while the stream uses them.
    unsafe { gpu.launch(&kernel, LaunchDims::covering([points, 1, 1], [256, 1, 1]), &args) }?;
    Ok(())
}

/// A box copy by the copy engine (`cuMemcpy3DPeerAsync`), on `gpu`'s stream.
#[allow(clippy::too_many_arguments)]
fn copy_box_3d<const D: usize>(
    gpu: &Gpu,
    dst_ptr: u64,
    dst_shape: &Shape<D>,
    dst_at: [usize; D],
    src_gpu: &Gpu,
    src_ptr: u64,
    src_shape: &Shape<D>,
    src_at: [usize; D],
    len: [usize; D],
    elem: usize,
) -> Result<(), LaunchError> {
    let (sx, sy, sz, spitch, sheight) = layout(src_shape, src_at, elem);
    let (dx, dy, dz, dpitch, dheight) = layout(dst_shape, dst_at, elem);
    let [width, height, depth] = spans(dst_shape, len);
    let copy = sys::CUDA_MEMCPY3D_PEER {
        srcXInBytes: sx,
        srcY: sy,
        srcZ: sz,
        srcLOD: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src_ptr,
        srcArray: std::ptr::null_mut(),
        srcContext: src_gpu.inner.ctx.cu_ctx(),
        srcPitch: spitch,
        srcHeight: sheight,
        dstXInBytes: dx,
        dstY: dy,
        dstZ: dz,
        dstLOD: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst_ptr,
        dstArray: std::ptr::null_mut(),
        dstContext: gpu.inner.ctx.cu_ctx(),
        dstPitch: dpitch,
        dstHeight: dheight,
        WidthInBytes: width * elem,
        Height: height,
        Depth: depth,
    };
    gpu.bind()?;
    // SAFETY: `check_box` kept both boxes inside their fields' storage (pitched as described),
    // both allocations are alive (borrowed here, and dropping a field waits for its stream),
    // and the copy is ordered after the source's earlier work by the event above.
    unsafe { sys::cuMemcpy3DPeerAsync(&copy, gpu.cu_stream()) }
        .result()
        .map_err(|e| gpu.fail("a box copy between device fields", e))?;
    Ok(())
}

/// Lets `gpu`'s context read `peer`'s memory directly (NVLink or PCIe peer-to-peer); where the
/// devices cannot, peer copies still work through the driver's staging.
fn enable_peer_access(gpu: &Gpu, peer: &Gpu) -> Result<(), CudaError> {
    let mut done = gpu.inner.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if done.contains(&peer.home()) {
        return Ok(());
    }
    done.insert(peer.home());
    // Handles of one device share its context: nothing to enable. Between devices, ask first
    // (enabling an unsupported pair is an error the driver logs).
    if gpu.ordinal() == peer.ordinal() {
        return Ok(());
    }
    let mut can = 0;
    // SAFETY: writes one int; both ordinals are devices the driver reported.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, gpu.ordinal() as i32, peer.ordinal() as i32) }
        .result()
        .map_err(|e| gpu.fail("asking whether peer access is possible", e))?;
    if can == 0 {
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: both contexts are alive; the call only changes access permissions.
    let r = unsafe { sys::cuCtxEnablePeerAccess(peer.inner.ctx.cu_ctx(), 0) };
    match r {
        CUresult::CUDA_SUCCESS
        | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        | CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        | CUresult::CUDA_ERROR_INVALID_DEVICE => {}
        other => return Err(gpu.fail("enabling peer access", cudarc::driver::DriverError(other))),
    }
    Ok(())
}

/// Where storage point `at` of a field of `shape` is for a 3D copy: the byte offset along the
/// contiguous axis (the leading pad included), the row and slice indices, the row pitch in bytes
/// and the rows per slice. A 1D or 2D field has phantom axes of one point.
fn layout<const D: usize>(shape: &Shape<D>, at: [usize; D], elem: usize) -> (usize, usize, usize, usize, usize) {
    let axes = shape.element_order().axes::<D>();
    let s = shape.strides();
    let c = shape.lead() + at[axes[0]];
    let (m, pitch) = if D > 1 { (at[axes[1]], s[axes[1]]) } else { (0, shape.pitch()) };
    // Rows per slice: in 2D the whole field is one slice of all its rows.
    let (o, height) = match D {
        0 | 1 => (0, 1),
        2 => (0, shape.extent()[axes[1]]),
        _ => (at[axes[2]], s[axes[2]] / s[axes[1]]),
    };
    (c * elem, m, o, pitch * elem, height)
}

/// A box's points along the layout axes (contiguous first), 1 for a phantom axis.
fn spans<const D: usize>(shape: &Shape<D>, len: [usize; D]) -> [usize; 3] {
    let axes = shape.element_order().axes::<D>();
    std::array::from_fn(|rank| if rank < D { len[axes[rank]] } else { 1 })
}

/// Copies a box of a device field to or from a dense host buffer (axis order of the layout,
/// contiguous axis fastest), then waits: the host side of a rank-to-rank exchange.
fn host_box<T: Element, const D: usize>(
    field: &DeviceField<T, D>,
    at: [usize; D],
    len: [usize; D],
    host: HostSide<'_, T>,
) -> Result<(), LaunchError> {
    let shape = *field.shape();
    check_box(&shape, at, &shape, at, len)?;
    let points: usize = len.iter().product();
    let (expected, got) = (
        points,
        match &host {
            HostSide::Read(v) => v.len(),
            HostSide::Write(v) => v.len(),
        },
    );
    if expected != got || points == 0 {
        return if expected == got {
            Ok(())
        } else {
            Err(LaunchError::Decomposition(format!("box copy: {got} host values for a box of {expected} points")))
        };
    }
    let gpu = field.gpu();
    let elem = std::mem::size_of::<T>();
    let (x, y, z, pitch, height) = layout(&shape, at, elem);
    let [width, rows, depth] = spans(&shape, len);
    let mut copy = sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: 0,
        srcHeight: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: 0,
        dstHeight: 0,
        WidthInBytes: width * elem,
        Height: rows,
        Depth: depth,
    };
    let what = match host {
        HostSide::Read(buf) => {
            (copy.srcXInBytes, copy.srcY, copy.srcZ, copy.srcPitch, copy.srcHeight) = (x, y, z, pitch, height);
            copy.srcDevice = field.device_ptr();
            copy.dstMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
            copy.dstHost = buf.as_mut_ptr().cast();
            (copy.dstPitch, copy.dstHeight) = (width * elem, rows);
            "a box copy to the host"
        }
        HostSide::Write(buf) => {
            (copy.dstXInBytes, copy.dstY, copy.dstZ, copy.dstPitch, copy.dstHeight) = (x, y, z, pitch, height);
            copy.dstDevice = field.device_ptr();
            copy.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
            copy.srcHost = buf.as_ptr().cast();
            (copy.srcPitch, copy.srcHeight) = (width * elem, rows);
            "a box copy from the host"
        }
    };
    gpu.refuse_while_recording(what)?;
    gpu.bind()?;
    // SAFETY: the box lies in the field (`check_box`), the host buffer holds exactly its points
    // (checked above) and stays borrowed until the synchronisation below.
    unsafe { sys::cuMemcpy3DAsync_v2(&copy, gpu.cu_stream()) }.result().map_err(|e| gpu.fail(what, e))?;
    Ok(gpu.synchronize()?)
}

/// The host side of [`host_box`].
enum HostSide<'a, T> {
    /// Device → host.
    Read(&'a mut [T]),
    /// Host → device.
    Write(&'a [T]),
}

/// The values of a box of a device field, in layout order (contiguous axis fastest); waits.
pub(crate) fn read_box<T: Element, const D: usize>(
    field: &DeviceField<T, D>,
    at: [usize; D],
    len: [usize; D],
) -> Result<Vec<T>, LaunchError> {
    let mut values = vec![T::default(); len.iter().product()];
    host_box(field, at, len, HostSide::Read(&mut values))?;
    Ok(values)
}

/// Writes `values` (layout order, as [`read_box`] returns them) into a box of a device field; waits.
pub(crate) fn write_box<T: Element, const D: usize>(
    field: &mut DeviceField<T, D>,
    at: [usize; D],
    len: [usize; D],
    values: &[T],
) -> Result<(), LaunchError> {
    host_box(field, at, len, HostSide::Write(values))
}
