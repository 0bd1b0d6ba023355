//! [`DeviceField::fill_halo`]: the host's halo fill (`field/halo.rs`) as one small kernel per
//! element type, with the same index rule as [`HaloFill`]'s.

use super::device::{KernelArg, LaunchDims};
use super::error::CudaError;
use super::field::DeviceField;
use crate::field::{check_halo, Element, HaloFill};

/// The kernel: one thread per halo point of the axis (both ends, every layer, the whole extent of
/// the other axes); the field is embedded in 3D (missing axes of extent 1); `lead` is the
/// shape's padding before the first halo cell ([`Shape::offset`](crate::Shape::offset)).
fn source(t: &str) -> String {
    format!(
        r#"extern "C" __global__ void fill_halo_{t}({t}* f, long long lead, long long s0, long long s1, long long s2,
    int e0, int e1, int e2, int axis, int hw, int n, int mode) {{
    long long rest = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long s[3] = {{s0, s1, s2}};
    const int e[3] = {{e0, e1, e2}};
    int c[3];
    for (int a = 0; a < 3; ++a) {{
        const int len = a == axis ? 2 * hw : e[a];
        c[a] = (int)(rest % len);
        rest /= len;
    }}
    if (rest > 0) return;
    const int layer = c[axis] % hw + 1;
    const bool high = c[axis] >= hw;
    // HaloFill::source: Periodic 0, ZeroGradient 1, Mirror 2, MirrorNegated 3.
    const int low_src = mode == 0 ? n - layer : mode == 1 ? 0 : layer - 1;
    const int src = high ? n - 1 - low_src : low_src;
    const int dst = high ? n - 1 + layer : -layer;
    long long base = lead;
    for (int a = 0; a < 3; ++a) if (a != axis) base += c[a] * s[a];
    const {t} v = f[base + (long long)(src + hw) * s[axis]];
    f[base + (long long)(dst + hw) * s[axis]] = mode == 3 ? -v : v;
}}
"#
    )
}

impl<T: Element, const D: usize> DeviceField<T, D> {
    /// [`Field::fill_halo`](crate::Field::fill_halo) on the device: fills the halo at both ends
    /// of `axis` from the interior by `fill`, over the whole extent of the other axes. Queued on
    /// the field's stream after earlier work; returns without waiting.
    pub fn fill_halo(&mut self, axis: usize, fill: HaloFill) -> Result<(), CudaError> {
        let shape = *self.shape();
        let (n, hw) = check_halo(shape.interior(), shape.halo_widths(), axis, fill)
            .map_err(|e| CudaError::InvalidArgument(e.to_string()))?;
        if hw == 0 {
            return Ok(());
        }
        let (ext, strides) = (shape.extent(), shape.strides());
        let e: [usize; 3] = std::array::from_fn(|a| if a < D { ext[a] } else { 1 });
        let s: [usize; 3] = std::array::from_fn(|a| if a < D { strides[a] } else { 0 });
        let points = 2 * hw * (0..3).filter(|&a| a != axis).map(|a| e[a]).product::<usize>();
        let t = match T::NAME {
            "f32" => "float",
            "f64" => "double",
            "i32" => "int",
            _ => "unsigned int",
        };
        let gpu = self.gpu();
        let kernel = gpu.kernel(&source(t), &format!("fill_halo_{}", t.replace(' ', "_")))?;
        let int = |v: usize, what: &str| {
            i32::try_from(v).map_err(|_| CudaError::InvalidArgument(format!("fill_halo: {what} {v} exceeds 32 bits")))
        };
        let args = [
            self.arg(),
            KernelArg::I64(shape.lead() as i64),
            KernelArg::I64(s[0] as i64),
            KernelArg::I64(s[1] as i64),
            KernelArg::I64(s[2] as i64),
            KernelArg::I32(int(e[0], "extent")?),
            KernelArg::I32(int(e[1], "extent")?),
            KernelArg::I32(int(e[2], "extent")?),
            KernelArg::I32(axis as i32),
            KernelArg::I32(int(hw, "halo")?),
            KernelArg::I32(int(n, "interior")?),
            KernelArg::I32(fill.code()),
        ];
        gpu.launch(&kernel, LaunchDims::covering([points, 1, 1], [256, 1, 1]), &args)
    }
}
