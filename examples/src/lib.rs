//! Example models written with `#[stencil]`, used by the binaries under `src/bin/` and by the tests.

pub mod acoustic;
pub mod checkpoint;
pub mod column;
pub mod diffusion;
pub mod driver;
pub mod dycore;
pub mod euler;
pub mod fwi;
pub mod held_clock;
pub mod logging;
pub mod mountain_wave;
pub mod output;
pub mod placement;
pub mod progress;
pub mod swe;
pub mod velocity;
pub mod warm_rain;
