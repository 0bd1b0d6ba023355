//! The runtime's tracing output for the example programs: off unless the environment variable
//! `STENCIL_LOG` holds a filter, then written to standard error. Targets: `stencil::compile`
//! (kernel cache hits and misses, NVRTC time), `stencil::launch` (every stencil run, at `trace`),
//! `stencil::exchange` (halo exchanges) and `stencil::io` (scatter, gather); spans print when
//! they close, with the time they took.
//!
//! ```sh
//! STENCIL_LOG=stencil=debug cargo run --release -- --steps 10
//! STENCIL_LOG=stencil::launch=trace,stencil::compile=debug cargo run --release
//! ```

/// Installs the subscriber when `STENCIL_LOG` is set (a malformed filter is reported, and
/// logging stays off).
pub fn init() {
    let Ok(filter) = std::env::var("STENCIL_LOG") else { return };
    match tracing_subscriber::EnvFilter::try_new(&filter) {
        Ok(filter) => {
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
                .with_writer(std::io::stderr);
            // Another subscriber already installed (a test harness) keeps its place.
            let _ = subscriber.try_init();
        }
        Err(e) => eprintln!("STENCIL_LOG={filter:?} is not a tracing filter ({e}); logging stays off"),
    }
}
