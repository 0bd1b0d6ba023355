//! Halo fills on the device: any number of fields, each along any of its axes, in one kernel.
//!
//! Filling axis after axis (the host's order) gives every halo point the value of one interior
//! point: along each named axis whose coordinate lies in the halo, the coordinate is replaced by
//! its source ([`HaloFill`]'s rule), and the value is negated once per `MirrorNegated` axis. The
//! kernel computes that source directly, so the axes need no ordering and one launch does all.
//! Each halo point is written by exactly one thread (the point belongs to the first named axis
//! along which it lies in the halo), and every source lies in the interior of every named axis,
//! so no thread reads what another writes.

use super::context::Gpu;
use super::error::CudaError;
use super::launch::{KernelArg, LaunchDims};
use super::memory::DeviceField;
use crate::error::LaunchError;
use crate::executor::{FieldMap, SideJob};
use crate::field::{check_halo, Element, HaloError, HaloFill};

/// Fields one launch fills; more are filled in further launches.
const MAX_JOBS: usize = 16;
/// Bytes of one job in the kernel's parameter block (see `SOURCE`).
const JOB_BYTES: usize = 128;

/// The kernel. `Job` is laid out by `Job::bytes` below; the parameter block is the job count
/// and `MAX_JOBS` jobs (2 KiB, under the 4 KiB parameter limit).
const SOURCE: &str = r#"
struct Job {
    unsigned long long ptr;   // storage start
    long long lead;           // offset of storage point (0, 0, 0)
    long long stride[3];      // per axis, elements (0 for a phantom axis)
    long long first;          // first thread of this job
    int extent[3];            // storage extent per axis (1 for a phantom axis)
    int halo[3];              // halo width per axis
    int n[3];                 // interior per axis
    int mode[2][3];           // HaloFill code per side (low, high) and axis, -1: not filled
    int elem_bytes;           // 4 or 8
    int is_float;             // negate by the sign bit (1) or two's complement (0)
    int pad[3];
};
struct Jobs { int count; int pad; Job job[16]; };

// Storage coordinate `s` along an axis of n interior points and halo h, filled on the low side
// by mode_lo and the high side by mode_hi (-1: not): the source coordinate, unchanged in the
// interior and on a side that is not filled.
__device__ __forceinline__ int halo_source(int mode_lo, int mode_hi, int s, int h, int n) {
    const int g = s - h;
    const bool high = g >= n;
    const int mode = g < 0 ? mode_lo : high ? mode_hi : -1;
    if (mode < 0) return s;
    const int layer = high ? g - (n - 1) : -g;
    const int low = mode == 0 ? n - layer : mode == 1 ? 0 : layer - 1;
    return (high ? n - 1 - low : low) + h;
}

extern "C" __global__ void fill_halos(const Jobs jobs) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int j = 0;
    while (j + 1 < jobs.count && t >= jobs.job[j + 1].first) ++j;
    const Job& q = jobs.job[j];
    long long r = t - q.first;
    if (j >= jobs.count || r < 0) return;
    // The slot: the first axis along which this point lies in a filled side. Along the axes
    // before it the point lies anywhere but a filled side, along the axes after it anywhere.
    int slot = -1;
    int len[3];
    for (int a = 0; a < 3 && slot < 0; ++a) {
        const int sides = (q.mode[0][a] >= 0) + (q.mode[1][a] >= 0);
        if (sides == 0 || q.halo[a] == 0) continue;
        long long count = 1;
        for (int b = 0; b < 3; ++b) {
            const int open = (q.mode[0][b] < 0) + (q.mode[1][b] < 0);
            len[b] = b == a ? sides * q.halo[b] : b < a ? q.n[b] + open * q.halo[b] : q.extent[b];
            count *= len[b];
        }
        if (r < count) slot = a; else r -= count;
    }
    if (slot < 0) return;
    int s[3];
    for (int b = 0; b < 3; ++b) {
        const int c = (int)(r % len[b]);
        r /= len[b];
        const int h = q.halo[b];
        const bool lo = q.mode[0][b] >= 0;
        if (b == slot) {
            s[b] = lo && c < h ? c : (lo ? c - h : c) + h + q.n[b];
        } else if (b < slot) {
            // Skip the filled sides: low halo (if open), interior, high halo (if open).
            const int c2 = lo ? c + h : c;
            s[b] = c2;
        } else {
            s[b] = c;
        }
    }
    long long dst = q.lead, src = q.lead;
    bool negate = false;
    for (int b = 0; b < 3; ++b) {
        const int from = halo_source(q.mode[0][b], q.mode[1][b], s[b], q.halo[b], q.n[b]);
        const int g = s[b] - q.halo[b];
        const int mode = g < 0 ? q.mode[0][b] : g >= q.n[b] ? q.mode[1][b] : -1;
        negate ^= from != s[b] && mode == 3;
        dst += s[b] * q.stride[b];
        src += from * q.stride[b];
    }
    if (q.elem_bytes == 8) {
        unsigned long long* f = (unsigned long long*)q.ptr;
        unsigned long long v = f[src];
        if (negate) v = q.is_float ? v ^ 0x8000000000000000ull : (unsigned long long)(-(long long)v);
        f[dst] = v;
    } else {
        unsigned int* f = (unsigned int*)q.ptr;
        unsigned int v = f[src];
        if (negate) v = q.is_float ? v ^ 0x80000000u : (unsigned int)(-(int)v);
        f[dst] = v;
    }
}
"#;

/// One field's part of a launch.
pub(crate) struct Job {
    ptr: u64,
    lead: i64,
    stride: [i64; 3],
    first: i64,
    extent: [i32; 3],
    halo: [i32; 3],
    n: [i32; 3],
    /// Per side (low, high) and axis.
    mode: [[i32; 3]; 2],
    elem_bytes: i32,
    is_float: i32,
}

impl Job {
    /// Halo points this job writes (the kernel's slots, counted as the kernel counts them).
    fn points(&self) -> i64 {
        let filled = |b: usize| (self.mode[0][b] >= 0) as i32 + (self.mode[1][b] >= 0) as i32;
        (0..3)
            .filter(|&a| filled(a) > 0 && self.halo[a] > 0)
            .map(|a| {
                (0..3)
                    .map(|b| {
                        (if b == a {
                            filled(b) * self.halo[b]
                        } else if b < a {
                            self.n[b] + (2 - filled(b)) * self.halo[b]
                        } else {
                            self.extent[b]
                        }) as i64
                    })
                    .product::<i64>()
            })
            .sum()
    }

    /// The job as the kernel's `struct Job` lays it out.
    fn bytes(&self) -> [u8; JOB_BYTES] {
        let mut out = [0u8; JOB_BYTES];
        let mut at = 0;
        let mut put = |b: &[u8]| {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        put(&self.ptr.to_le_bytes());
        put(&self.lead.to_le_bytes());
        self.stride.iter().for_each(|s| put(&s.to_le_bytes()));
        put(&self.first.to_le_bytes());
        for a in [self.extent, self.halo, self.n, self.mode[0], self.mode[1]] {
            a.iter().for_each(|v| put(&v.to_le_bytes()));
        }
        put(&self.elem_bytes.to_le_bytes());
        put(&self.is_float.to_le_bytes());
        out
    }
}

/// [`Executor::fill_halo_sides`](crate::Executor::fill_halo_sides) on a GPU: checks every job,
/// then fills up to `MAX_JOBS` fields per launch.
pub(crate) fn fill_halo_sides<T: Element, const D: usize>(
    gpu: &Gpu,
    jobs: &mut [SideJob<'_, DeviceField<T, D>, D>],
) -> Result<(), LaunchError> {
    let prepared = jobs.iter().map(|(field, fills)| job(gpu, field, fills)).collect::<Result<Vec<_>, _>>()?;
    fill(gpu, prepared)
}

/// One field's fills as a job of the kernel, checked.
pub(crate) fn job<T: Element, const D: usize>(
    gpu: &Gpu,
    field: &DeviceField<T, D>,
    fills: &[[Option<HaloFill>; 2]; D],
) -> Result<Job, LaunchError> {
    let int = |v: usize, what: &str| {
        i32::try_from(v).map_err(|_| CudaError::TooLarge { what: format!("fill_halos: {what}"), value: v })
    };
    if field.gpu().home() != gpu.home() {
        return Err(CudaError::CrossDevice {
            operation: "fill_halos",
            detail: format!(
                "fill_halos on {gpu:?}: a field lives on {:?}; fill each field on its own Gpu",
                field.gpu()
            ),
        }
        .into());
    }
    let shape = *field.shape();
    let (ext, strides, halo, interior) = (shape.extent(), shape.strides(), shape.halo_widths(), shape.interior());
    let mut job = Job {
        ptr: field.device_ptr(),
        lead: shape.lead() as i64,
        stride: [0; 3],
        first: 0,
        extent: [1; 3],
        halo: [0; 3],
        n: [1; 3],
        mode: [[-1; 3]; 2],
        elem_bytes: std::mem::size_of::<T>() as i32,
        is_float: matches!(T::NAME, "f32" | "f64") as i32,
    };
    for a in 0..D {
        job.stride[a] = strides[a] as i64;
        job.extent[a] = int(ext[a], "extent")?;
        job.halo[a] = int(halo[a], "halo")?;
        job.n[a] = int(interior[a], "interior")?;
        for (side, fill) in fills[a].iter().enumerate() {
            if let Some(fill) = fill {
                check_halo(interior, halo, a, *fill)?;
                job.mode[side][a] = fill.code();
            }
        }
    }
    Ok(job)
}

/// Runs the jobs (of any element types), `MAX_JOBS` per launch.
pub(crate) fn fill(gpu: &Gpu, mut prepared: Vec<Job>) -> Result<(), LaunchError> {
    if prepared.is_empty() {
        return Ok(());
    }
    // Loaded once per device: asking `Gpu::kernel` would hash the source at every fill.
    let kernel = gpu.builtin_kernel(SOURCE, "fill_halos")?;
    for chunk in prepared.chunks_mut(MAX_JOBS) {
        let mut total = 0i64;
        for job in chunk.iter_mut() {
            job.first = total;
            total += job.points();
        }
        if total == 0 {
            continue;
        }
        let mut block = vec![0u8; 8 + MAX_JOBS * JOB_BYTES];
        block[..4].copy_from_slice(&(chunk.len() as i32).to_le_bytes());
        for (i, job) in chunk.iter().enumerate() {
            block[8 + i * JOB_BYTES..][..JOB_BYTES].copy_from_slice(&job.bytes());
        }
        let dims = LaunchDims::covering([total as usize, 1, 1], [256, 1, 1]);
        // SAFETY: the kernel takes one `Jobs` by value, laid out as `block`; each job describes a
        // live field of this device (its pointer, shape and element size), and the kernel
        // touches only storage points of those shapes.
        unsafe { gpu.launch(&kernel, dims, &[KernelArg::Bytes(&block)]) }?;
    }
    Ok(())
}

/// The declared boundary of each written field as jobs (see
/// [`Executor::declare_boundary`](crate::Executor::declare_boundary)), the first error kept.
pub(crate) struct DeclaredJobs<'g> {
    pub(crate) gpu: &'g Gpu,
    pub(crate) jobs: std::cell::RefCell<Result<Vec<Job>, LaunchError>>,
}

impl FieldMap<Gpu, Gpu> for DeclaredJobs<'_> {
    fn field<'a, T: Element, const D: usize>(&self, field: &'a DeviceField<T, D>) -> &'a DeviceField<T, D> {
        field
    }
    fn field_mut<'a, T: Element, const D: usize>(&self, field: &'a mut DeviceField<T, D>) -> &'a mut DeviceField<T, D> {
        if let Some(fills) = field.boundary {
            let mut jobs = self.jobs.borrow_mut();
            if let Ok(list) = &mut *jobs {
                match job(self.gpu, field, &fills.map(|f| [f; 2])) {
                    Ok(j) => list.push(j),
                    Err(e) => *jobs = Err(e),
                }
            }
        }
        field
    }
    fn held<'a, T: Element>(&self, held: &'a super::held::DeviceHeld<T>) -> &'a super::held::DeviceHeld<T> {
        held
    }
}

impl<T: Element, const D: usize> DeviceField<T, D> {
    /// [`Field::fill_halo`](crate::Field::fill_halo) on the device: fills the halo at both ends
    /// of `axis` from the interior by `fill`, over the whole extent of the other axes. Queued on
    /// the field's stream after earlier work; returns without waiting.
    pub fn fill_halo(&mut self, axis: usize, fill: HaloFill) -> Result<(), LaunchError> {
        let gpu = self.gpu().clone();
        let mut fills = [[None; 2]; D];
        if axis >= D {
            return Err(HaloError::NoSuchAxis { axis, dims: D }.into());
        }
        fills[axis] = [Some(fill); 2];
        fill_halo_sides(&gpu, &mut [(self, fills)])
    }
}
