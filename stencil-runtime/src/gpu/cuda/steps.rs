//! Several time steps per sweep on a GPU (temporal blocking): [`Gpu::run_steps_with`], behind
//! [`Executor::run_steps`].

use super::context::Gpu;
use super::executor::kernel_args;
use super::kernel::{KernelChoice, LaunchKey};
use super::memory::DeviceField;
use crate::error::LaunchError;
use crate::executor::{Executor, Stencil};
use crate::field::Element;
use crate::gpu::source::{geometry, max_elem_bytes};
use crate::gpu::steps::{sweep_lengths, StepPairError};
use crate::range::Loop;
use crate::stencil::args::{ArgValue, FieldStorage};
use stencil_codegen::ir::ParamKind;
use stencil_codegen::printer::cuda::{check_steps_kernel, TimeTiling};

impl Gpu {
    /// [`Executor::run_steps`] with a choice of sweep: `Some(tiling)` computes up to
    /// `tiling.steps` steps per sweep (an odd number; see [`TimeTiling`] and
    /// [`crate::gpu::steps::sweep_lengths`]) and refuses a stencil or a pair that cannot run so
    /// ([`LaunchError::StepPair`]); `None` runs the steps one by one, as `run_steps` does (on an
    /// H100 the best tiling of the 7-point diffusion is within 2% of the best single steps and
    /// the others are slower: see the guide's GPU chapter, "Several steps per sweep").
    ///
    /// A stencil runs several steps per sweep when it is 3D, reads the pair's first field (and
    /// does not write it), writes the second and no other field, writes it at every point and
    /// does not read it. Bit for bit, `a` then holds what `steps` single launches leave there.
    #[allow(clippy::too_many_arguments)]
    pub fn run_steps_with<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        tiling: Option<TimeTiling>,
        pair: (&mut DeviceField<T, D>, &mut DeviceField<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f DeviceField<T, D>, &'f mut DeviceField<T, D>, &'f X) -> S::Args<'f, Gpu>,
    {
        let Some(tiling) = tiling else {
            return self.run_steps(range, stencil, steps, pair, fixed, args);
        };
        let (a, b) = pair;
        let refuse = |reason: StepPairError| LaunchError::StepPair { stencil: S::INFO.name, reason };
        if a.boundary.is_some_and(|f| f.iter().any(Option::is_some))
            || b.boundary.is_some_and(|f| f.iter().any(Option::is_some))
        {
            return Err(refuse(StepPairError::DeclaredBoundary { tiling }));
        }
        let (a_at, b_at) = (a.address(), b.address());
        let (input, output) =
            pair_input::<S, D>(&S::erase_args::<Gpu>(args(&*a, &mut *b, fixed)), a_at, b_at).map_err(refuse)?;
        // The stencil (point functions inlined) and the tiling as given must fit; the sweeps of a
        // run's rest may be shorter.
        let ir = S::ir();
        let geo = geometry(a.shape(), range, max_elem_bytes(ir));
        let (written, shared) =
            check_steps_kernel(ir, tiling, input, &geo).map_err(|e| refuse(StepPairError::Kernel(e)))?;
        if written != output {
            let (given, written) = (ir.params[output].name.clone(), ir.params[written].name.clone());
            return Err(refuse(StepPairError::Output { given, written }));
        }
        if tiling.steps % 2 == 0 {
            return Err(refuse(StepPairError::EvenSteps { tiling }));
        }
        let limit = self.max_shared_per_block()?;
        if shared > limit {
            return Err(refuse(StepPairError::SharedMemory { tiling, needs: shared, limit }));
        }
        for sweep in sweep_lengths(steps, tiling.steps) {
            // The rest of a run left by longer sweeps goes one step at a time.
            if sweep == 1 && tiling.steps > 1 {
                self.run(range, stencil, args(&*a, &mut *b, fixed))?;
            } else {
                self.sweep::<S, D>(range, tiling.with_steps(sweep), input, S::erase_args(args(&*a, &mut *b, fixed)))?;
            }
            std::mem::swap(a, b);
        }
        Ok(())
    }

    /// One sweep of `tiling.steps` steps, with the launch's checks.
    fn sweep<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        tiling: TimeTiling,
        input: usize,
        values: Vec<ArgValue<'_, D>>,
    ) -> Result<(), LaunchError> {
        let shape = self.check_launch::<S, D>(range, &values)?;
        if range.points() == 0 {
            return Ok(());
        }
        let ir = S::ir();
        let (len, origin, args) = kernel_args::<S, D>(&shape, range, &values)?;
        let key = LaunchKey {
            stencil: S::IR.as_ptr() as usize,
            kernel: KernelChoice::Steps { tiling, input },
            geometry: geometry(&shape, range, max_elem_bytes(ir)),
        };
        let prepared = self.prepared(ir, S::INFO.name, key)?;
        tracing::trace!(target: "stencil::launch", stencil = S::INFO.name, on = self.ordinal(), %tiling, points = range.points(), "sweep");
        Ok(self.launch_prepared(&prepared, len, origin, &args)?)
    }
}

/// The parameters that receive the pair's first field (at `a`) and its second (at `b`),
/// checking that the arguments pass the first once, to a read-only field, and the second once,
/// to a written one.
fn pair_input<S: Stencil<D>, const D: usize>(
    values: &[ArgValue<'_, D>],
    a: u64,
    b: u64,
) -> Result<(usize, usize), StepPairError> {
    let ir = S::ir();
    let at = |address: u64| -> Vec<usize> {
        values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, ArgValue::Field { ptr, .. } if *ptr == address))
            .map(|(p, _)| p)
            .collect()
    };
    let writable = |p: usize| matches!(ir.params[p].kind, ParamKind::Field(f) if f.writable);
    let name = |p: usize| ir.params[p].name.as_str();
    let (inputs, outputs) = (at(a), at(b));
    match (inputs.as_slice(), outputs.as_slice()) {
        (&[i], &[o]) if !writable(i) && writable(o) => Ok((i, o)),
        (&[i], &[o]) => Err(StepPairError::Roles { first: name(i).to_string(), second: name(o).to_string() }),
        (ins, outs) => Err(StepPairError::Count { first: ins.len(), second: outs.len() }),
    }
}
