//! `#[stencil_fn]` helpers for the stencils of another crate (`tests/renamed-dependency`).

/// Physics helpers, in a module: `use helper_library::physics::lean;` brings the function and
/// its twin the stencils need.
pub mod physics {
    use stencil_runtime::prelude::*;

    /// A value leaning `w` towards the one behind it.
    #[stencil_fn]
    pub fn lean(w: f64, behind: f64, here: f64) -> f64 {
        (1.0 - w) * here + w * behind
    }

    /// `lean` along two axes, through the first helper (helpers that call helpers cross too).
    #[stencil_fn]
    pub fn lean2(w: f64, west: f64, south: f64, here: f64) -> f64 {
        0.5 * (lean(w, west, here) + lean(w, south, here))
    }
}
