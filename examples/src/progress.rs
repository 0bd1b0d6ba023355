//! The examples' progress bars.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `steps` steps, with the time elapsed and the time left.
pub fn steps(steps: usize) -> ProgressBar {
    ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {elapsed_precise} elapsed, eta {eta}")
            .expect("a valid template"),
    )
}
