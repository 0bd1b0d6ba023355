//! Register queues along the marching axis `o`: for each input and each group of points that
//! share a (c, m) position, the values from the lowest to the highest `o` offset read, shifted by
//! fixed register moves after every step (the `st_reg_fixed` scheme of Sai et al. 2020). A queue may look
//! `ahead` planes further than it reads, so that a step's loads are issued a step before use.

use super::kernel::KernelParts;
use std::collections::BTreeMap;

/// One queue: a field at a fixed (c-group, m) position, covering o offsets `min..=max`.
pub(super) struct Queue {
    /// The field parameter.
    pub field: usize,
    /// The C variable prefix; slot `s` is `{var}_{s}` and holds offset `min + s`.
    pub var: String,
    /// The c-group (a vector of lanes, or a single c offset when not vectorised).
    pub group: i32,
    /// The m offset.
    pub dm: i32,
    /// Lowest o offset read.
    pub min: i32,
    /// Highest o offset read.
    pub max: i32,
    /// Extra slots above `max` (0 or 1): planes loaded this many steps before they are read.
    pub ahead: i32,
    /// Served from the block's shared plane tile instead of global memory (an in-plane value read
    /// at o offset 0 only; see `plane_tile`).
    pub tiled: bool,
}

impl Queue {
    /// Slots (registers, or vectors of lanes), the lookahead ones included.
    pub fn depth(&self) -> i32 {
        self.top() - self.min + 1
    }

    /// The highest o offset held: the slot each step loads.
    pub fn top(&self) -> i32 {
        self.max + self.ahead
    }

    /// Whether the queue spans several o offsets (a column, as opposed to one in-plane value).
    pub fn is_column(&self) -> bool {
        self.max > self.min
    }

    /// The slot variable holding o offset `d`.
    pub fn slot(&self, d: i32) -> String {
        format!("{}_{}", self.var, d - self.min)
    }

    /// `a = b;` moves that advance the queue by one step.
    pub fn shift(&self, pad: &str) -> String {
        (0..self.depth() - 1).map(|s| format!("{pad}{v}_{s} = {v}_{};\n", s + 1, v = self.var)).collect()
    }
}

/// Builds the queues of every input: `group_of(dc)` lists the c-groups lane accesses at c offset
/// `dc` touch; `keep(dc, dm)` says whether accesses at that (c, m) offset are served by a queue.
pub(super) fn queues(
    k: &KernelParts,
    group_of: impl Fn(i32) -> Vec<i32>,
    keep: impl Fn(i32, i32) -> bool,
) -> Vec<Queue> {
    let mut out = Vec::new();
    for fa in k.inputs() {
        let mut ranges: BTreeMap<(i32, i32), (i32, i32)> = BTreeMap::new();
        for off in &fa.offsets {
            let [dc, dm, d] = k.geo.layout_offset_of(*off);
            if !keep(dc, dm) {
                continue;
            }
            for g in group_of(dc) {
                let r = ranges.entry((g, dm)).or_insert((d, d));
                r.0 = r.0.min(d);
                r.1 = r.1.max(d);
            }
        }
        for ((group, dm), (min, max)) in ranges {
            let var = format!("q_{}_{}_{}", fa.name, signed_name(group), signed_name(dm));
            out.push(Queue { field: fa.param, var, group, dm, min, max, ahead: 0, tiled: false });
        }
    }
    out
}

/// `3` → `3`, `-2` → `n2` (for C identifiers).
fn signed_name(v: i32) -> String {
    if v < 0 {
        format!("n{}", -v)
    } else {
        v.to_string()
    }
}
