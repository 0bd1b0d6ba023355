//! Device memory: raw allocations, and device fields, a [`Shape`] and plain device memory laid
//! out exactly as the host field's storage (same lead, pitch and strides), so a kernel indexes
//! both identically; and the device's copy bandwidth.

use super::context::Gpu;
use super::error::{ArgumentError, CudaError};
use super::launch::KernelArg;
use crate::error::LaunchError;
use crate::executor::{Pending, Readback};
use crate::field::{Element, Field, FieldError, Shape};
use crate::range::{row_runs, Loop};
use cudarc::driver::sys::{self, CUdeviceptr, CUresult};
use cudarc::driver::{result, CudaEvent};
use std::marker::PhantomData;

/// Device memory from `cuMemAlloc`, freed on drop after the stream has finished with it.
pub(crate) struct DeviceAlloc {
    gpu: Gpu,
    ptr: CUdeviceptr,
    bytes: usize,
}

impl DeviceAlloc {
    /// `bytes` uninitialised bytes (none and a null pointer for 0); `what` names the
    /// allocation in an out-of-memory error.
    pub(crate) fn new(gpu: &Gpu, bytes: usize, what: impl FnOnce() -> String) -> Result<Self, CudaError> {
        if bytes == 0 {
            return Ok(DeviceAlloc { gpu: gpu.clone(), ptr: 0, bytes });
        }
        gpu.bind()?;
        // SAFETY: plain allocation; the memory is initialised by the callers before it is read.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(|e| match e.0 {
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                CudaError::OutOfMemory { bytes: Some(bytes), what: what(), free: result::mem_get_info().ok() }
            }
            _ => gpu.fail("allocating device memory", e),
        })?;
        Ok(DeviceAlloc { gpu: gpu.clone(), ptr, bytes })
    }

    /// The device address of the first byte.
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The address, no longer freed on drop (the caller frees it with `free_sync`).
    pub(crate) fn into_raw(self) -> CUdeviceptr {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again; its handle is moved out once and dropped.
        drop(unsafe { std::ptr::read(&me.gpu) });
        me.ptr
    }

    /// The device the memory is on.
    pub(crate) fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        // Kernels and copies still queued may use the memory: wait for them first. Errors are
        // kept in the context and reported by its next call.
        // Raw calls, because `bind_to_thread` skips binding when an error is pending.
        let ctx = &self.gpu.inner.ctx;
        // SAFETY: the context and stream are alive (held through `gpu`); the memory was
        // allocated by `malloc_sync` and is freed once, after the stream is done with it.
        unsafe {
            ctx.record_err(result::ctx::set_current(ctx.cu_ctx()));
            ctx.record_err(result::stream::synchronize(self.gpu.cu_stream()));
            ctx.record_err(result::free_sync(self.ptr));
        }
    }
}

/// A `D`-dimensional field in device memory with the same [`Shape`] (and so the same offsets)
/// as a host [`Field`]. The memory is plain `cuMemAlloc` memory, not managed (unified) memory
/// and not a stream-ordered pool: the host never touches it except through the copies below.
pub struct DeviceField<T: Element, const D: usize> {
    shape: Shape<D>,
    mem: DeviceAlloc,
    _element: PhantomData<T>,
    /// The boundary declared by [`Executor::declare_boundary`](crate::Executor::declare_boundary).
    pub(crate) boundary: Option<[Option<crate::field::HaloFill>; D]>,
}

/// A 1D device field.
pub type DeviceField1<T> = DeviceField<T, 1>;
/// A 2D device field.
pub type DeviceField2<T> = DeviceField<T, 2>;
/// A 3D device field.
pub type DeviceField3<T> = DeviceField<T, 3>;

impl Gpu {
    /// A device field of `shape` with every element (halo and padding included) zero.
    pub fn alloc<T: Element, const D: usize>(&self, shape: Shape<D>) -> Result<DeviceField<T, D>, CudaError> {
        let field = DeviceField::uninit(self, shape)?;
        if field.mem.bytes > 0 {
            // SAFETY: the allocation holds `bytes` bytes; zero is a valid value of every element type.
            unsafe { result::memset_d8_async(field.mem.ptr, 0, field.mem.bytes, self.cu_stream()) }
                .map_err(|e| self.fail("zeroing a device field", e))?;
        }
        Ok(field)
    }

    /// A device copy of a host field (storage, padding included); returns once it is copied.
    pub fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<DeviceField<T, D>, CudaError> {
        let mut field = DeviceField::uninit(self, *host.shape())?;
        field.copy_from_host(host)?;
        Ok(field)
    }
}

impl Gpu {
    /// Device-to-device copy bandwidth in GB/s (10⁹ bytes, read + written, per second): the
    /// median of `reps` timed copies of `bytes` bytes after one warm-up copy. The reference a
    /// memory-bound kernel's throughput is compared with.
    pub fn copy_bandwidth_gbs(&self, bytes: usize, reps: usize) -> Result<f64, CudaError> {
        if bytes == 0 || reps == 0 {
            return Err(CudaError::InvalidArgument(ArgumentError::CopyBandwidth { bytes, reps }));
        }
        let src = DeviceAlloc::new(self, bytes, || "the copy-bandwidth source".into())?;
        let dst = DeviceAlloc::new(self, bytes, || "the copy-bandwidth destination".into())?;
        let copy = || {
            // SAFETY: both allocations hold `bytes` bytes and outlive the stream's use of them.
            unsafe { result::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, self.cu_stream()) }
                .map_err(|e| self.fail("a device-to-device copy", e))
        };
        self.bind()?;
        copy()?;
        self.synchronize()?;
        let mut ms = (0..reps).map(|_| self.time_ms(copy).map(|(_, ms)| ms)).collect::<Result<Vec<_>, _>>()?;
        ms.sort_by(f64::total_cmp);
        let median = if reps % 2 == 1 { ms[reps / 2] } else { (ms[reps / 2 - 1] + ms[reps / 2]) / 2.0 };
        Ok(2.0 * bytes as f64 / (median * 1e-3) / 1e9)
    }
}

impl<T: Element, const D: usize> DeviceField<T, D> {
    fn uninit(gpu: &Gpu, shape: Shape<D>) -> Result<Self, CudaError> {
        let bytes = shape.len() * std::mem::size_of::<T>();
        let mem = DeviceAlloc::new(gpu, bytes, || format!("DeviceField<{}, {D}> ({})", T::NAME, shape.describe()))?;
        Ok(DeviceField { shape, mem, _element: PhantomData, boundary: None })
    }

    /// The field's shape: identical to the host field's, so `Shape::offset` holds on the device.
    pub fn shape(&self) -> &Shape<D> {
        &self.shape
    }

    /// The GPU holding the field.
    pub fn gpu(&self) -> &Gpu {
        &self.mem.gpu
    }

    /// The device address of the start of the storage (offset 0 of [`Shape::offset`], before the
    /// leading pad), aligned to at least 256 bytes; 0 for an empty shape.
    pub fn device_ptr(&self) -> u64 {
        self.mem.ptr
    }

    /// The storage start as a kernel argument ([`KernelArg::Ptr`]).
    pub fn arg(&self) -> KernelArg<'static> {
        KernelArg::Ptr(self.mem.ptr)
    }

    /// Copies the field back into a new host field; waits for queued work first.
    pub fn download(&self) -> Result<Field<T, D>, CudaError> {
        let mut host = Field::try_zeros(self.shape).map_err(CudaError::Field)?;
        self.copy_to_host(&mut host)?;
        Ok(host)
    }

    /// Overwrites the field with a host field of the same shape; returns once it is copied.
    pub fn copy_from_host(&mut self, host: &Field<T, D>) -> Result<(), CudaError> {
        check_shapes("copy_from_host", host.shape(), &self.shape)?;
        let gpu = &self.mem.gpu;
        gpu.refuse_while_recording("a copy from the host")?;
        if self.mem.bytes > 0 {
            gpu.bind()?;
            // SAFETY: same shape, so the host slice has exactly `bytes` bytes; synchronising
            // below keeps it borrowed until the copy is done.
            unsafe { result::memcpy_htod_async(self.mem.ptr, host.as_slice(), gpu.cu_stream()) }
                .map_err(|e| gpu.fail("copying a field to the device", e))?;
        }
        gpu.synchronize()
    }

    /// Overwrites a host field of the same shape with this field; waits for queued work first.
    pub fn copy_to_host(&self, host: &mut Field<T, D>) -> Result<(), CudaError> {
        check_shapes("copy_to_host", &self.shape, host.shape())?;
        let gpu = &self.mem.gpu;
        gpu.refuse_while_recording("a download")?;
        if self.mem.bytes > 0 {
            gpu.bind()?;
            // SAFETY: same shape, so the host slice has exactly `bytes` bytes; synchronising
            // below keeps it borrowed until the copy is done.
            unsafe { result::memcpy_dtoh_async(host.as_mut_slice(), self.mem.ptr, gpu.cu_stream()) }
                .map_err(|e| gpu.fail("copying a field to the host", e))?;
        }
        gpu.synchronize()
    }

    /// Queues a copy of this field into a host field of the same shape whose memory
    /// `lock` page-locks for this GPU, after the queued work, and returns: the host memory holds
    /// the values once the stream has passed the copy ([`HostRegistration`] waits for it).
    pub(crate) fn copy_to_locked_host(&self, host: &mut Field<T, D>, lock: &HostRegistration) -> Result<(), CudaError> {
        check_shapes("copy_to_host", &self.shape, host.shape())?;
        let gpu = &self.mem.gpu;
        gpu.refuse_while_recording("a download")?;
        assert!(lock.holds(gpu, host.as_slice()), "the host copy is page-locked for this GPU");
        if self.mem.bytes > 0 {
            gpu.bind()?;
            // SAFETY: same shape, so the host slice has exactly `bytes` bytes; the registration
            // keeps it allocated and waits for the stream before it is dropped or reused by
            // the host, and the GPU's later copies from it are queued after this one.
            unsafe { result::memcpy_dtoh_async(host.as_mut_slice(), self.mem.ptr, gpu.cu_stream()) }
                .map_err(|e| gpu.fail("copying a field to the host", e))?;
        }
        Ok(())
    }

    /// Queues a copy of a host field of the same shape, page-locked for this GPU by `lock`,
    /// into this field, and returns (later work on the stream sees the values).
    pub(crate) fn copy_from_locked_host(
        &mut self,
        host: &Field<T, D>,
        lock: &HostRegistration,
    ) -> Result<(), CudaError> {
        check_shapes("copy_from_host", host.shape(), &self.shape)?;
        let gpu = &self.mem.gpu;
        gpu.refuse_while_recording("a copy from the host")?;
        assert!(lock.holds(gpu, host.as_slice()), "the host copy is page-locked for this GPU");
        if self.mem.bytes > 0 {
            gpu.bind()?;
            // SAFETY: as in `copy_to_locked_host`: the memory stays allocated and unchanged
            // until the stream has passed the copy.
            unsafe { result::memcpy_htod_async(self.mem.ptr, host.as_slice(), gpu.cu_stream()) }
                .map_err(|e| gpu.fail("copying a field to the device", e))?;
        }
        Ok(())
    }

    /// The values at the points of `range` (storage coordinates, as a launch takes them), axis
    /// 0 fastest, as [`Field::read_range`] returns them; waits for queued work first. Copies one
    /// run per row of the range, so a line along x in `ijk` order (e.g. the receivers of a
    /// seismogram) costs one small copy instead of a whole download.
    pub fn read_range(&self, range: &Loop<D>) -> Result<Vec<T>, CudaError> {
        let runs = row_runs(&self.shape, range).map_err(|e| CudaError::Field(FieldError::Range(e)))?;
        let mut values = vec![T::default(); range.points()];
        let gpu = &self.mem.gpu;
        gpu.refuse_while_recording("read_range")?;
        if !values.is_empty() {
            gpu.bind()?;
        }
        for (run, (offset, stride, len)) in runs.into_iter().enumerate() {
            // A run along the contiguous axis is one copy; in `kij` order axis 0 is strided, so
            // each point is a copy of its own.
            let (copies, per_copy) = if stride == 1 { (1, len) } else { (len, 1) };
            for c in 0..copies {
                let dst = &mut values[run * len + c * per_copy..][..per_copy];
                let src = self.mem.ptr + ((offset + c * stride) * std::mem::size_of::<T>()) as u64;
                // SAFETY: `row_runs` checked every point of the run lies in the field, so the
                // source is inside the allocation; `dst` stays borrowed until the
                // synchronisation below.
                unsafe { result::memcpy_dtoh_async(dst, src, gpu.cu_stream()) }
                    .map_err(|e| gpu.fail("copying a range to the host", e))?;
            }
        }
        gpu.synchronize()?;
        Ok(values)
    }

    /// [`DeviceField::read_range`] of each of `ranges` without waiting: the copies go into a
    /// page-locked host block on the stream, after the work queued so far, and
    /// [`Readback::wait`] waits for them alone. Every range is checked before anything is
    /// copied.
    pub fn read_ranges_later(&self, ranges: &[Loop<D>]) -> Result<Readback<T>, CudaError> {
        let runs = ranges
            .iter()
            .map(|r| row_runs(&self.shape, r).map_err(|e| CudaError::Field(FieldError::Range(e))))
            .collect::<Result<Vec<_>, _>>()?;
        let size = std::mem::size_of::<T>() as u64;
        let mut copies = Vec::new();
        for (offset, stride, len) in runs.into_iter().flatten() {
            // A run along the contiguous axis is one copy; in `kij` order axis 0 is strided, so
            // each point is a copy of its own.
            if stride == 1 {
                copies.push((self.mem.ptr + offset as u64 * size, len));
            } else {
                copies.extend((0..len).map(|c| (self.mem.ptr + (offset + c * stride) as u64 * size, 1)));
            }
        }
        // SAFETY: `row_runs` checked that every point of every run lies in the field, so each
        // copy's source lies inside this allocation.
        unsafe { read_pinned(&self.mem.gpu, "read_ranges_later", &copies, ranges.iter().map(Loop::points).collect()) }
    }

    /// Overwrites this field with another of the same shape on the same [`Gpu`] handle. Queued
    /// on the stream after earlier work; returns without waiting.
    pub fn copy_from(&mut self, src: &DeviceField<T, D>) -> Result<(), CudaError> {
        check_shapes("copy_from", &src.shape, &self.shape)?;
        let gpu = &self.mem.gpu;
        if !std::sync::Arc::ptr_eq(&gpu.inner, &src.mem.gpu.inner) {
            return Err(CudaError::CrossDevice {
                operation: "copy_from",
                detail: format!("{:?} from {:?}", self.gpu(), src.gpu()),
            });
        }
        if self.mem.bytes > 0 {
            gpu.bind()?;
            // SAFETY: both allocations hold `bytes` bytes and are used on the same stream.
            unsafe { result::memcpy_dtod_async(self.mem.ptr, src.mem.ptr, self.mem.bytes, gpu.cu_stream()) }
                .map_err(|e| gpu.fail("copying between device fields", e))?;
        }
        Ok(())
    }
}

/// Copies device memory to the host without waiting: `copies` (device address, elements of
/// `T`), one after another, into a page-locked block on `gpu`'s stream after the work queued so
/// far; the values come back as vectors of `lens` elements (in order; the same total).
///
/// # Safety
/// Each copy's source must lie inside a live allocation of `gpu`'s context that later work on
/// the stream may write but not free before the copy.
pub(crate) unsafe fn read_pinned<T: Element>(
    gpu: &Gpu,
    what: &str,
    copies: &[(u64, usize)],
    lens: Vec<usize>,
) -> Result<Readback<T>, CudaError> {
    gpu.refuse_while_recording(what)?;
    let size = std::mem::size_of::<T>();
    let total: usize = lens.iter().sum();
    debug_assert_eq!(total, copies.iter().map(|c| c.1).sum::<usize>());
    if total == 0 {
        return Ok(Readback::ready(lens.iter().map(|_| Vec::new()).collect()));
    }
    gpu.bind()?;
    let block = gpu.take_pinned(total * size)?;
    // From here the block is the read's: its drop hands it back after the copies.
    let mut read = GpuRead::<T> { gpu: gpu.clone(), block, event: None, lens, waited: false, _values: PhantomData };
    let mut at = block.0;
    for &(src, len) in copies {
        // SAFETY: the source lies in a live allocation (the caller's promise); the destination,
        // `len` elements at `at`, lies in the block (`total` elements), which stays the read's
        // until its event has passed.
        unsafe { sys::cuMemcpyDtoHAsync_v2(at as *mut _, src, len * size, gpu.cu_stream()) }
            .result()
            .map_err(|e| gpu.fail("copying to the host", e))?;
        at += len * size;
    }
    let no_timing = Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
    let event = gpu.stream().record_event(no_timing).map_err(|e| gpu.fail("recording a read's event", e))?;
    read.event = Some(event);
    Ok(Readback::pending(Box::new(read)))
}

/// A read of [`read_pinned`] in flight: its pinned block and the event after
/// its copies (`None` until all are queued); the drop hands the block back once no copy can
/// write it.
struct GpuRead<T> {
    gpu: Gpu,
    block: (usize, usize),
    event: Option<CudaEvent>,
    /// Points per range, in order.
    lens: Vec<usize>,
    /// Whether `wait` saw the copies complete.
    waited: bool,
    _values: PhantomData<fn() -> T>,
}

impl<T: Element> Pending<T> for GpuRead<T> {
    fn wait(mut self: Box<Self>) -> Result<Vec<Vec<T>>, LaunchError> {
        let event = self.event.take().expect("a read in flight has its event");
        event.synchronize().map_err(|e| self.gpu.fail("waiting for a read", e))?;
        self.waited = true;
        let mut at = self.block.0 as *const T;
        let values = self
            .lens
            .iter()
            .map(|&len| {
                // SAFETY: the copies into these `len` elements of the block have completed (the
                // event has passed), and the ranges lie one after another in the block.
                let v = unsafe { std::slice::from_raw_parts(at, len) }.to_vec();
                at = at.wrapping_add(len);
                v
            })
            .collect();
        Ok(values)
    }
}

impl<T> Drop for GpuRead<T> {
    fn drop(&mut self) {
        // Unread, or queueing failed part way: copies may still write the block.
        let finished = match self.event.take() {
            _ if self.waited => Ok(()),
            Some(event) => event.synchronize(),
            None => self.gpu.stream().synchronize(),
        };
        // Where waiting failed the context is broken: the block stays out of use (freed with
        // the context).
        if finished.is_ok() {
            self.gpu.give_pinned(self.block);
        }
    }
}

impl<T: Element, const D: usize> std::fmt::Debug for DeviceField<T, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceField<{}, {}D>({} on GPU {})", T::NAME, D, self.shape.describe(), self.mem.gpu.ordinal())
    }
}

fn check_shapes<const D: usize>(
    operation: &'static str,
    source: &Shape<D>,
    destination: &Shape<D>,
) -> Result<(), CudaError> {
    if source == destination {
        return Ok(());
    }
    Err(CudaError::ShapeMismatch { operation, source: source.describe(), destination: destination.describe() })
}

/// Host memory page-locked (`cuMemHostRegister`) for one GPU's asynchronous copies: a
/// [`crate::executor::HostCopy`] that a GPU saves into again and again (a checkpoint slot).
/// Dropping it waits for the GPU's stream, then unlocks the memory.
pub(crate) struct HostRegistration {
    gpu: Gpu,
    ptr: usize,
    bytes: usize,
}

impl HostRegistration {
    /// Locks `host`'s memory for `gpu`.
    ///
    /// # Safety
    /// The memory stays allocated, and is neither moved nor resized, while the registration
    /// lives.
    pub(crate) unsafe fn new<T: Element>(gpu: &Gpu, host: &[T]) -> Result<Self, CudaError> {
        let (ptr, bytes) = (host.as_ptr() as usize, std::mem::size_of_val(host));
        gpu.bind()?;
        if bytes > 0 {
            // SAFETY: `ptr..ptr + bytes` is one live allocation (the caller keeps it alive).
            unsafe { sys::cuMemHostRegister_v2(ptr as *mut _, bytes, sys::CU_MEMHOSTREGISTER_PORTABLE) }
                .result()
                .map_err(|e| gpu.fail("page-locking a host copy", e))?;
        }
        Ok(HostRegistration { gpu: gpu.clone(), ptr, bytes })
    }

    /// Whether it locks exactly `host`'s memory for `gpu`.
    pub(crate) fn holds<T: Element>(&self, gpu: &Gpu, host: &[T]) -> bool {
        self.gpu.same_stream(gpu) && self.ptr == host.as_ptr() as usize && self.bytes == std::mem::size_of_val(host)
    }
}

impl crate::executor::PageLocked for HostRegistration {
    fn wait(&self) -> Result<(), LaunchError> {
        Ok(self.gpu.synchronize()?)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        // No copy may still use the memory once it is unlocked and freed.
        let waited = self.gpu.synchronize();
        if self.bytes > 0 && waited.is_ok() && self.gpu.bind().is_ok() {
            // SAFETY: registered by `new`, unregistered once.
            let _ = unsafe { sys::cuMemHostUnregister(self.ptr as *mut _) };
        }
    }
}
