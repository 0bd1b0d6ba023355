//! Several time steps of a ping-pong pair ([`Executor::run_steps`](crate::Executor::run_steps)):
//! how a run of `n` steps is split into sweeps that each compute several steps (host facts,
//! tested without a GPU).

use std::fmt;
use stencil_codegen::printer::cuda::{StrategyError, TimeTiling};

/// Why `Gpu::run_steps_with` refuses a pair, a stencil or a tiling
/// ([`Error::StepPair`](crate::Error::StepPair), S0109).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepPairError {
    /// A field of the pair declares a boundary, which must be filled after every step.
    DeclaredBoundary {
        /// The tiling asked for.
        tiling: TimeTiling,
    },
    /// The pair's fields are passed in the wrong roles.
    Roles {
        /// The parameter that receives the first field.
        first: String,
        /// The parameter that receives the second.
        second: String,
    },
    /// A field of the pair is not passed exactly once.
    Count {
        /// How often the first field is passed.
        first: usize,
        /// How often the second.
        second: usize,
    },
    /// The stencil cannot be blocked in time this way.
    Kernel(StrategyError),
    /// The pair's second field is not what the stencil writes.
    Output {
        /// The parameter that receives the second field.
        given: String,
        /// The field the stencil writes.
        written: String,
    },
    /// An even number of steps per sweep.
    EvenSteps {
        /// The tiling asked for.
        tiling: TimeTiling,
    },
    /// A host tiling of zero steps per pass.
    NoSteps,
    /// A field of the rotation declares a boundary, which must be filled after every step.
    HostDeclaredBoundary {
        /// Steps per pass asked for.
        steps: usize,
    },
    /// A field of the rotation is not passed once, in its role (`position` 0 is the field the
    /// step writes, 1 the newest it reads, 2 the one before).
    Passed {
        /// Which field of the rotation.
        position: usize,
        /// Fields in the rotation.
        of: usize,
        /// The parameters that receive it.
        params: Vec<String>,
    },
    /// The stencil has a reduction, which would sum over several steps of a pass.
    Reduces {
        /// The reduction parameter.
        param: String,
    },
    /// The stencil reads the field it writes.
    ReadsOutput {
        /// The parameter.
        param: String,
    },
    /// More shared memory per block than the device has.
    SharedMemory {
        /// The tiling asked for.
        tiling: TimeTiling,
        /// Bytes it needs per block.
        needs: u32,
        /// Bytes the device has per block.
        limit: u32,
    },
}

impl fmt::Display for StepPairError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use StepPairError as E;
        match self {
            E::DeclaredBoundary { tiling } => write!(
                f,
                "a field of the pair declares a boundary, which must be filled after every step, and {tiling} \
                 computes several steps per sweep: run the steps one by one (tiling None)"
            ),
            E::Roles { first, second } => write!(
                f,
                "the arguments pass the pair's first field as `{first}` and its second as `{second}`: the first \
                 must be a field the stencil reads (`&`), the second one it writes (`&mut`)"
            ),
            E::Count { first, second } => write!(
                f,
                "the arguments must pass each field of the pair once, but pass the first {first} time(s) and the \
                 second {second} time(s)"
            ),
            E::Kernel(e) => write!(f, "{e}"),
            E::Output { given, written } => {
                write!(f, "the arguments pass the pair's second field as `{given}`, but the stencil writes `{written}`")
            }
            E::EvenSteps { tiling } => write!(
                f,
                "{tiling} computes an even number of steps per sweep, whose result would overwrite its own input: \
                 use {} or {} steps",
                tiling.steps - 1,
                tiling.steps + 1
            ),
            E::NoSteps => {
                write!(f, "a tiling of 0 steps per pass: ask for at least 1, or run the steps one by one (tiling None)")
            }
            E::HostDeclaredBoundary { steps } => write!(
                f,
                "a field of the rotation declares a boundary, which must be filled after every step, and a tiling \
                 of {steps} steps per pass computes several steps between fills: run the steps one by one (tiling None)"
            ),
            E::Passed { position, of, params } => {
                let which = match position {
                    0 => "the field each step writes (`&mut`)".to_string(),
                    1 => "the newest field each step reads (`&`)".to_string(),
                    p => format!("the field each step reads {p} steps back (`&`)"),
                };
                write!(
                    f,
                    "of the {of} fields that rotate, {which} is passed to {}: it must be passed exactly once, \
                     to a parameter of that kind",
                    if params.is_empty() { "no parameter".to_string() } else { format!("{params:?}") }
                )
            }
            E::Reduces { param } => write!(
                f,
                "the stencil reduces into `{param}`, which several steps per pass would sum over all of them: run \
                 the steps one by one (tiling None)"
            ),
            E::ReadsOutput { param } => write!(
                f,
                "the stencil reads `{param}`, the field it writes, which several steps per pass would read \
                 half-updated: run the steps one by one (tiling None)"
            ),
            E::SharedMemory { tiling, needs, limit } => write!(
                f,
                "{tiling} needs {needs} bytes of shared memory per block and this device has {limit}: use fewer \
                 steps or a smaller tile"
            ),
        }
    }
}

/// The lengths of the sweeps that run `steps` time steps with at most `per_sweep` per sweep.
///
/// Every sweep is odd: a sweep reads one field of the pair and writes the other, which is where
/// an odd number of single steps leaves its result, so the pair ends as `steps` single steps
/// leave it. As many sweeps of the largest odd length not above `per_sweep` as fit, then an odd
/// rest, or the rest less one and a single step.
pub fn sweep_lengths(steps: usize, per_sweep: u32) -> Vec<u32> {
    let per = (per_sweep.max(1) - (1 - per_sweep.max(1) % 2)) as usize;
    let mut sweeps = vec![per as u32; steps / per];
    match steps % per {
        0 => {}
        rest if rest % 2 == 1 => sweeps.push(rest as u32),
        rest => sweeps.extend([rest as u32 - 1, 1]),
    }
    sweeps
}

#[cfg(test)]
mod tests {
    use super::sweep_lengths;

    #[test]
    fn sweeps_are_odd_and_add_up() {
        for per in 1..=9 {
            for steps in 0..40 {
                let s = sweep_lengths(steps, per);
                assert_eq!(s.iter().map(|&k| k as usize).sum::<usize>(), steps, "{steps} steps, {per} per sweep");
                assert!(s.iter().all(|&k| k % 2 == 1 && k <= per.max(1)), "{s:?} for {steps} steps, {per} per sweep");
            }
        }
        assert_eq!(sweep_lengths(10, 3), [3, 3, 3, 1]);
        assert_eq!(sweep_lengths(11, 3), [3, 3, 3, 1, 1]);
        assert_eq!(sweep_lengths(8, 5), [5, 3]);
        assert_eq!(sweep_lengths(9, 4), [3, 3, 3]);
        assert_eq!(sweep_lengths(6, 5), [5, 1]);
    }
}
