//! The IR of each stencil, rebuilt from its embedded source at most once per process.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use stencil_codegen::StencilIr;

/// The IR for a stencil source; lowered on first use, then shared. The source was accepted by the
/// same lowering at compile time, so failure here means mismatched crate versions.
pub(crate) fn ir_of(name: &'static str, source: &'static str) -> &'static StencilIr {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, &'static StencilIr>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(source).or_insert_with(|| {
        let ir = StencilIr::from_source(source).unwrap_or_else(|e| {
            panic!("stencil `{name}`: its embedded source no longer lowers ({e}); stencil-macros and stencil-runtime must come from the same release")
        });
        Box::leak(Box::new(ir))
    })
}
