//! A 3D tile of every neighbour-read input, with its halo, staged in shared memory by the whole
//! block; one thread per point then reads neighbours from the tile (Sai et al. 2020, `smem_u`).

use super::c_body::{print_body, Access};
use super::kernel::KernelParts;
use super::staging::{SharedLayout, Tile};
use super::CudaKernel;

struct Tiled<'a> {
    k: &'a KernelParts<'a>,
    layout: &'a SharedLayout,
}

impl Access for Tiled<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        match self.layout.tile(field) {
            Some(tile) => {
                let [dc, dm, dd] = self.k.geo.layout_offset_of(offset);
                format!("{}[{}]", tile.var, tile.index(&["tc", "tm", "to"], [dc, dm, dd]))
            }
            None => self.k.global_load(field, "idx", offset),
        }
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", self.k.name(field))
    }
}

pub(super) fn print(k: &KernelParts, block: [u32; 3]) -> CudaKernel {
    let [bx, by, bz] = block;
    let threads = bx * by * bz;
    let layout = SharedLayout::new(k, block, true);
    let mut s = k.header(threads);
    s.push_str(&layout.declarations());
    s.push_str(&format!(
        "    const int tc = threadIdx.x, tm = threadIdx.y, to = threadIdx.z;
    const int c0 = blockIdx.x * {bx}, m0 = blockIdx.y * {by}, o0 = blockIdx.z * {bz};
    const int tid = tc + {bx} * (tm + {by} * to);
"
    ));
    for tile in &layout.tiles {
        s.push_str(&load_tile(k, tile, threads));
    }
    s.push_str(&format!(
        "    __syncthreads();
    const int c = c0 + tc, m = m0 + tm, o = o0 + to;
    if (c >= n_c || m >= n_m || o >= n_o) return;
    const long long idx = origin + c + m * S_M + o * S_O;
    {{
{}    }}
}}
",
        print_body(k.ir, &Tiled { k, layout: &layout }, 8)
    ));
    CudaKernel {
        source: s,
        entry: k.entry.clone(),
        block,
        points_per_block: block,
        shared_bytes: layout.bytes,
        line_points: 0,
    }
}

/// The cooperative load of one tile: every thread of the block strides over the tile's points,
/// skipping those past the range's reach (never needed, possibly outside the field).
fn load_tile(k: &KernelParts, tile: &Tile, threads: u32) -> String {
    let [tc, tm, to] = tile.dims;
    let [lc, lm, lo] = tile.lo;
    let [hc, hm, ho] = tile.hi;
    format!(
        "    for (int t = tid; t < {vol}; t += {threads}) {{
        const int gc = c0 + t % {tc} - {lc}, gm = m0 + (t / {tc}) % {tm} - {lm}, go = o0 + t / {tcm} - {lo};
        if (gc < n_c + {hc} && gm < n_m + {hm} && go < n_o + {ho}) {var}[t] = __ldg(&{ptr}[origin + gc + gm * S_M + go * S_O]);
    }}
",
        vol = tc * tm * to,
        tcm = tc * tm,
        var = tile.var,
        ptr = k.name(tile.field),
    )
}
