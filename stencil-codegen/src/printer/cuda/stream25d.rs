//! 2.5D streaming (Micikevicius; seed 002 `st_reg_fixed`): a block owns a (c, m) tile and walks
//! the whole o axis. The current plane of every neighbour-read input sits in shared memory with
//! its halo; the o-column of each thread's own point sits in a register queue shifted by fixed
//! moves. Accesses off both (a corner of a box stencil) fall back to the read-only cache.

use super::c_body::{print_body, Access};
use super::kernel::KernelParts;
use super::queue::{queues, Queue};
use super::staging::SharedLayout;
use super::CudaKernel;

struct Streamed<'a> {
    k: &'a KernelParts<'a>,
    layout: &'a SharedLayout,
    queues: &'a [Queue],
}

impl Access for Streamed<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let [dc, dm, d] = self.k.geo.layout_offset_of(offset);
        if dc == 0 && dm == 0 {
            if let Some(q) = self.queues.iter().find(|q| q.field == field) {
                return q.slot(d);
            }
        }
        match self.layout.tile(field) {
            Some(tile) if d == 0 => format!("{}[{}]", tile.var, tile.index(&["tc", "tm", "0"], [dc, dm, 0])),
            _ => self.k.global_load(field, "idx", offset),
        }
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", self.k.name(field))
    }
}

pub(super) fn print(k: &KernelParts, tile_x: u32, tile_y: u32) -> CudaKernel {
    let threads = tile_x * tile_y;
    let layout = SharedLayout::new(k, [tile_x, tile_y, 1], false);
    let queues = queues(k, |dc| vec![dc], |dc, dm| dc == 0 && dm == 0);
    let mut s = k.header(threads);
    s.push_str(&layout.declarations());
    s.push_str(&format!(
        "    const int tc = threadIdx.x, tm = threadIdx.y, tid = tc + {tile_x} * tm;
    const int c0 = blockIdx.x * {tile_x}, m0 = blockIdx.y * {tile_y};
    const bool active = c0 + tc < n_c && m0 + tm < n_m;
    long long idx = origin + (c0 + tc) + (m0 + tm) * S_M;
"
    ));
    for q in &queues {
        let elem = k.elem(q.field);
        let slots: Vec<String> = (0..q.depth()).map(|i| format!("{}_{i}", q.var)).collect();
        s.push_str(&format!(
            "    {elem} {};\n",
            slots.iter().map(|v| format!("{v} = 0")).collect::<Vec<_>>().join(", ")
        ));
        s.push_str("    if (active) {\n");
        for d in q.min..q.max {
            s.push_str(&format!("        {} = {};\n", q.slot(d), k.global_load(q.field, "idx", layout_offset(k, d))));
        }
        s.push_str("    }\n");
    }
    s.push_str("    for (int o = 0; o < n_o; ++o, idx += S_O) {\n");
    if !layout.tiles.is_empty() {
        s.push_str("        __syncthreads();\n");
        for tile in &layout.tiles {
            let [tc, tm, _] = tile.dims;
            s.push_str(&format!(
                "        for (int t = tid; t < {vol}; t += {threads}) {{
            const int gc = c0 + t % {tc} - {lc}, gm = m0 + t / {tc} - {lm};
            if (gc < n_c + {hc} && gm < n_m + {hm}) {var}[t] = __ldg(&{ptr}[origin + gc + gm * S_M + o * S_O]);
        }}
",
                vol = tc * tm,
                lc = tile.lo[0],
                lm = tile.lo[1],
                hc = tile.hi[0],
                hm = tile.hi[1],
                var = tile.var,
                ptr = k.name(tile.field)
            ));
        }
        s.push_str("        __syncthreads();\n");
    }
    s.push_str("        if (active) {\n");
    for q in &queues {
        s.push_str(&format!(
            "            {} = {};\n",
            q.slot(q.max),
            k.global_load(q.field, "idx", layout_offset(k, q.max))
        ));
    }
    s.push_str("            {\n");
    s.push_str(&print_body(k.ir, &Streamed { k, layout: &layout, queues: &queues }, 16));
    s.push_str("            }\n");
    for q in &queues {
        s.push_str(&q.shift("            "));
    }
    s.push_str("        }\n    }\n}\n");
    CudaKernel {
        source: s,
        entry: k.entry.clone(),
        block: [tile_x, tile_y, 1],
        points_per_block: [tile_x, tile_y, u32::MAX],
        shared_bytes: layout.bytes,
    }
}

/// The stencil offset (i, j, k) that is `d` along the layout's o axis.
pub(super) fn layout_offset(k: &KernelParts, d: i32) -> [i32; 3] {
    let mut off = [0; 3];
    if k.geo.layout[2] < 3 {
        off[k.geo.layout[2]] = d;
    }
    off
}
