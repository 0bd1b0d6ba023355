//! Helpers the checkpoint tests share: scratch folders and field bits.

use std::path::PathBuf;
use stencil_runtime::{Element, Field};

/// A fresh scratch folder for one test (`kind` keeps test files apart).
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-{kind}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every stored value's bits (halo and padding included).
pub fn bits<T: Element + Into<f64>, const D: usize>(f: &Field<T, D>) -> Vec<u64> {
    f.as_slice().iter().map(|&v| Into::<f64>::into(v).to_bits()).collect()
}

/// The interior values' bits, in element order (halo and padding aside).
pub fn interior_bits<T: Element + Into<f64>, const D: usize>(f: &Field<T, D>) -> Vec<u64> {
    let shape = f.shape();
    let n = shape.interior();
    shape
        .storage_points()
        .map(|s| shape.to_global(s))
        .filter(|g| (0..D).all(|a| g[a] >= 0 && (g[a] as usize) < n[a]))
        .map(|g| Into::<f64>::into(f.get(g).expect("interior")).to_bits())
        .collect()
}
