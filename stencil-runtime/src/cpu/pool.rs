//! Optional thread pinning: with `STENCIL_CPU_PIN=1` the first parallel work of the runtime builds
//! rayon's global pool with worker `i` bound to the `i`-th CPU this process may run on, so a
//! thread keeps its caches and the pages it touched first. Without it (or if the program built
//! the global pool itself) rayon's default pool is used unchanged.

use std::sync::Once;

/// Builds the pinned global pool if `STENCIL_CPU_PIN=1` asks for it (once; later calls return).
pub fn ensure_pool() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let wanted = std::env::var("STENCIL_CPU_PIN").is_ok_and(|v| v.trim() == "1" || v.trim() == "on");
        if !wanted {
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
