//! Autotuning on the device (the host half, what is tuned and how it is stored, is
//! [`crate::tuning`]): the first launch of a (stencil, shape class) without an explicit strategy
//! times the candidates on the launch's own arguments and keeps the fastest, in memory and in the
//! disk cache; later launches look the choice up.

use super::context::{driver_version, Gpu};
use super::error::CudaError;
use super::kernel::{KernelChoice, LaunchKey, Prepared};
use super::launch::{KernelArg, LaunchDims};
use super::memory::DeviceAlloc;
use crate::error::LaunchError;
use crate::gpu::tuning::{self, ShapeClass, Timing, TuneRecord, TuneReport, TuneSettings, TUNE_MIN_POINTS};
use cudarc::driver::result;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};
use stencil_codegen::printer::cuda::{print_kernel, Geometry, Strategy};
use stencil_codegen::StencilIr;

/// A field a stencil writes, as timed launches must treat it: (kernel argument index, name,
/// bytes of storage, whether the stencil also reads it).
pub(crate) type WrittenField = (usize, &'static str, usize, bool);

/// A stencil launch with everything but its strategy.
pub(crate) struct LaunchPlan<'a> {
    /// The stencil's name.
    pub(crate) name: &'static str,
    /// Its serialised IR (whose address identifies the stencil in the launch table).
    pub(crate) ir_text: &'static str,
    /// Its IR as written (`Stencil::source_ir`: the printers inline the point functions, or
    /// keep them on chip).
    pub(crate) ir: &'static StencilIr,
    pub(crate) geometry: Geometry,
    /// Points along the layout axes (c, m, o).
    pub(crate) len: [usize; 3],
    /// Element offset of the range's first point in the fields' storage.
    pub(crate) origin: i64,
    /// The kernel arguments in parameter order.
    pub(crate) args: Vec<KernelArg<'a>>,
    /// The fields the stencil writes (computed only when a launch is tuned).
    pub(crate) written: &'a dyn Fn() -> Vec<WrittenField>,
    /// The first pass of a two-pass strategy, where the stencil has one (see `two_pass.rs`;
    /// computed only for a two-pass launch or when a launch is tuned).
    pub(crate) first_pass: &'a dyn Fn() -> Option<FirstPass>,
}

impl LaunchPlan<'_> {
    /// The launch-table key of this launch under `strategy`.
    pub(crate) fn key(&self, strategy: Strategy) -> LaunchKey {
        LaunchKey {
            stencil: self.ir_text.as_ptr() as usize,
            kernel: KernelChoice::Step(strategy),
            geometry: self.geometry,
        }
    }
}

impl Gpu {
    /// Whether and how long launches on this device are tuned (shared by its clones; from
    /// `STENCIL_AUTOTUNE` and `STENCIL_AUTOTUNE_MS` when the device was opened).
    pub fn tune_settings(&self) -> TuneSettings {
        *self.inner.tune_settings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the tuning settings for later launches (choices already made are kept).
    pub fn set_tune_settings(&self, settings: TuneSettings) {
        *self.inner.tune_settings.lock().unwrap_or_else(PoisonError::into_inner) = settings;
    }

    /// What was tuned on this device so far, one report per (stencil, shape class).
    pub fn tune_reports(&self) -> Vec<TuneReport> {
        let tuned = self.inner.tuned.lock().unwrap_or_else(PoisonError::into_inner);
        tuned.values().filter_map(|(_, r)| r.as_deref().cloned()).collect()
    }

    /// The strategy for a launch that names none: the default where tuning is off or does not
    /// apply (a small range, a column sweep, a launch issued while a step is recorded), else the
    /// tuned choice, timing the candidates on first use (or those a stored record has not timed
    /// yet).
    pub(crate) fn choose_strategy(&self, plan: &LaunchPlan<'_>) -> Result<Strategy, LaunchError> {
        let default = Strategy::default_for(plan.ir);
        let settings = self.tune_settings();
        let points: usize = plan.len.iter().product();
        if !settings.enabled || points < TUNE_MIN_POINTS || plan.ir.sweep.is_some() {
            return Ok(default);
        }
        let class = ShapeClass::of(plan.len, &plan.geometry);
        let id = (plan.ir_text.as_ptr() as usize, class);
        if let Some((chosen, _)) = self.inner.tuned.lock().unwrap_or_else(PoisonError::into_inner).get(&id) {
            return Ok(*chosen);
        }
        // Timing needs the stream to run: inside a recording the default is taken (and the
        // choice is made at the next launch outside one).
        if self.refuse_while_recording("tuning").is_err() {
            return Ok(default);
        }
        let remember = |chosen: Strategy, report: Option<TuneReport>| {
            let entry = (chosen, report.map(Arc::new));
            self.inner.tuned.lock().unwrap_or_else(PoisonError::into_inner).insert(id, entry);
            chosen
        };
        let start = Instant::now();
        let mut candidates = tuning::candidates(plan.ir, plan.len, plan.geometry.lanes);
        if (plan.first_pass)().is_none() {
            candidates.retain(|s| !s.is_two_pass());
        }
        // The printed kernels are part of the key: a record made by another code generator is
        // not found.
        let kernels: Vec<String> = candidates
            .iter()
            .map(|&s| match print_kernel(plan.ir, s, &plan.geometry) {
                Ok(k) => k.source,
                Err(e) => e.to_string(),
            })
            .collect();
        let key = tuning::tune_key(self.name(), driver_version()?, plan.ir_text, &class, &candidates, &kernels);
        let cache = self.inner.disk.as_ref().map(tuning::tune_cache);
        let stored = cache.as_ref().and_then(|c| tuning::load(c, key, &candidates));
        let (record, from_disk) = match stored {
            Some(record) if record.is_complete() => (record, true),
            partial => {
                // Time what the stored record has not timed yet, or every candidate.
                let pending = partial.as_ref().map_or_else(|| candidates.clone(), TuneRecord::pending);
                let Some(times) = self.time_candidates(plan, &pending, settings.budget, start)? else {
                    return Ok(remember(default, None));
                };
                let all = match &partial {
                    Some(p) => tuning::merge_times(&p.times, &times),
                    None => times,
                };
                let Some(record) = TuneRecord::from_times(plan.name, self.name(), &class, all) else {
                    return Ok(remember(default, None));
                };
                if let Some(c) = &cache {
                    let _ = c.write(key, &record.encode());
                }
                (record, false)
            }
        };
        let spent_ms = start.elapsed().as_secs_f64() * 1e3;
        tracing::info!(target: "stencil::tune", stencil = plan.name, class = %class, best = %record.best, from_disk, complete = record.is_complete(), spent_ms, "tuned");
        Ok(remember(record.best, Some(TuneReport { record, from_disk, spent_ms })))
    }

    /// Times each of `candidates` on `plan`'s arguments, the first always, the others while
    /// `budget` (counted from `start`) lasts. Every field the stencil writes is replaced by
    /// scratch memory (a copy where the stencil also reads it), so the timed launches change no
    /// value of the caller's. `None` when there is no memory for the scratch fields.
    fn time_candidates(
        &self,
        plan: &LaunchPlan<'_>,
        candidates: &[Strategy],
        budget: Duration,
        start: Instant,
    ) -> Result<Option<Vec<(Strategy, Timing)>>, LaunchError> {
        self.bind()?;
        // Work queued on other streams of the device (e.g. a `fork_join` sibling) would share
        // the GPU with the timed launches: let it finish first.
        result::ctx::synchronize().map_err(|e| self.fail("synchronizing the device before tuning", e))?;
        let mut args = plan.args.clone();
        let written = (plan.written)();
        let mut scratch = Vec::with_capacity(written.len());
        for (i, field, bytes, read) in written {
            let copy = match DeviceAlloc::new(self, bytes, || {
                format!("scratch memory for field `{field}` while tuning")
            }) {
                Ok(copy) => copy,
                Err(CudaError::OutOfMemory { .. }) => {
                    tracing::info!(target: "stencil::tune", stencil = plan.name, field, bytes, "not tuned: no memory for scratch fields");
                    return Ok(None);
                }
                Err(e) => return Err(e.into()),
            };
            let KernelArg::Ptr(from) = args[i] else { unreachable!("argument {i} of `{}` is a field", plan.name) };
            if read {
                // SAFETY: both are device allocations of this context of at least `bytes` bytes
                // (the field's storage, checked by the launch, and the copy just made).
                unsafe { result::memcpy_dtod_async(copy.ptr(), from, bytes, self.cu_stream()) }
                    .map_err(|e| self.fail("copying a field for tuning", e))?;
            }
            args[i] = KernelArg::Ptr(copy.ptr());
            scratch.push(copy);
        }
        let share = budget.as_secs_f64() * 1e3 / candidates.len().max(1) as f64;
        let mut times = Vec::with_capacity(candidates.len());
        for (n, &strategy) in candidates.iter().enumerate() {
            let time = if n > 0 && start.elapsed() >= budget {
                Timing::NotTimed
            } else {
                self.time_one(plan, strategy, &args, share)?.map_or(Timing::CannotRun, Timing::Ms)
            };
            times.push((strategy, time));
        }
        // The scratch fields are freed after the stream has passed the timed launches.
        drop(scratch);
        Ok(Some(times))
    }

    /// ms per launch of `plan` under `strategy` with `args` (one launch to warm up, then as
    /// many as fit `share_ms`, at most 10); `None` when the strategy cannot run this stencil
    /// here (no kernel for it, or too many registers or too much shared memory per block).
    fn time_one(
        &self,
        plan: &LaunchPlan<'_>,
        strategy: Strategy,
        args: &[KernelArg<'_>],
        share_ms: f64,
    ) -> Result<Option<f64>, LaunchError> {
        let cannot_run = |e: &CudaError| {
            matches!(
                e,
                CudaError::UnsupportedStrategy { .. }
                    | CudaError::LaunchFailed { .. }
                    | CudaError::SharedMemory { .. }
                    | CudaError::Compile { .. }
                    // A two-pass strategy's scratch fields.
                    | CudaError::OutOfMemory { .. }
            )
        };
        let skip = |e: &CudaError| {
            tracing::warn!(target: "stencil::tune", stencil = plan.name, %strategy, "candidate skipped: {e}");
            Ok(None)
        };
        let launch = || self.launch_plan(plan, strategy, args);
        match launch() {
            Err(LaunchError::Cuda(e)) if cannot_run(&e) => return skip(&e),
            r => r?,
        }
        let (issued, one) = self.time_ms(|| Ok(launch()))?;
        issued?;
        let reps = (share_ms / one.max(1e-3)).clamp(1.0, 10.0) as usize;
        let (issued, total) = self.time_ms(|| Ok((0..reps).try_for_each(|_| launch())))?;
        issued?;
        Ok(Some(total / reps as f64))
    }

    /// Launches a prepared stencil kernel over `len` points along (c, m, o) from element
    /// `origin` of the fields.
    pub(crate) fn launch_prepared(
        &self,
        prepared: &Prepared,
        len: [usize; 3],
        origin: i64,
        args: &[KernelArg<'_>],
    ) -> Result<(), CudaError> {
        let grid = stencil_codegen::printer::cuda::grid(prepared.points_per_block, prepared.line_points, len, origin);
        let dims = LaunchDims { grid, block: prepared.block, shared_bytes: prepared.shared_bytes };
        // SAFETY: the kernel was printed for the stencil and geometry of the launch whose
        // arguments `args` are (fields as pointers, bools as int, then the origin and lengths);
        // `validate` checked that the range plus the stencil's reach lies inside every field
        // (or its scratch copy, of the same size), all of which live on this device and outlive
        // the launch (dropping a field or a copy waits for the stream).
        unsafe { self.launch(&prepared.kernel, dims, args) }
    }
}

/// One launch's range: lengths along the layout axes, first element, geometry.
pub(crate) struct Part {
    pub(crate) len: [usize; 3],
    pub(crate) origin: i64,
    pub(crate) geometry: Geometry,
}

/// The first pass of one launch: its range (lengths along the layout axes, first element) and
/// geometry, and the bytes of each scratch field.
pub(crate) struct FirstPass {
    /// Where the first kernels run, each (pass, range): the range grown by the pass's box, or
    /// that without the launch's range where a point pass covers it.
    pub(crate) parts: Vec<(usize, Part)>,
    /// Whether the point pass runs (over the launch's range).
    pub(crate) point: bool,
    pub(crate) scratch_bytes: Vec<usize>,
}
