//! Watching device transports between ranks for peers that stop (the bookkeeping and the
//! messages; the NCCL transport does the watching): deadlines of the exchanges in flight, the
//! notices ranks send each other while a set-up that may block (NCCL's bootstrap) runs, and the
//! messages a rank prints before it aborts the run. Pure, so tested without MPI or a GPU.

#![cfg_attr(not(feature = "nccl"), allow(dead_code))]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Exchanges issued on the device and not yet finished there, oldest first. The device runs a
/// rank's exchanges in issue order, so only the oldest one can be waiting on a peer; it counts as
/// waiting from when it was issued or from when the one before it finished, whichever is later
/// (work queued ahead of it is not the peer's fault).
#[derive(Debug)]
pub(crate) struct Deadlines<T> {
    pending: VecDeque<(Instant, T)>,
    last_done: Option<Instant>,
}

impl<T> Default for Deadlines<T> {
    fn default() -> Self {
        Deadlines { pending: VecDeque::new(), last_done: None }
    }
}

impl<T> Deadlines<T> {
    /// An exchange issued at `at`.
    pub(crate) fn issued(&mut self, at: Instant, item: T) {
        self.pending.push_back((at, item));
    }

    /// The oldest unfinished exchange.
    pub(crate) fn oldest(&self) -> Option<&T> {
        self.pending.front().map(|(_, t)| t)
    }

    /// The oldest exchange was seen finished at `at`.
    pub(crate) fn finished(&mut self, at: Instant) -> Option<T> {
        let (_, item) = self.pending.pop_front()?;
        self.last_done = Some(at);
        Some(item)
    }

    /// How long the oldest unfinished exchange has been waiting at `now`.
    pub(crate) fn waiting(&self, now: Instant) -> Option<Duration> {
        let (issued, _) = self.pending.front()?;
        let since = match self.last_done {
            Some(done) if done > *issued => done,
            _ => *issued,
        };
        Some(now.saturating_duration_since(since))
    }

    /// The oldest unfinished exchange and how long it waited, when that is over `limit`.
    pub(crate) fn overdue(&self, now: Instant, limit: Duration) -> Option<(Duration, &T)> {
        let waited = self.waiting(now)?;
        (waited > limit).then(|| (waited, self.oldest().expect("waiting implies one")))
    }

    /// Exchanges in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

/// One message a rank waits for: what it is, and the rank it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Awaited {
    /// E.g. `axis 0 high halo of subdomain 0 from subdomain 1`.
    pub what: String,
    /// The sending rank.
    pub rank: usize,
}

/// The ranks of `awaited`, each once, in order.
fn ranks_of(awaited: &[Awaited]) -> Vec<usize> {
    let mut ranks: Vec<usize> = awaited.iter().map(|a| a.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// `1, 2 and 3`.
fn list(ranks: &[usize]) -> String {
    match ranks {
        [] => "none".to_string(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// What rank `me` prints before it aborts the run because its oldest NCCL exchange waited
/// `waited` for `awaited`.
pub(crate) fn exchange_stall_message(me: usize, waited: Duration, awaited: &[Awaited]) -> String {
    let ranks = ranks_of(awaited);
    format!(
        "stencil-runtime: rank {me} waited {:.0} s for messages over NCCL from rank(s) {} ({}) and aborts the \
         run: a neighbouring rank stopped, failed or does not call the same exchange (every rank must exchange the \
         same fields in the same order); raise STENCIL_EXCHANGE_TIMEOUT if its steps are just slow",
        waited.as_secs_f64(),
        list(&ranks),
        if awaited.is_empty() {
            "sends not delivered".to_string()
        } else {
            awaited.iter().map(|a| format!("{} from rank {}", a.what, a.rank)).collect::<Vec<_>>().join(", ")
        }
    )
}

/// What rank `me` prints before it aborts the run because NCCL reported `error` on the
/// communicator of one of its subdomains while it waited for `awaited`.
pub(crate) fn exchange_error_message(me: usize, error: &str, awaited: &[Awaited]) -> String {
    format!(
        "stencil-runtime: rank {me}: NCCL reported an error while messages from rank(s) {} were in flight \
         ({error}); aborting the run",
        list(&ranks_of(awaited))
    )
}

/// What rank `me` prints before it aborts the run because ranks `missing` did not say within
/// `waited` whether `what` (a collective set-up) succeeded.
pub(crate) fn setup_stall_message(me: usize, waited: Duration, what: &str, missing: &[usize]) -> String {
    format!(
        "stencil-runtime: rank {me} waited {:.0} s for {what}, with no word from rank(s) {}, and aborts the run: \
         those ranks stopped or do not set up the same transport; raise STENCIL_EXCHANGE_TIMEOUT if they are just slow",
        waited.as_secs_f64(),
        list(missing)
    )
}

/// The failed ranks of `outcomes` and their errors, for an `Err` every rank returns; `None` when
/// none failed.
pub(crate) fn setup_failures(outcomes: &[Result<(), String>]) -> Option<String> {
    let failed: Vec<String> =
        outcomes.iter().enumerate().filter_map(|(r, o)| o.as_ref().err().map(|e| format!("rank {r}: {e}"))).collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

/// Bytes of a set-up notice: a status byte and the error's text, NUL-padded.
pub(crate) const NOTICE: usize = 512;

/// A rank's set-up outcome as a notice for the others.
pub(crate) fn encode_outcome(outcome: &Result<(), String>) -> Vec<u8> {
    let mut bytes = vec![0u8; NOTICE];
    if let Err(e) = outcome {
        bytes[0] = 1;
        let mut end = e.len().min(NOTICE - 1);
        while !e.is_char_boundary(end) {
            end -= 1;
        }
        bytes[1..1 + end].copy_from_slice(&e.as_bytes()[..end]);
    }
    bytes
}

/// The outcome a notice carries.
pub(crate) fn decode_outcome(bytes: &[u8]) -> Result<(), String> {
    match bytes.first() {
        Some(0) => Ok(()),
        _ => {
            let text = &bytes[1.min(bytes.len())..];
            let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
            Err(String::from_utf8_lossy(&text[..end]).into_owned())
        }
    }
}

/// Whether this rank is to fail its NCCL communicator set-up on purpose, for tests: builds with
/// the `fault-injection` feature read `STENCIL_TEST_NCCL_INIT_FAIL` (a rank, or a comma-separated
/// list of ranks); other builds never fail on purpose.
pub(crate) fn inject_init_failure(rank: usize) -> bool {
    if !cfg!(feature = "fault-injection") {
        return false;
    }
    injected(std::env::var("STENCIL_TEST_NCCL_INIT_FAIL").ok().as_deref(), rank)
}

/// Whether the all-reduce of held scalars over NCCL is to be left out on purpose, for tests:
/// builds with the `fault-injection` feature read `STENCIL_TEST_NCCL_SKIP_FOLD=1` (the copies
/// then keep what they held, which a check of the fold must catch); other builds never skip it.
pub(crate) fn inject_skipped_fold() -> bool {
    cfg!(feature = "fault-injection") && std::env::var("STENCIL_TEST_NCCL_SKIP_FOLD").is_ok_and(|v| v.trim() == "1")
}

/// Whether `setting` (`STENCIL_TEST_NCCL_INIT_FAIL`) names `rank`.
fn injected(setting: Option<&str>, rank: usize) -> bool {
    setting.is_some_and(|s| s.split(',').any(|r| r.trim().parse() == Ok(rank)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, s: u64) -> Instant {
        base + Duration::from_secs(s)
    }

    #[test]
    fn the_oldest_exchange_waits_from_its_issue_or_the_previous_finish() {
        let t = Instant::now();
        let limit = Duration::from_secs(30);
        let mut d = Deadlines::default();
        assert_eq!(d.waiting(at(t, 100)), None);
        d.issued(at(t, 0), "first");
        d.issued(at(t, 1), "second");
        assert_eq!(d.len(), 2);
        assert_eq!(d.waiting(at(t, 10)), Some(Duration::from_secs(10)));
        assert!(d.overdue(at(t, 30), limit).is_none(), "not over the limit yet");
        // The first finishes late (queued behind long kernels): the second waits from then.
        assert_eq!(d.finished(at(t, 25)), Some("first"));
        assert_eq!(d.waiting(at(t, 40)), Some(Duration::from_secs(15)));
        assert!(d.overdue(at(t, 55), limit).is_none());
        assert_eq!(d.overdue(at(t, 56), limit), Some((Duration::from_secs(31), &"second")));
        // One issued after the previous finished waits from its own issue.
        assert_eq!(d.finished(at(t, 60)), Some("second"));
        d.issued(at(t, 70), "third");
        assert_eq!(d.waiting(at(t, 75)), Some(Duration::from_secs(5)));
        assert_eq!(d.finished(at(t, 80)), Some("third"));
        assert_eq!(d.finished(at(t, 90)), None);
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn stall_messages_name_the_ranks_and_the_messages() {
        let awaited = [
            Awaited { what: "axis 0 high halo of subdomain 0 from subdomain 1".into(), rank: 1 },
            Awaited { what: "axis 0 low halo of subdomain 0 from subdomain 3".into(), rank: 3 },
            Awaited { what: "axis 1 high halo of subdomain 0 from subdomain 1".into(), rank: 1 },
        ];
        let m = exchange_stall_message(0, Duration::from_secs_f64(30.4), &awaited);
        assert!(
            m.starts_with("stencil-runtime: rank 0 waited 30 s for messages over NCCL from rank(s) 1 and 3 ("),
            "{m}"
        );
        assert!(m.contains("axis 0 low halo of subdomain 0 from subdomain 3 from rank 3"), "{m}");
        assert!(m.contains("STENCIL_EXCHANGE_TIMEOUT"), "{m}");
        assert!(exchange_stall_message(2, Duration::from_secs(5), &[]).contains("rank(s) none (sends not delivered)"));
        let e = exchange_error_message(1, "ncclRemoteError: remote process exited", &awaited[..1]);
        assert!(e.contains("rank 1: NCCL reported an error while messages from rank(s) 1"), "{e}");
        let s = setup_stall_message(0, Duration::from_secs(60), "the NCCL communicators", &[1, 2]);
        assert!(s.contains("rank 0 waited 60 s for the NCCL communicators, with no word from rank(s) 1 and 2"), "{s}");
    }

    #[test]
    fn setup_outcomes_travel_as_notices_and_name_the_failed_ranks() {
        for outcome in [Ok(()), Err("ncclInvalidArgument: rank 2 of 2".to_string()), Err(String::new())] {
            let bytes = encode_outcome(&outcome);
            assert_eq!(bytes.len(), NOTICE);
            assert_eq!(decode_outcome(&bytes), outcome);
        }
        let long = "é".repeat(400);
        let cut = decode_outcome(&encode_outcome(&Err(long.clone()))).unwrap_err();
        assert!(long.starts_with(&cut) && cut.len() < NOTICE, "cut on a character boundary");
        assert_eq!(setup_failures(&[Ok(()), Ok(())]), None);
        let failed = [Ok(()), Err("ncclInvalidArgument".to_string()), Err("gave up: rank 1 failed".to_string())];
        assert_eq!(setup_failures(&failed).unwrap(), "rank 1: ncclInvalidArgument; rank 2: gave up: rank 1 failed");
    }

    #[test]
    fn init_failures_are_injected_only_where_named() {
        assert!(injected(Some("1"), 1));
        assert!(injected(Some(" 0, 3 "), 3));
        assert!(!injected(Some("1"), 0));
        assert!(!injected(Some("x"), 0));
        assert!(!injected(None, 0));
    }
}
