//! One thread per point over a 3D block; every neighbour is a global load through the read-only
//! cache. The baseline (Sai et al. 2020, `gmem`).

use super::c_body::{print_body, Access};
use super::kernel::KernelParts;
use super::CudaKernel;

/// Every access a global load or store at the point's linear index `idx`.
pub(super) struct Global<'a> {
    pub k: &'a KernelParts<'a>,
}

impl Access for Global<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        self.k.global_load(field, "idx", offset)
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", self.k.name(field))
    }
}

pub(super) fn print(k: &KernelParts, block: [u32; 3]) -> CudaKernel {
    let [bx, by, bz] = block;
    // Not aligned to lines (as z-marching is): measured on the acoustic model's slab 16 points
    // thin along c and 12 points into a 16-point block row, aligned blocks split each row over two
    // blocks and the slab took 0.458 ms against 0.428 (H100, 1000³), with no gain elsewhere.
    let mut s = k.header(bx * by * bz);
    s.push_str(&format!(
        "    const int c = blockIdx.x * {bx} + threadIdx.x;
    const int m = blockIdx.y * {by} + threadIdx.y;
    const int o = blockIdx.z * {bz} + threadIdx.z;
    if (c >= n_c || m >= n_m || o >= n_o) return;
    const long long idx = origin + c + m * S_M + o * S_O;
    {{
{}    }}
}}
",
        print_body(k.ir, &Global { k }, 8)
    ));
    CudaKernel { source: s, entry: k.entry.clone(), block, points_per_block: block, shared_bytes: 0, line_points: 0 }
}
