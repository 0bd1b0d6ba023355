//! Several time steps of a ping-pong pair ([`Executor::run_steps`](crate::Executor::run_steps)):
//! how a run of `n` steps is split into sweeps that each compute several steps (host facts,
//! tested without a GPU).

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
