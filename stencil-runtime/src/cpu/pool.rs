//! The threads of CPU launches. By default a launch runs on the calling thread and workers of a
//! pool of this module (`spin`) that spin briefly between launches before they park
//! (`STENCIL_CPU_SPIN_US`, 50 by default), as many as rayon's current thread count
//! (`RAYON_NUM_THREADS`, or the pool a caller `install`s) allows; `STENCIL_CPU_POOL=rayon` runs
//! launches on rayon's workers instead.
//!
//! Optional thread pinning: with `STENCIL_CPU_PIN=1` the launch pool's worker in seat `s` is bound
//! to the `s`-th CPU this process may run on (the calling thread, seat 0, is left where it is: the
//! first CPU stays free for it), and rayon's global pool, built at the first parallel work of the
//! runtime, binds its worker `i` to the `i`-th CPU, so a thread keeps its caches and the pages it
//! touched first. (If the program built the global pool itself, rayon's pool is used unchanged.)

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// This thread's seat at a launch: 0 for the thread that calls it, `n + 1` for the pool's
    /// worker `n` (the same worker keeps its seat from launch to launch).
    pub(crate) static SEAT: Cell<usize> = const { Cell::new(0) };
    /// Whether launches from this thread hand out tasks by seat, where [`affine_tasks`] says so
    /// (`None`: as `STENCIL_CPU_TASKS` says, [`by_seat`]).
    pub(crate) static AFFINE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether launches from this thread give task `t` to the thread in seat `t % threads` first
/// (the caller and the launch pool's workers keep their seats), so that launches of the same
/// range put the same tiles on the same cores, where the last launch left them in the L2 (and
/// a stencil finds there what the one before it wrote); a thread that finds its own tasks done
/// takes any left. The default; `STENCIL_CPU_TASKS=shared` hands every task to whichever
/// thread is free (a shared counter) instead.
pub(crate) fn by_seat() -> bool {
    static SEATS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    AFFINE.get().unwrap_or_else(|| {
        *SEATS.get_or_init(|| {
            std::env::var("STENCIL_CPU_TASKS").map(|v| !v.trim().eq_ignore_ascii_case("shared")).unwrap_or(true)
        })
    })
}

/// Until the guard drops, launches from this thread hand out tasks by seat ([`by_seat`]),
/// whatever `STENCIL_CPU_TASKS` says: several steps per pass ([`crate::Host::run_steps_with`])
/// run so.
pub(crate) fn affine_tasks() -> impl Drop {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            AFFINE.set(self.0);
        }
    }
    Restore(AFFINE.replace(Some(true)))
}

/// Whether `STENCIL_CPU_PIN` asks for pinned threads (read once).
fn pin_wanted() -> bool {
    static PIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PIN.get_or_init(|| std::env::var("STENCIL_CPU_PIN").is_ok_and(|v| v.trim() == "1" || v.trim() == "on"))
}

/// Builds the pinned global pool if `STENCIL_CPU_PIN=1` asks for it (once; later calls return).
pub fn ensure_pool() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if !pin_wanted() {
            return;
        }
        let cpus = allowed_cpus();
        if cpus.is_empty() {
            return;
        }
        // An error means the program built the global pool already: leave it as it is.
        let _ = rayon::ThreadPoolBuilder::new().start_handler(move |i| pin(cpus[i % cpus.len()])).build_global();
    });
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is valid; the call fills it for this process.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Vec::new();
        }
        // SAFETY: `set` is initialised above.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// The CPU of the worker in `seat` when pinned: the `seat`-th of `cpus` (round the list), none
/// for an empty list.
fn seat_cpu(seat: usize, cpus: &[usize]) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[seat % cpus.len()])
}

/// Binds the calling thread to `cpu`.
fn pin(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: a cpu_set_t with one bit set, applied to the calling thread; failure is harmless.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// The launch pool: worker threads that, between launches, spin for a while (`STENCIL_CPU_SPIN_US`
/// microseconds, 50 by default, 0: park at once) before they park, so that the next launch of a
/// time loop finds them awake instead of paying a thread wake-up (several microseconds per
/// worker, which dominates launches on small grids). A launch joins up to `helpers` of them to
/// the calling thread; it returns only once every worker that joined has finished.
pub(crate) mod spin {
    use crate::cpu::pool::{allowed_cpus, pin, pin_wanted, seat_cpu};
    use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    /// The job of a launch, its lifetime erased: valid while the launch is open (see `run`).
    type JobRef = &'static (dyn Fn() + Sync);

    /// The launch state packs the launch's number (above) and its tickets, the workers that may
    /// still join it (the low bits), so that a worker joins with one compare-and-swap and knows
    /// which launch it joined.
    const TICKET_BITS: u32 = 24;
    const TICKETS: u64 = (1 << TICKET_BITS) - 1;

    fn launch_of(state: u64) -> u64 {
        state >> TICKET_BITS
    }

    struct Shared {
        /// Launch number and tickets (see [`TICKET_BITS`]); 0 before the first launch.
        state: AtomicU64,
        /// The open launch's job: a pointer to the launching thread's `JobRef` (null when none).
        job: AtomicPtr<JobRef>,
        /// Workers that announced themselves to the current launch and have not finished; a
        /// launch closes its tickets, then waits for this to fall to 0.
        active: AtomicUsize,
        /// Workers parked on `wake` (a new launch is announced under this lock, so that none
        /// is missed, and wakes them only if there are any).
        parked: Mutex<usize>,
        wake: Condvar,
        /// The first panic of a worker's part of the current launch (re-raised by the launch).
        panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
        spin: Duration,
    }

    struct Pool {
        shared: &'static Shared,
        workers: Mutex<usize>,
        /// Held by the launch using the pool (another launch at the same time runs without it).
        busy: Mutex<()>,
    }

    fn pool() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| {
            let us = std::env::var("STENCIL_CPU_SPIN_US").ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(50);
            let shared = Box::leak(Box::new(Shared {
                state: AtomicU64::new(0),
                job: AtomicPtr::new(std::ptr::null_mut()),
                active: AtomicUsize::new(0),
                parked: Mutex::new(0),
                wake: Condvar::new(),
                panic: Mutex::new(None),
                spin: Duration::from_micros(us),
            }));
            Pool { shared, workers: Mutex::new(0), busy: Mutex::new(()) }
        })
    }

    fn worker(shared: &'static Shared) {
        let mut seen = 0u64;
        let new_launch = |seen: u64| launch_of(shared.state.load(Ordering::Acquire)) != seen;
        loop {
            // Spin while the last launch is the one seen, then park.
            let start = Instant::now();
            let mut spins = 0u32;
            while !new_launch(seen) && start.elapsed() < shared.spin {
                std::hint::spin_loop();
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            if !new_launch(seen) {
                let mut parked = shared.parked.lock().unwrap_or_else(|e| e.into_inner());
                *parked += 1;
                while !new_launch(seen) {
                    parked = shared.wake.wait(parked).unwrap_or_else(|e| e.into_inner());
                }
                *parked -= 1;
            }
            // Announced before taking a ticket: a launch that closes waits for every worker
            // announced, so the job a ticket leads to outlives its use.
            shared.active.fetch_add(1, Ordering::SeqCst);
            let mut state = shared.state.load(Ordering::SeqCst);
            let joined = loop {
                seen = launch_of(state);
                if state & TICKETS == 0 {
                    break false;
                }
                match shared.state.compare_exchange_weak(state, state - 1, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => break true,
                    Err(now) => state = now,
                }
            };
            if joined {
                // SAFETY: a ticket is taken only while the launch is open, after `run` stored its
                // job, and `run` keeps the job alive until `active` (counting this worker) falls
                // to 0 after the tickets are closed.
                let job: JobRef = unsafe { *shared.job.load(Ordering::SeqCst) };
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                if let Err(payload) = result {
                    shared.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(payload);
                }
            }
            shared.active.fetch_sub(1, Ordering::Release);
        }
    }

    /// Runs `job` on the calling thread and on up to `helpers` pool workers at once, returning
    /// once all have finished; `false` (and nothing run) if another launch holds the pool.
    pub(crate) fn run(helpers: usize, job: &(dyn Fn() + Sync)) -> bool {
        let p = pool();
        // A launch that panicked poisons the lock; the pool is whole again after it (`Close`).
        let _busy = match p.busy.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        {
            let mut n = p.workers.lock().unwrap_or_else(|e| e.into_inner());
            let cpus = if *n < helpers && pin_wanted() { allowed_cpus() } else { Vec::new() };
            while *n < helpers {
                let (shared, seat) = (p.shared, *n + 1);
                let cpu = seat_cpu(seat, &cpus);
                let spawned = std::thread::Builder::new().name(format!("stencil-cpu-{n}")).spawn(move || {
                    if let Some(cpu) = cpu {
                        pin(cpu);
                    }
                    crate::cpu::pool::SEAT.set(seat);
                    worker(shared)
                });
                if spawned.is_err() {
                    return false;
                }
                *n += 1;
            }
        }
        let s = p.shared;
        // SAFETY (lifetime erasure): the job is reachable only through a ticket of this launch
        // or by a worker that joined it, and both end before this function returns (`Close`).
        let erased: JobRef = unsafe { std::mem::transmute::<&(dyn Fn() + Sync), JobRef>(job) };
        s.job.store(&erased as *const JobRef as *mut JobRef, Ordering::SeqCst);
        let launch = launch_of(s.state.load(Ordering::Relaxed)) + 1;
        {
            let parked = s.parked.lock().unwrap_or_else(|e| e.into_inner());
            s.state.store(launch << TICKET_BITS | (helpers as u64).min(TICKETS), Ordering::SeqCst);
            if *parked > 0 {
                s.wake.notify_all();
            }
        }
        {
            // Closes the launch and waits for the workers that joined, also when `job` panics
            // here: the job's borrow must outlive every use.
            struct Close(&'static Shared, u64);
            impl Drop for Close {
                fn drop(&mut self) {
                    self.0.state.store(self.1 << TICKET_BITS, Ordering::SeqCst);
                    // Yields now and then: a worker descheduled mid-task (more threads than
                    // free CPUs) gets its CPU back sooner.
                    let mut spins = 0u32;
                    // SeqCst, as the state store before it and the workers' announcements: a
                    // worker whose ticket came before the close is seen here (or has finished).
                    while self.0.active.load(Ordering::SeqCst) != 0 {
                        std::hint::spin_loop();
                        spins = spins.wrapping_add(1);
                        if spins.is_multiple_of(64) {
                            std::thread::yield_now();
                        }
                    }
                    self.0.job.store(std::ptr::null_mut(), Ordering::SeqCst);
                    // The caller's own part panicked: that panic is the launch's, and a worker's
                    // must not be left for the next launch to raise.
                    if std::thread::panicking() {
                        self.0.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
                    }
                }
            }
            let _close = Close(s, launch);
            job();
        }
        if let Some(payload) = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            std::panic::resume_unwind(payload);
        }
        true
    }

    /// Whether launches use this pool: not with `STENCIL_CPU_POOL=rayon` (rayon's workers, which
    /// park sooner; pinned with `STENCIL_CPU_PIN=1`).
    pub(crate) fn enabled() -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| {
            std::env::var("STENCIL_CPU_POOL").map(|v| !v.trim().eq_ignore_ascii_case("rayon")).unwrap_or(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::spin;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A pinned worker runs on its seat's CPU only: seats follow the allowed CPUs in order, the
    /// caller's seat 0 keeps the first free, and a thread pinned sees one CPU in its affinity.
    #[test]
    fn pinned_seats_take_the_allowed_cpus_in_order() {
        assert_eq!(super::seat_cpu(1, &[4, 6, 9]), Some(6));
        assert_eq!(super::seat_cpu(3, &[4, 6, 9]), Some(4));
        assert_eq!(super::seat_cpu(1, &[]), None);
        let cpus = super::allowed_cpus();
        if cfg!(target_os = "linux") {
            assert!(!cpus.is_empty(), "no allowed CPU read");
            let last = *cpus.last().unwrap();
            let seen = std::thread::spawn(move || {
                super::pin(last);
                super::allowed_cpus()
            })
            .join()
            .unwrap();
            assert_eq!(seen, vec![last]);
        }
    }

    /// Yields while another test's launch holds the pool; fails after 10 s, which no launch of
    /// these tests takes (a pool that refuses every launch is a bug, not a busy pool).
    fn wait_for_pool(start: std::time::Instant) {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "the launch pool refused launches for 10 s");
        std::thread::yield_now();
    }

    #[test]
    fn spin_pool_runs_every_task_once_and_passes_panics_on() {
        let start = std::time::Instant::now();
        for helpers in [1usize, 2, 3, 1] {
            for _ in 0..200 {
                let (next, sum) = (AtomicUsize::new(0), AtomicUsize::new(0));
                let drain = || loop {
                    let t = next.fetch_add(1, Ordering::Relaxed);
                    if t >= 100 {
                        break;
                    }
                    sum.fetch_add(t, Ordering::Relaxed);
                };
                // Another test may hold the pool: then nothing ran and the caller does it.
                if !spin::run(helpers, &drain) {
                    drain();
                }
                assert_eq!(sum.load(Ordering::Relaxed), 4950);
            }
        }
        // A panic of any thread's part reaches the launch; the pool works afterwards.
        loop {
            match std::panic::catch_unwind(|| spin::run(2, &|| panic!("task failed"))) {
                Ok(false) => wait_for_pool(start), // another launch holds the pool
                Ok(true) => panic!("a launch whose tasks panicked returned"),
                Err(_) => break,
            }
        }
        // The caller's part and a worker's both panic: the caller's panic ends the launch, and
        // the worker's is not raised again by the next launch.
        let joined = AtomicUsize::new(0);
        let both = || {
            joined.fetch_add(1, Ordering::SeqCst);
            let on_worker = std::thread::current().name().is_some_and(|n| n.starts_with("stencil-cpu"));
            if !on_worker {
                let start = std::time::Instant::now();
                while joined.load(Ordering::SeqCst) < 2 && start.elapsed() < std::time::Duration::from_secs(2) {
                    std::hint::spin_loop();
                }
            }
            panic!("task failed");
        };
        loop {
            match std::panic::catch_unwind(|| spin::run(2, &both)) {
                Ok(false) => wait_for_pool(start),
                Ok(true) => panic!("a launch whose tasks panicked returned"),
                Err(_) => break,
            }
        }
        assert!(joined.load(Ordering::SeqCst) >= 2, "no worker joined the launch");
        // The pool still runs launches after panics (its lock was poisoned by them).
        let n = AtomicUsize::new(0);
        while !spin::run(2, &|| {
            n.fetch_add(1, Ordering::Relaxed);
        }) {
            wait_for_pool(start);
        }
        assert!((1..=3).contains(&n.load(Ordering::Relaxed)));
    }

    /// More helpers than CPUs (workers descheduled while they join, take tickets or finish),
    /// with launches of different sizes back to back and after pauses, some asking for fewer
    /// helpers than the pool has (the others find no ticket): every task runs exactly once, and
    /// no launch returns while a worker still runs its part.
    #[test]
    fn many_helpers_over_few_cpus_run_every_task_once() {
        let start = std::time::Instant::now();
        for launch in 0..400usize {
            let helpers = [15usize, 1, 7, 15, 3][launch % 5];
            let tasks = [1usize, 16, 100, 3, 64, 1000][launch % 6];
            if launch % 50 == 49 {
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
            let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            let (next, running) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let drain = || {
                running.fetch_add(1, Ordering::SeqCst);
                loop {
                    let t = next.fetch_add(1, Ordering::Relaxed);
                    if t >= tasks {
                        break;
                    }
                    runs[t].fetch_add(1, Ordering::Relaxed);
                }
                running.fetch_sub(1, Ordering::SeqCst);
            };
            while !spin::run(helpers, &drain) {
                wait_for_pool(start);
            }
            assert_eq!(running.load(Ordering::SeqCst), 0, "launch {launch} returned while a part still ran");
            assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1), "launch {launch}: a task ran twice or never");
        }
    }

    /// Many tiny launches, some right after the last (workers still spinning), some after a pause
    /// longer than the spin (workers parked): every launch must get every helper it asks for, so
    /// a lost wake-up shows as a launch whose helpers never come (the caller waits 5 s for them).
    #[test]
    fn tiny_launches_wake_every_helper_spinning_or_parked() {
        let spin = std::env::var("STENCIL_CPU_SPIN_US").ok().and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(50);
        let pause = std::time::Duration::from_micros(spin + 500);
        for launch in 0..1500usize {
            let helpers = [1usize, 3, 2][launch % 3];
            let parked = launch % 4 == 0;
            if parked {
                std::thread::sleep(pause);
            }
            let (joined, work) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let job = || {
                joined.fetch_add(1, Ordering::SeqCst);
                let wait = std::time::Instant::now();
                while joined.load(Ordering::SeqCst) < helpers + 1 && wait.elapsed() < std::time::Duration::from_secs(5)
                {
                    std::thread::yield_now();
                }
                work.fetch_add(1, Ordering::Relaxed);
            };
            // Another test may hold the pool: retry (nothing ran).
            let busy_since = std::time::Instant::now();
            while !spin::run(helpers, &job) {
                wait_for_pool(busy_since);
            }
            let n = joined.load(Ordering::SeqCst);
            assert_eq!(
                n,
                helpers + 1,
                "launch {launch} (after a pause: {parked}): {n} of {} threads joined",
                helpers + 1
            );
            // Every thread that joined finished before the launch returned.
            assert_eq!(work.load(Ordering::Relaxed), n, "launch {launch} returned before its workers finished");
        }
    }
}
