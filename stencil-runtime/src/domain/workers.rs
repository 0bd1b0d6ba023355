//! One host thread per local subdomain (ASUCA gives each GPU its own host thread): the host
//! work of a launch or a halo exchange — kernel launches, packs, peer copies, unpacks — is
//! issued for every subdomain at once, so that no GPU's launches wait behind another GPU's.
//!
//! [`Workers::each`] runs a job for every part, part 0 on the calling thread and part `i` on
//! worker `i`, and returns when all are done. Workers spin briefly for the next job (launches
//! come microseconds apart) and then sleep.

use super::refusal::DistributionError;
use crate::error::LaunchError;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker spins for its next job before it sleeps.
const SPIN: Duration = Duration::from_micros(200);

/// A job: runs part `i`. Borrowed for the length of one [`Workers::each`].
type Job<'a> = &'a (dyn Fn(usize) -> Result<(), LaunchError> + Sync);

/// What went wrong in a worker's job: an error, or a panic to resume on the caller's thread.
type Outcome = Result<Result<(), LaunchError>, Box<dyn std::any::Any + Send>>;

/// The slot a worker takes its jobs from.
struct Slot {
    /// Jobs posted; the worker runs job number `posted` once it sees it.
    posted: AtomicUsize,
    /// Jobs finished.
    done: AtomicUsize,
    /// The job of number `posted`, written before `posted` is raised. Its lifetime is erased:
    /// [`Workers::each`] waits for `done` to reach `posted` before it returns.
    job: UnsafeCell<Option<Job<'static>>>,
    outcome: Mutex<Option<Outcome>>,
    sleeping: AtomicBool,
    stop: AtomicBool,
}

// SAFETY: `job` is written by the posting thread before `posted` is raised (release) and read
// by the worker after it sees the new value (acquire); nothing writes it again before `done`
// catches up, and the job itself is `Sync`.
unsafe impl Sync for Slot {}

/// One host thread per part after the first (see the module docs).
pub(crate) struct Workers {
    /// Held while a job is out: one poster at a time (see [`Workers::each`]).
    busy: Mutex<()>,
    slots: Vec<Arc<Slot>>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workers({} host threads)", self.threads.len() + 1)
    }
}

impl Workers {
    /// Threads for `parts` parts: the caller runs part 0, so `parts - 1` threads.
    pub(crate) fn new(parts: usize) -> Result<Self, LaunchError> {
        let mut workers = Workers { busy: Mutex::new(()), slots: Vec::new(), threads: Vec::new() };
        for i in 1..parts {
            let slot = Arc::new(Slot {
                posted: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                job: UnsafeCell::new(None),
                outcome: Mutex::new(None),
                sleeping: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            });
            let theirs = slot.clone();
            let thread = std::thread::Builder::new()
                .name(format!("stencil-part-{i}"))
                .spawn(move || work(i, &theirs))
                .map_err(|e| DistributionError::HostThread { subdomain: i, reason: e.to_string() })?;
            workers.slots.push(slot);
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// How many parts the workers serve.
    pub(crate) fn parts(&self) -> usize {
        self.slots.len() + 1
    }

    /// Runs `job(i)` for every part `i` (`i < self.parts()`), each on its own thread, and
    /// returns when all are done: the error of the lowest part that failed, if any. A panic in
    /// a job resumes here. While another `each` is out (another thread's, or a job's own), the
    /// parts run one after another on this thread instead.
    pub(crate) fn each(&self, job: Job<'_>) -> Result<(), LaunchError> {
        let Ok(_busy) = self.busy.try_lock() else {
            return (0..self.parts()).try_for_each(job);
        };
        // SAFETY: the job's borrow outlives this call, which waits (below, on every path) until
        // every worker handed it has finished with it.
        let erased: Job<'static> = unsafe { std::mem::transmute::<Job<'_>, Job<'static>>(job) };
        for slot in &self.slots {
            let next = slot.posted.load(Ordering::Relaxed) + 1;
            // SAFETY: the worker is idle (`done == posted`, waited for by the previous call) and
            // reads the slot only after it sees `posted` raised.
            unsafe { *slot.job.get() = Some(erased) };
            slot.posted.store(next, Ordering::SeqCst);
        }
        // SeqCst with the worker's `sleeping` store and `posted` load: either it sees the job or
        // this sees it asleep.
        for (slot, thread) in self.slots.iter().zip(&self.threads) {
            if slot.sleeping.load(Ordering::SeqCst) {
                thread.thread().unpark();
            }
        }
        let first = catch_unwind(AssertUnwindSafe(|| job(0)));
        let mut outcomes = vec![first];
        for slot in &self.slots {
            let posted = slot.posted.load(Ordering::Relaxed);
            let start = Instant::now();
            while slot.done.load(Ordering::Acquire) != posted {
                if start.elapsed() < SPIN {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            let outcome = slot.outcome.lock().unwrap_or_else(PoisonError::into_inner).take();
            outcomes.push(outcome.expect("a finished job leaves its outcome"));
        }
        let mut error = None;
        for outcome in outcomes {
            match outcome {
                Err(panic) => resume_unwind(panic),
                Ok(Err(e)) if error.is_none() => error = Some(e),
                Ok(_) => {}
            }
        }
        error.map_or(Ok(()), Err)
    }
}

/// A worker's loop: wait for a job (spinning, then asleep), run it, report.
fn work(part: usize, slot: &Slot) {
    let mut seen = 0;
    loop {
        let start = Instant::now();
        loop {
            if slot.stop.load(Ordering::Acquire) {
                return;
            }
            if slot.posted.load(Ordering::Acquire) != seen {
                break;
            }
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                slot.sleeping.store(true, Ordering::SeqCst);
                // Seen after `sleeping` is set, or the poster's unpark wakes the park below.
                if slot.posted.load(Ordering::SeqCst) == seen && !slot.stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
                slot.sleeping.store(false, Ordering::Release);
            }
        }
        seen = slot.posted.load(Ordering::Acquire);
        // SAFETY: written before `posted` was raised; not written again until `done` is.
        let job = unsafe { (*slot.job.get()).take() }.expect("a posted job");
        let outcome = catch_unwind(AssertUnwindSafe(|| job(part)));
        *slot.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        slot.done.store(seen, Ordering::Release);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.stop.store(true, Ordering::Release);
        }
        for thread in self.threads.drain(..) {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// One value per part, each taken by the one thread that runs its part.
pub(crate) struct PerPart<T>(Vec<UnsafeCell<Option<T>>>);

// SAFETY: part `i`'s value is taken only by the job of part `i` (see `take`), which runs on one
// thread; the values belong to distinct parts (their own subdomain's fields and executor).
unsafe impl<T> Sync for PerPart<T> {}

impl<T> PerPart<T> {
    pub(crate) fn new(values: Vec<T>) -> Self {
        PerPart(values.into_iter().map(|v| UnsafeCell::new(Some(v))).collect())
    }

    /// Part `i`'s value, taken.
    ///
    /// # Safety
    /// Called once per `i`, by part `i`'s job only.
    pub(crate) unsafe fn take(&self, i: usize) -> T {
        // SAFETY: the caller's contract: part `i`'s job is its one user.
        unsafe { (*self.0[i].get()).take().expect("each part's value is taken once") }
    }
}

/// A slice whose elements the parts' jobs change, each element by one job.
pub(crate) struct Disjoint<'a, T> {
    first: *mut T,
    len: usize,
    _slice: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: each element is reached by one job at a time (see `get`), and `T: Send` lets it be
// changed on another thread.
unsafe impl<T: Send> Sync for Disjoint<'_, T> {}

impl<'a, T> Disjoint<'a, T> {
    pub(crate) fn new(slice: &'a mut [T]) -> Self {
        Disjoint { first: slice.as_mut_ptr(), len: slice.len(), _slice: std::marker::PhantomData }
    }

    /// Element `i`.
    ///
    /// # Safety
    /// No other reference to element `i` is alive while the returned one is (one job uses it).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get(&self, i: usize) -> &mut T {
        assert!(i < self.len, "element {i} of {}", self.len);
        // SAFETY: in bounds (checked), and the caller's contract: one user at a time.
        unsafe { &mut *self.first.add(i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn each_part_runs_once_per_call_on_its_own_thread() {
        let workers = Workers::new(4).unwrap();
        let counts: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        let names = Mutex::new(vec![String::new(); 4]);
        for _ in 0..1000 {
            workers
                .each(&|i| {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                    names.lock().unwrap()[i] = std::thread::current().name().unwrap_or("caller").to_string();
                    Ok(())
                })
                .unwrap();
        }
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1000));
        let names = names.into_inner().unwrap();
        assert_eq!(names[1..], ["stencil-part-1", "stencil-part-2", "stencil-part-3"]);
        assert_ne!(names[0], "stencil-part-0");
    }

    #[test]
    fn the_lowest_failing_part_is_the_error_and_a_panic_resumes_on_the_caller() {
        let workers = Workers::new(3).unwrap();
        let e = workers
            .each(&|i| {
                if i == 0 {
                    Ok(())
                } else {
                    Err(DistributionError::HostThread { subdomain: i, reason: "planted".into() }.into())
                }
            })
            .unwrap_err();
        assert!(e.to_string().contains("subdomain 1"), "{e}");
        let panicked =
            catch_unwind(AssertUnwindSafe(|| workers.each(&|i| if i == 2 { panic!("part 2") } else { Ok(()) })));
        assert!(panicked.is_err());
        // The workers still serve after a failure, also after sleeping.
        std::thread::sleep(Duration::from_millis(5));
        let sum = AtomicU64::new(0);
        workers
            .each(&|i| {
                sum.fetch_add(i as u64, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
        assert_eq!(sum.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn per_part_values_are_each_parts_own() {
        let workers = Workers::new(3).unwrap();
        let mut sums = [0u32, 10, 20];
        for _ in 0..100 {
            let values = PerPart::new(sums.iter_mut().collect());
            // SAFETY: part i takes value i only.
            workers
                .each(&|i| {
                    *unsafe { values.take(i) } += 1;
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(sums, [100, 110, 120]);
    }
}
