//! Autotuning of CUDA strategies, the host half: which strategies are timed for a launch, the
//! class of ranges one choice serves, the settings, and the record kept on disk next to the
//! kernel cache. The timing itself is `cuda/tune.rs`; nothing here needs a GPU.
//!
//! A launch without an explicit strategy, of a stencil that is neither a reduction nor a column
//! sweep, over at least [`TUNE_MIN_POINTS`] points, is tuned the first time its (stencil, shape
//! class) is seen on a device: the candidates run on the launch's own arguments (fields that the
//! stencil reads and writes are replaced by scratch copies, so the tuning changes no value the
//! launch does not write anyway), each timed with events, the default first, until the time
//! budget is spent; the fastest is kept in memory and stored on disk. All strategies compute the
//! same bits, so the choice changes speed only.

use crate::gpu::disk_cache::{hash128, DiskCache};
use std::fmt;
use std::time::Duration;
use stencil_codegen::printer::cuda::{has_neighbours, Geometry, Strategy};
use stencil_codegen::StencilIr;

/// Ranges with fewer points are not tuned: they are bound by launch latency, where the default
/// strategy is as good as any.
pub const TUNE_MIN_POINTS: usize = 1 << 15;

/// Version of the candidate lists and the record format: bump it when either changes, so that
/// records of older lists are redone rather than trusted.
const TUNE_FORMAT: u32 = 3;

/// Whether and how long launches are tuned (per device; [`TuneSettings::from_env`] reads
/// `STENCIL_AUTOTUNE=on|off` and `STENCIL_AUTOTUNE_MS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TuneSettings {
    /// Tune launches that give no strategy (default on).
    pub enabled: bool,
    /// Most time spent tuning one (stencil, shape class), compiles included (default 2 s); the
    /// default strategy is always timed, later candidates only while time is left.
    pub budget: Duration,
}

impl Default for TuneSettings {
    fn default() -> Self {
        TuneSettings { enabled: true, budget: Duration::from_secs(2) }
    }
}

impl TuneSettings {
    /// The settings the environment asks for; an unreadable value is an `Err` naming it.
    pub fn from_env() -> Result<Self, TuneSettingError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, TuneSettingError> {
        let mut s = TuneSettings::default();
        if let Some(v) = var("STENCIL_AUTOTUNE").filter(|v| !v.is_empty()) {
            s.enabled = match v.to_ascii_lowercase().as_str() {
                "on" | "1" | "true" => true,
                "off" | "0" | "false" => false,
                _ => return Err(TuneSettingError::Autotune { value: v }),
            };
        }
        if let Some(v) = var("STENCIL_AUTOTUNE_MS").filter(|v| !v.is_empty()) {
            let ms: u64 = v.parse().map_err(|_| TuneSettingError::Budget { value: v.clone() })?;
            s.budget = Duration::from_millis(ms);
        }
        Ok(s)
    }
}

/// An autotuning setting of the environment that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TuneSettingError {
    /// `STENCIL_AUTOTUNE` is neither on nor off.
    Autotune {
        /// The value given.
        value: String,
    },
    /// `STENCIL_AUTOTUNE_MS` is no number of milliseconds.
    Budget {
        /// The value given.
        value: String,
    },
}

impl fmt::Display for TuneSettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TuneSettingError::Autotune { value } => write!(f, "STENCIL_AUTOTUNE={value}: use on or off"),
            TuneSettingError::Budget { value } => {
                write!(f, "STENCIL_AUTOTUNE_MS={value}: give the tuning budget per stencil in milliseconds, e.g. 2000")
            }
        }
    }
}

/// The ranges one tuned choice serves: the range's lengths along the layout axes (contiguous,
/// middle, outer) rounded up to powers of two, the vector lanes its alignment allows, and the
/// layout. A 1000³ interior and a 1000×1000×16 slab are different classes; 1000³ and 1020³ are
/// one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeClass {
    /// Range lengths along (c, m, o), each rounded up to a power of two.
    pub lengths: [usize; 3],
    /// Points per vector access along c.
    pub lanes: u32,
    /// The stencil axes in layout order (as [`Geometry::layout`]).
    pub layout: [usize; 3],
}

impl ShapeClass {
    /// The class of a range of `lengths` points along (c, m, o) over fields laid out as
    /// `geometry` says.
    pub fn of(lengths: [usize; 3], geometry: &Geometry) -> Self {
        ShapeClass {
            lengths: lengths.map(|n| n.max(1).next_power_of_two()),
            lanes: geometry.lanes.max(1),
            layout: geometry.layout,
        }
    }
}

impl fmt::Display for ShapeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [c, m, o] = self.lengths;
        let axes: String = self.layout.iter().map(|&a| ['i', 'j', 'k'].get(a).copied().unwrap_or('-')).collect();
        write!(f, "≤{c}x{m}x{o} (c, m, o = {axes}), {} lane(s)", self.lanes)
    }
}

/// The strategies timed for `ir` over a range of `lengths` points along (c, m, o) with `lanes`
/// vector lanes, the default first. Blocks shaped for thin ranges join the fixed list: a block
/// no wider than the range along c, and runs along o no longer than the range.
pub fn candidates(ir: &StencilIr, lengths: [usize; 3], lanes: u32) -> Vec<Strategy> {
    let z =
        |block_x: u32, block_y: u32, points_per_thread: u32| Strategy::ZMarch { block_x, block_y, points_per_thread };
    let point = |x: u32, y: u32, z: u32| Strategy::PointPerThread { block: [x, y, z] };
    let mut list = vec![Strategy::default_for(ir)];
    if ir.dim == 3 {
        list.extend([
            z(64, 4, 8),
            z(64, 4, 16),
            z(32, 4, 16),
            z(32, 4, 32),
            z(32, 8, 32),
            z(16, 16, 16),
            z(128, 1, 16),
            z(64, 2, 16),
            point(128, 2, 1),
            point(32, 4, 2),
        ]);
        // Two passes with the values read at neighbours written out (timed first: where they
        // apply, the strategies that recompute those values per neighbour are the slowest).
        if stencil_codegen::passes::materialise(ir).is_ok() {
            let two = |block_x, block_y, points_per_thread| Strategy::TwoPass { block_x, block_y, points_per_thread };
            list.splice(
                1..1,
                [
                    two(64, 4, 16),
                    two(32, 4, 16),
                    two(32, 2, 16),
                    two(64, 4, 8),
                    Strategy::TwoPassStream { tile_x: 32, tile_y: 8 },
                    Strategy::TwoPassStream { tile_x: 32, tile_y: 4 },
                    Strategy::TwoPassStream { tile_x: 64, tile_y: 4 },
                ],
            );
        }
        if !ir.point_fns.is_empty() {
            let depot = |block_x, block_y, planes| Strategy::Depot { block_x, block_y, planes };
            list.extend([depot(32, 8, 16), depot(16, 16, 16), depot(32, 4, 16), depot(32, 8, 32)]);
        }
        if has_neighbours(ir) {
            list.extend([Strategy::Stream25D { tile_x: 32, tile_y: 8 }, Strategy::Stream25D { tile_x: 64, tile_y: 4 }]);
        }
        // Thin along c: as many threads along c as the range needs, the rest of 256 along m.
        let threads_c = lengths[0].div_ceil(lanes.max(1) as usize).max(1).next_power_of_two();
        if threads_c < 64 {
            let bx = threads_c as u32;
            list.extend([z(bx, 256 / bx, 16), z(bx, 128 / bx, 16), z(bx, 256 / bx, 8)]);
            list.push(point((bx * lanes).min(32), 8, 4));
        }
        // Short along o: runs no longer than the range, so that blocks are not left idle.
        if lengths[2] < 16 {
            let run = lengths[2].max(1).next_power_of_two() as u32;
            list.extend([z(64, 4, run), z(32, 8, run)]);
        }
    } else {
        list.extend([point(128, 2, 1), point(256, 1, 1), point(64, 4, 1), point(32, 8, 1)]);
        list.extend([z(64, 4, 1), z(128, 2, 1), z(32, 8, 1), z(256, 1, 1)]);
    }
    let mut seen = std::collections::HashSet::new();
    list.retain(|s| seen.insert(*s));
    list
}

/// How one candidate fared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// Milliseconds per launch.
    Ms(f64),
    /// The strategy cannot run this stencil here (no kernel for it, too many registers or too
    /// much shared memory per block).
    CannotRun,
    /// Not timed yet: the budget was spent first. A later tuning of the same key times it.
    NotTimed,
}

impl Timing {
    /// The time, if there is one.
    pub fn ms(self) -> Option<f64> {
        match self {
            Timing::Ms(t) => Some(t),
            _ => None,
        }
    }
}

/// What tuning found for one (stencil, shape class) on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneRecord {
    /// The stencil's name.
    pub stencil: String,
    /// The device's name.
    pub device: String,
    /// The shape class, as [`ShapeClass`] prints it.
    pub class: String,
    /// Each candidate with how it fared.
    pub times: Vec<(Strategy, Timing)>,
    /// The fastest candidate.
    pub best: Strategy,
}

impl TuneRecord {
    /// The record with `best` set to the fastest timed candidate (`None` when none was timed).
    pub fn from_times(stencil: &str, device: &str, class: &ShapeClass, times: Vec<(Strategy, Timing)>) -> Option<Self> {
        let best = times.iter().filter_map(|(s, t)| Some((*s, t.ms()?))).min_by(|a, b| a.1.total_cmp(&b.1))?.0;
        Some(TuneRecord { stencil: stencil.into(), device: device.into(), class: class.to_string(), times, best })
    }

    /// Whether every candidate was timed or found unable to run (none left for the budget).
    pub fn is_complete(&self) -> bool {
        !self.times.iter().any(|(_, t)| *t == Timing::NotTimed)
    }

    /// The candidates still to time.
    pub fn pending(&self) -> Vec<Strategy> {
        self.times.iter().filter(|(_, t)| *t == Timing::NotTimed).map(|(s, _)| *s).collect()
    }

    /// The record as stored: one `name value` line per item, one `time <strategy> <ms|x|->`
    /// line per candidate (`x`: cannot run, `-`: not timed).
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "stencil-tune {TUNE_FORMAT}\nstencil {}\ndevice {}\nclass {}\nbest {}\n",
            self.stencil, self.device, self.class, self.best
        );
        for (strategy, t) in &self.times {
            let t = match t {
                Timing::Ms(t) => format!("{t:.6}"),
                Timing::CannotRun => "x".to_string(),
                Timing::NotTimed => "-".to_string(),
            };
            s.push_str(&format!("time {strategy} {t}\n"));
        }
        s.into_bytes()
    }

    /// The record `bytes` hold, or `None` when they are not a record of this version (a stale
    /// or damaged entry is redone, never trusted).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()? != format!("stencil-tune {TUNE_FORMAT}") {
            return None;
        }
        let mut item = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ').map(str::to_string);
        let (stencil, device, class) = (item("stencil")?, item("device")?, item("class")?);
        let best: Strategy = item("best")?.parse().ok()?;
        let mut times = Vec::new();
        for line in lines {
            let mut parts = line.strip_prefix("time ")?.split(' ');
            let strategy: Strategy = parts.next()?.parse().ok()?;
            let t = match parts.next()? {
                "-" => Timing::NotTimed,
                "x" => Timing::CannotRun,
                ms => Timing::Ms(ms.parse::<f64>().ok().filter(|t| t.is_finite() && *t >= 0.0)?),
            };
            times.push((strategy, t));
        }
        times.iter().any(|(s, t)| *s == best && t.ms().is_some()).then_some(TuneRecord {
            stencil,
            device,
            class,
            times,
            best,
        })
    }
}

/// What tuning did for one (stencil, shape class) on a device (`Gpu::tune_reports`).
#[derive(Clone, Debug, PartialEq)]
pub struct TuneReport {
    /// The candidates' times and the choice.
    pub record: TuneRecord,
    /// Whether the record came from the disk cache instead of being timed now.
    pub from_disk: bool,
    /// Host time spent choosing (compiles, scratch copies and timed launches), ms.
    pub spent_ms: f64,
}

/// The key of the tuning record of `ir` (its serialised form `ir_text`) over `class` on a device
/// named `device` under driver `driver`, tuned among `candidates` whose printed kernels (or
/// printing errors) are `kernels`: a record made for another device, driver, stencil text, class,
/// candidate list or code generator is never found under it.
pub fn tune_key(
    device: &str,
    driver: i32,
    ir_text: &str,
    class: &ShapeClass,
    candidates: &[Strategy],
    kernels: &[String],
) -> u128 {
    let class = format!("{:?}", class);
    let list: Vec<String> = candidates.iter().map(Strategy::label).collect();
    let (format, driver, list) = (TUNE_FORMAT.to_le_bytes(), driver.to_le_bytes(), list.join(","));
    let mut parts: Vec<&[u8]> =
        vec![b"tune", &format, device.as_bytes(), &driver, ir_text.as_bytes(), class.as_bytes(), list.as_bytes()];
    parts.extend(kernels.iter().map(|k| k.as_bytes()));
    hash128(&parts)
}

/// `old`'s times with those of `new` (a subset of its candidates, timed later) put in.
pub fn merge_times(old: &[(Strategy, Timing)], new: &[(Strategy, Timing)]) -> Vec<(Strategy, Timing)> {
    old.iter().map(|&(s, t)| new.iter().find(|n| n.0 == s).copied().unwrap_or((s, t))).collect()
}

/// The tuning records stored in `kernels`' directory (in its `tune` subdirectory).
pub fn tune_cache(kernels: &DiskCache) -> DiskCache {
    kernels.subcache("tune")
}

/// The valid record stored under `key` whose best strategy is among `candidates`.
pub fn load(cache: &DiskCache, key: u128, candidates: &[Strategy]) -> Option<TuneRecord> {
    cache.read(key).and_then(|b| TuneRecord::decode(&b)).filter(|r| candidates.contains(&r.best))
}

/// Every valid record in `cache` (for `tune --list`).
pub fn stored(cache: &DiskCache) -> Vec<TuneRecord> {
    cache.keys().into_iter().filter_map(|k| cache.read(k)).filter_map(|b| TuneRecord::decode(&b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{stencil, Stencil};

    #[stencil]
    fn diffusion(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
        out[idx] = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] - 2.0 * u[idx];
    }

    fn diffusion_ir() -> &'static StencilIr {
        <Diffusion as Stencil<3>>::ir()
    }

    #[stencil]
    fn shared(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
        let square = |p: Idx3| u[p] * u[p];
        out[idx] = square(idx.ix::<1, 0, 0>()) - square(idx);
    }

    #[test]
    fn two_pass_candidates_come_with_a_split_after_the_default() {
        let ir = <Shared as Stencil<3>>::source_ir();
        let split = stencil_codegen::passes::materialise(ir).expect("a value read at a neighbour");
        assert!(split.point.is_none(), "the split has no point pass");
        let c = candidates(ir, [1024; 3], 2);
        assert!(matches!(c[0], Strategy::Depot { .. }), "{c:?}");
        assert!(c[1].is_two_pass(), "{c:?}");
    }

    #[test]
    fn labels_parse_back() {
        for s in candidates(diffusion_ir(), [16, 1024, 1024], 4).into_iter().chain([
            Strategy::SharedTile3D { tile: [8, 8, 3] },
            Strategy::Stream25D { tile_x: 16, tile_y: 5 },
            Strategy::TwoPass { block_x: 32, block_y: 2, points_per_thread: 16 },
            Strategy::TwoPassStream { tile_x: 32, tile_y: 4 },
        ]) {
            assert_eq!(s.label().parse::<Strategy>(), Ok(s));
        }
        for bad in ["", "zmarch", "zmarch_64x4", "point_1x2x3x4", "smem3d_axbxc", "warp_32x1x1", "twopass_32x8"] {
            let e = bad.parse::<Strategy>().unwrap_err();
            assert!(e.contains(bad) && e.contains("zmarch_64x4x16"), "{e}");
        }
    }

    #[test]
    fn candidates_start_with_the_default_and_fit_thin_ranges() {
        let ir = diffusion_ir();
        // No point function read at a neighbour: no two-pass candidate.
        assert!(!candidates(ir, [1024; 3], 4).iter().any(Strategy::is_two_pass));
        let cube = candidates(ir, [1024, 1024, 1024], 4);
        assert_eq!(cube[0], Strategy::default_for(ir));
        assert_eq!(cube.len(), cube.iter().collect::<std::collections::HashSet<_>>().len(), "duplicates");
        // A slab 16 points wide along c gets blocks 4 threads (16 points) wide.
        let slab = candidates(ir, [16, 1024, 1024], 4);
        assert!(slab.contains(&Strategy::ZMarch { block_x: 4, block_y: 64, points_per_thread: 16 }), "{slab:?}");
        assert!(!cube.iter().any(|s| matches!(s, Strategy::ZMarch { block_x: 4, .. })));
        // A slab 8 points deep along o gets runs of 8.
        let flat = candidates(ir, [1024, 1024, 8], 4);
        assert!(flat.contains(&Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 8 }));
        assert!(flat.contains(&Strategy::ZMarch { block_x: 32, block_y: 8, points_per_thread: 8 }));
    }

    #[test]
    fn classes_round_up_and_keys_separate_what_decides_the_choice() {
        let g = Geometry { strides: [1, 1032, 1032 * 1002], layout: [0, 1, 2], lanes: 4 };
        let a = ShapeClass::of([1000, 1000, 1000], &g);
        assert_eq!(a, ShapeClass::of([1020, 513, 1024], &g));
        assert_ne!(a, ShapeClass::of([16, 1000, 1000], &g));
        assert_ne!(a, ShapeClass::of([1000, 1000, 1000], &Geometry { lanes: 2, ..g }));
        assert_eq!(a.lengths, [1024; 3]);
        assert!(a.to_string().contains("1024x1024x1024") && a.to_string().contains("ijk"), "{a}");
        let c = candidates(diffusion_ir(), [1000; 3], 4);
        let k = vec!["kernel a".to_string(), "kernel b".to_string()];
        let key = tune_key("H200", 13000, "ir", &a, &c, &k);
        assert_eq!(key, tune_key("H200", 13000, "ir", &a, &c, &k));
        for other in [
            tune_key("H100", 13000, "ir", &a, &c, &k),
            tune_key("H200", 13010, "ir", &a, &c, &k),
            tune_key("H200", 13000, "ir2", &a, &c, &k),
            tune_key("H200", 13000, "ir", &ShapeClass::of([16, 1000, 1000], &g), &c, &k),
            tune_key("H200", 13000, "ir", &a, &c[1..], &k),
            tune_key("H200", 13000, "ir", &a, &c, &["kernel a".to_string(), "kernel c".to_string()]),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn records_round_trip_and_damaged_ones_are_refused() {
        let class = ShapeClass::of([512; 3], &Geometry { strides: [1, 544, 544 * 514], layout: [0, 1, 2], lanes: 4 });
        let z = Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 8 };
        let p = Strategy::PointPerThread { block: [128, 2, 1] };
        let s = Strategy::Stream25D { tile_x: 32, tile_y: 8 };
        let d = Strategy::PointPerThread { block: [32, 4, 2] };
        let times = vec![(p, Timing::Ms(0.46)), (z, Timing::Ms(0.297)), (s, Timing::NotTimed), (d, Timing::CannotRun)];
        let r = TuneRecord::from_times("diffusion7", "NVIDIA H200", &class, times.clone()).unwrap();
        assert_eq!(r.best, z);
        assert_eq!(TuneRecord::decode(&r.encode()), Some(r.clone()));
        assert_eq!(TuneRecord::from_times("d", "g", &class, vec![(s, Timing::NotTimed), (d, Timing::CannotRun)]), None);
        // Not complete while a candidate waits for time; merging in its timing completes it.
        assert!(!r.is_complete() && r.pending() == vec![s]);
        let merged = merge_times(&r.times, &[(s, Timing::Ms(0.2))]);
        let done = TuneRecord::from_times("diffusion7", "NVIDIA H200", &class, merged).unwrap();
        assert!(done.is_complete() && done.best == s && done.times.len() == 4);
        let text = String::from_utf8(r.encode()).unwrap();
        for damaged in [
            text.replace("stencil-tune 3", "stencil-tune 2"),
            text.replace(" x\n", " y\n"),
            text.replace("best zmarch_64x4x8", "best zmarch_64x4"),
            text.replace("best zmarch_64x4x8", "best stream25d_32x8"),
            text.replace("0.297000", "NaN"),
            text.replace("0.460000", "-1"),
            text.replace("time ", "tim "),
            text[..text.len() / 2].to_string(),
            String::new(),
        ] {
            assert_eq!(TuneRecord::decode(damaged.as_bytes()), None, "{damaged}");
        }
        // Stored and loaded through the disk cache; a record whose best is no candidate is redone.
        let dir = std::env::temp_dir().join(format!("stencil-tune-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = tune_cache(&DiskCache::new(&dir));
        cache.write(5, &r.encode()).unwrap();
        assert_eq!(load(&cache, 5, &[p, z]), Some(r.clone()));
        assert_eq!(load(&cache, 5, &[p, s]), None);
        assert_eq!(load(&cache, 6, &[p, z]), None);
        std::fs::write(cache.path(5), b"garbage").unwrap();
        assert_eq!(load(&cache, 5, &[p, z]), None);
        cache.write(7, &r.encode()).unwrap();
        assert_eq!(stored(&cache), vec![r]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn settings_from_the_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            TuneSettings::from_vars(move |n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))
        };
        assert_eq!(vars(&[]), Ok(TuneSettings::default()));
        assert_eq!(vars(&[("STENCIL_AUTOTUNE", "off")]).map(|s| s.enabled), Ok(false));
        assert_eq!(vars(&[("STENCIL_AUTOTUNE", "ON")]).map(|s| s.enabled), Ok(true));
        assert_eq!(vars(&[("STENCIL_AUTOTUNE_MS", "250")]).map(|s| s.budget), Ok(Duration::from_millis(250)));
        assert!(vars(&[("STENCIL_AUTOTUNE", "maybe")]).unwrap_err().to_string().contains("use on or off"));
        assert!(vars(&[("STENCIL_AUTOTUNE_MS", "2s")]).unwrap_err().to_string().contains("milliseconds"));
        assert_eq!(vars(&[("STENCIL_AUTOTUNE", "maybe")]), Err(TuneSettingError::Autotune { value: "maybe".into() }));
        assert_eq!(vars(&[("STENCIL_AUTOTUNE_MS", "2s")]), Err(TuneSettingError::Budget { value: "2s".into() }));
    }
}
