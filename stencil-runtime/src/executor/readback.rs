//! Reads that do not wait: [`Readback`], what [`Executor::read_ranges_later`] returns.
//!
//! A model that samples its receivers every step with [`Executor::read_range`] makes the host
//! wait for the GPU every step, so the GPU idles while the host issues the next step. A
//! `Readback` is the same read issued in order on the executor's stream (into page-locked host
//! memory on a GPU) and collected later, after more steps have been issued.
//!
//! [`Executor::read_range`]: crate::Executor::read_range
//! [`Executor::read_ranges_later`]: crate::Executor::read_ranges_later

use crate::error::LaunchError;
use crate::executor::Stencil;
use crate::field::Element;

/// The values of some ranges of a field, read in order with the executor's other work and
/// handed over by [`Readback::wait`]: the values the field held when the read was issued,
/// whatever later work writes. Dropping it without waiting is allowed (on a GPU the drop waits
/// for the copy, so that its host memory can be reused).
#[must_use = "a Readback holds its values until `wait` is called"]
pub struct Readback<T: Element> {
    state: State<T>,
}

enum State<T: Element> {
    Ready(Vec<Vec<T>>),
    Pending(Box<dyn Pending<T>>),
}

/// A read in flight: an executor's copy, or several of them combined.
pub(crate) trait Pending<T: Element>: Send {
    /// Waits for the read and returns the values, one vector per range.
    fn wait(self: Box<Self>) -> Result<Vec<Vec<T>>, LaunchError>;
}

/// Several reads combined by a function once all of them are in.
struct Joined<T: Element, F> {
    parts: Vec<Readback<T>>,
    finish: F,
}

impl<T: Element, F> Pending<T> for Joined<T, F>
where
    F: FnOnce(Vec<Vec<Vec<T>>>) -> Result<Vec<Vec<T>>, LaunchError> + Send,
{
    fn wait(self: Box<Self>) -> Result<Vec<Vec<T>>, LaunchError> {
        let Joined { parts, finish } = *self;
        let values = parts.into_iter().map(Readback::wait).collect::<Result<Vec<_>, _>>()?;
        finish(values)
    }
}

impl<T: Element> Readback<T> {
    /// Values already read (an executor whose reads complete at once, such as the host).
    pub fn ready(values: Vec<Vec<T>>) -> Self {
        Readback { state: State::Ready(values) }
    }

    /// A read in flight, collected by `pending.wait()`.
    pub(crate) fn pending(pending: Box<dyn Pending<T>>) -> Self {
        Readback { state: State::Pending(pending) }
    }

    /// `parts`, once all are in, handed to `finish` (e.g. one read per subdomain placed into
    /// the ranges of the whole grid).
    pub(crate) fn join(
        parts: Vec<Readback<T>>,
        finish: impl FnOnce(Vec<Vec<Vec<T>>>) -> Result<Vec<Vec<T>>, LaunchError> + Send + 'static,
    ) -> Self {
        if parts.iter().all(|p| matches!(p.state, State::Ready(_))) {
            let values = parts.into_iter().map(|p| match p.state {
                State::Ready(v) => v,
                State::Pending(_) => unreachable!("checked above"),
            });
            return match finish(values.collect()) {
                Ok(v) => Readback::ready(v),
                Err(e) => Readback::pending(Box::new(Failed(Some(e)))),
            };
        }
        Readback::pending(Box::new(Joined { parts, finish }))
    }

    /// Whether the values are already on the host (waiting returns at once).
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }

    /// Waits for the read and returns the values: one vector per range, in the order the
    /// ranges were given, each axis 0 fastest as [`Executor::read_range`] returns them.
    ///
    /// [`Executor::read_range`]: crate::Executor::read_range
    pub fn wait(self) -> Result<Vec<Vec<T>>, LaunchError> {
        match self.state {
            State::Ready(values) => Ok(values),
            State::Pending(p) => p.wait(),
        }
    }
}

/// A combination whose function failed on values already in: the error, at `wait`.
struct Failed(Option<LaunchError>);

impl<T: Element> Pending<T> for Failed {
    fn wait(mut self: Box<Self>) -> Result<Vec<Vec<T>>, LaunchError> {
        Err(self.0.take().expect("waited once"))
    }
}

impl<T: Element> std::fmt::Debug for Readback<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.state {
            State::Ready(v) => write!(f, "Readback(ready: {} ranges)", v.len()),
            State::Pending(_) => write!(f, "Readback(pending)"),
        }
    }
}

/// The results of a launch that reduces, issued without waiting ([`Executor::reduce_later`]):
/// [`Reduced::fold_into`] waits and folds into each reduction parameter the launch's value, the
/// bits that [`Executor::run`] leaves in a parameter holding the identity.
///
/// [`Executor::run`]: crate::Executor::run
///
/// [`Executor::reduce_later`]: crate::Executor::reduce_later
#[must_use = "a Reduced holds the launch's results until `fold_into` is called"]
#[derive(Debug)]
pub struct Reduced {
    /// The stencil.
    stencil: &'static str,
    /// Its reduction parameters.
    count: usize,
    /// Their operators and value types, in order.
    ops: Vec<(crate::ReduceOp, stencil_codegen::ir::ScalarType)>,
    /// One vector per piece of the launch (a subdomain's part, in order): each reduction's
    /// result over that piece, in parameter order.
    pieces: Readback<f64>,
}

impl Reduced {
    /// Results of stencil `S` already on the host: one vector per piece, each with one value
    /// per reduction.
    pub(crate) fn ready<S: Stencil<D>, const D: usize>(pieces: Vec<Vec<f64>>) -> Self {
        Self::from_readback::<S, D>(Readback::ready(pieces))
    }

    /// Results of stencil `S` in flight (one piece per range of the readback).
    pub(crate) fn from_readback<S: Stencil<D>, const D: usize>(pieces: Readback<f64>) -> Self {
        let ops: Vec<_> = S::ir().reductions().map(|(_, r)| (r.op, r.elem)).collect();
        Reduced { stencil: S::INFO.name, count: ops.len(), ops, pieces }
    }

    /// Several launches' results of stencil `S`, folded one after another in this order.
    pub(crate) fn join<S: Stencil<D>, const D: usize>(parts: Vec<Reduced>) -> Self {
        let parts = parts.into_iter().map(|p| p.pieces).collect();
        Self::from_readback::<S, D>(Readback::join(parts, |values| Ok(values.into_iter().flatten().collect())))
    }

    /// Waits for the results: the launch's value of each reduction, as [`Reduced::fold_into`]
    /// folds it into a reducer holding the identity.
    pub(crate) fn values(self) -> Result<Vec<f64>, LaunchError> {
        let mut reducers: Vec<_> = self.ops.iter().map(|&(op, elem)| crate::reduce::reducer(op, elem)).collect();
        {
            let mut refs: Vec<&mut dyn crate::Reducer> = reducers.iter_mut().map(|r| &mut **r as _).collect();
            self.fold_into(&mut refs)?;
        }
        Ok(reducers.iter().map(|r| r.value_f64()).collect())
    }

    /// Waits for the results and folds the launch's value into each of `reducers` (the launch's
    /// reduction parameters in order, e.g. `&mut [&mut rate]`): the value is what
    /// [`Executor::run`] leaves in a parameter holding the identity (its pieces, a subdomain's
    /// part each, folded in order), folded into what the reducer holds (a sum holding −0.0 is
    /// taken as +0.0). An error when the count differs from the stencil's reductions (checked
    /// before waiting).
    ///
    /// [`Executor::run`]: crate::Executor::run
    pub fn fold_into(self, reducers: &mut [&mut dyn crate::Reducer]) -> Result<(), LaunchError> {
        if reducers.len() != self.count {
            let (expected, given) = (self.count, reducers.len());
            return Err(LaunchError::Reductions { stencil: self.stencil, expected, given });
        }
        let pieces = self.pieces.wait()?;
        debug_assert!(pieces.iter().all(|p| p.len() == self.count), "one result per reduction");
        for (i, r) in reducers.iter_mut().enumerate() {
            let held = r.value_f64();
            r.reset_value();
            pieces.iter().for_each(|piece| r.fold_f64(piece[i]));
            let value = r.value_f64();
            r.reset_value();
            r.fold_f64(held);
            r.fold_f64(value);
        }
        Ok(())
    }
}
