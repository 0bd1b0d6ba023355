//! The host executor: fields in host memory, stencils as the rayon loop nest the macro printed.

use super::{
    check_pairs, check_parts, rows, BoxPart, Executor, FieldMap, HostBuffer, HostCopy, HostHeld, MessageBuffer,
    Messages, Record, Same, SideJob, Stencil,
};
use crate::domain::DistributionError;
use crate::error::LaunchError;
use crate::field::{Element, Field, HaloFill, Shape};
use crate::range::Loop;
use stencil_codegen::printer::cuda::Strategy;

/// Fills the declared boundary of every written field (the first error kept).
struct FillDeclared(std::cell::RefCell<Result<(), LaunchError>>);

impl FieldMap<Host, Host> for FillDeclared {
    fn field<'a, T: Element, const D: usize>(&self, field: &'a Field<T, D>) -> &'a Field<T, D> {
        field
    }
    fn field_mut<'a, T: Element, const D: usize>(&self, field: &'a mut Field<T, D>) -> &'a mut Field<T, D> {
        let mut first = self.0.borrow_mut();
        if first.is_ok() {
            *first = field.fill_declared().map_err(LaunchError::from);
        }
        field
    }
    fn held<'a, T: Element>(&self, held: &'a HostHeld<T>) -> &'a HostHeld<T> {
        held
    }
}

/// The host: [`Field`]s and the CPU loop nest, run in parallel by rayon's pool. Every call
/// returns when its work is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Host;

impl Executor for Host {
    type Field<T: Element, const D: usize> = Field<T, D>;
    type HeldScalar<T: Element> = HostHeld<T>;

    fn held<T: Element>(&self, value: T) -> Result<HostHeld<T>, LaunchError> {
        Ok(HostHeld::new(value))
    }

    fn set_held<T: Element>(&self, held: &HostHeld<T>, value: T) -> Result<(), LaunchError> {
        held.set(value);
        Ok(())
    }

    fn read_held<T: Element>(&self, held: &HostHeld<T>) -> Result<T, LaunchError> {
        Ok(held.get())
    }

    fn describe(&self) -> String {
        format!("host (rayon, {} threads)", rayon::current_num_threads())
    }

    fn alloc<T: Element, const D: usize>(&self, shape: Shape<D>) -> Result<Field<T, D>, LaunchError> {
        Ok(Field::try_zeros(shape)?)
    }

    fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<Field<T, D>, LaunchError> {
        Ok(host.try_clone()?)
    }

    fn download<T: Element, const D: usize>(&self, field: &Field<T, D>) -> Result<Field<T, D>, LaunchError> {
        Ok(field.try_clone()?)
    }

    fn copy<T: Element, const D: usize>(&self, dst: &mut Field<T, D>, src: &Field<T, D>) -> Result<(), LaunchError> {
        if dst.shape() != src.shape() {
            return Err(LaunchError::CopyShape {
                source_shape: src.shape().describe(),
                destination_shape: dst.shape().describe(),
            });
        }
        dst.as_mut_slice().copy_from_slice(src.as_slice());
        Ok(dst.fill_declared()?)
    }

    fn save<T: Element, const D: usize>(&self, field: &Field<T, D>) -> Result<HostCopy<T, D>, LaunchError> {
        Ok(HostCopy::whole(field.try_clone()?))
    }

    fn save_into<T: Element, const D: usize>(
        &self,
        field: &Field<T, D>,
        saved: &mut HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        // Copies in flight into or out of it (saved by a GPU) land first.
        saved.settle()?;
        match saved.whole_mut(field.shape()) {
            Some(copy) => copy.as_mut_slice().copy_from_slice(field.as_slice()),
            None => *saved = self.save(field)?,
        }
        Ok(())
    }

    fn restore<T: Element, const D: usize>(
        &self,
        field: &mut Field<T, D>,
        saved: &HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        saved.settle()?;
        let saved = saved.only(field.shape())?;
        field.as_mut_slice().copy_from_slice(saved.as_slice());
        Ok(field.fill_declared()?)
    }

    fn add_at<T: Element, const D: usize>(
        &self,
        field: &mut Field<T, D>,
        points: &[[usize; D]],
        values: &[T],
    ) -> Result<(), LaunchError> {
        let offsets = crate::sparse::add_offsets(field.shape(), points, values.len())?;
        let data = field.as_mut_slice();
        for (o, &v) in offsets.into_iter().zip(values) {
            data[o] = data[o].plus(v);
        }
        Ok(field.fill_declared()?)
    }

    fn read_range<T: Element, const D: usize>(
        &self,
        field: &Field<T, D>,
        range: &Loop<D>,
    ) -> Result<Vec<T>, LaunchError> {
        Ok(field.read_range(range)?)
    }

    fn run_with<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        _stencil: S,
        _strategy: Option<Strategy>,
        args: S::Args<'_, Host>,
    ) -> Result<(), LaunchError> {
        let _span = tracing::trace_span!(target: "stencil::launch", "run", stencil = S::INFO.name, on = "host", points = range.points()).entered();
        crate::cpu::settings()?;
        let mut args = args;
        S::run_host(range, S::map_args(&mut args, &Same))?;
        let fills = FillDeclared(std::cell::RefCell::new(Ok(())));
        S::map_args(&mut args, &fills);
        fills.0.into_inner()
    }

    fn run_steps_in_passes<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        per_pass: usize,
        pair: (&mut Field<T, D>, &mut Field<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f Field<T, D>, &'f mut Field<T, D>, &'f X) -> S::Args<'f, Host>,
    {
        self.run_steps_with(range, stencil, steps, Host::passes_of(per_pass), pair, fixed, args)
    }

    fn fill_halo_sides<T: Element, const D: usize>(
        &self,
        jobs: &mut [SideJob<'_, Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        for (field, fills) in jobs.iter_mut() {
            for (axis, [lo, hi]) in fills.iter().enumerate() {
                if lo.is_some() || hi.is_some() {
                    field.fill_halo_sides(axis, *lo, *hi)?;
                }
            }
        }
        Ok(())
    }

    fn declare_boundary<T: Element, const D: usize>(
        &self,
        field: &mut Field<T, D>,
        fills: [Option<HaloFill>; D],
    ) -> Result<(), LaunchError> {
        Ok(field.declare(fills)?)
    }

    fn synchronize(&self) -> Result<(), LaunchError> {
        Ok(())
    }

    fn fork_join<R>(&self, n: usize, work: impl FnOnce(&[Self]) -> Result<R, LaunchError>) -> Result<R, LaunchError> {
        work(&vec![Host; n])
    }
}

impl Messages for Host {
    type Buffer = HostBuffer;

    fn alloc_buffer(&self, bytes: usize) -> Result<HostBuffer, LaunchError> {
        Ok(HostBuffer::new(bytes))
    }

    fn pack<const D: usize>(&self, parts: &[BoxPart<'_, D>], buffer: &mut HostBuffer) -> Result<(), LaunchError> {
        check_parts(parts, buffer.capacity(), 0, &self.describe())?;
        let out = buffer.as_bytes_mut();
        for part in parts {
            for_rows(part, |field, at| out[at..at + field.len()].copy_from_slice(field));
        }
        Ok(())
    }

    fn unpack<const D: usize>(&self, buffer: &HostBuffer, parts: &[BoxPart<'_, D>]) -> Result<(), LaunchError> {
        check_parts(parts, buffer.capacity(), 0, &self.describe())?;
        let from = buffer.as_bytes();
        for part in parts {
            for_rows(part, |field, at| field.copy_from_slice(&from[at..at + field.len()]));
        }
        Ok(())
    }

    fn copy_buffer(&self, dst: &mut HostBuffer, _: &Self, src: &HostBuffer, bytes: usize) -> Result<(), LaunchError> {
        if bytes > dst.capacity() || bytes > src.capacity() {
            return Err(
                DistributionError::MessageSize { bytes, source: src.capacity(), destination: dst.capacity() }.into()
            );
        }
        dst.as_bytes_mut()[..bytes].copy_from_slice(&src.as_bytes()[..bytes]);
        Ok(())
    }

    fn buffer_to_host(&self, _: &mut HostBuffer, _: usize) -> Result<(), LaunchError> {
        Ok(())
    }

    fn buffer_from_host(&self, _: &mut HostBuffer, _: usize) -> Result<(), LaunchError> {
        Ok(())
    }

    type Mark = ();

    fn reaches(&self, _src_exec: &Self) -> Result<bool, LaunchError> {
        Ok(true)
    }

    fn mark(&self) -> Result<(), LaunchError> {
        Ok(())
    }

    fn after(&self, _mark: &()) -> Result<(), LaunchError> {
        Ok(())
    }

    fn copy_boxes<const D: usize>(
        &self,
        into: &[BoxPart<'_, D>],
        _src_exec: &Self,
        from: &[BoxPart<'_, D>],
    ) -> Result<(), LaunchError> {
        check_pairs(into, from, (0, 0), &self.describe())?;
        for (to, part) in into.iter().zip(from) {
            let mut read = rows(part);
            for_rows(to, |row, _| {
                let start = read.next().expect("paired boxes have as many rows");
                let elem = part.elem_bytes();
                // SAFETY: `part` was made from a host field borrowed for the exchange and checked
                // to lie inside its storage, so the row is in bounds; the exchange writes no
                // point of a box it reads (halos are written, interiors read), so the row does not
                // overlap `row`, and no other job writes it meanwhile.
                let src =
                    unsafe { std::slice::from_raw_parts((part.address() as *const u8).add(start * elem), row.len()) };
                row.copy_from_slice(src);
            });
        }
        Ok(())
    }
}

impl Record for Host {
    type Recording = ();

    fn record(&self, _step: &mut dyn FnMut(&Self) -> Result<(), LaunchError>) -> Result<Option<()>, LaunchError> {
        Ok(None)
    }

    fn replay(&self, _recording: &()) -> Result<(), LaunchError> {
        Ok(())
    }
}

/// Calls `row(field_bytes, buffer_offset)` for each row of `part`: the row's bytes in the field
/// (writable) and where they go in the buffer.
fn for_rows<const D: usize>(part: &BoxPart<'_, D>, mut row: impl FnMut(&mut [u8], usize)) {
    if part.is_empty() {
        return;
    }
    let elem = part.elem_bytes();
    let row_bytes = part.len()[part.shape().element_order().axes::<D>()[0]] * elem;
    for (i, start) in rows(part).enumerate() {
        // SAFETY: the part was made from a mutably borrowed host field (the borrow outlives the
        // part) and checked to lie inside its storage, so the row is in bounds; rows of one part
        // are disjoint, and the buffer is a separate allocation.
        let field = unsafe { std::slice::from_raw_parts_mut((part.address() as *mut u8).add(start * elem), row_bytes) };
        row(field, part.offset() + i * row_bytes);
    }
}
