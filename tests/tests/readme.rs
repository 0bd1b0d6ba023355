//! The README's quickstart is the runtime's first doctest, and its multi-GPU program the doctest
//! of the distributed executor, which `cargo test` compiles and runs: the copies must not drift
//! apart.

/// The lines of the first block fenced by `fence` after `marker` in `text`, without the fences.
fn first_block_after<'a>(text: &'a str, marker: &str, fence: &str) -> Vec<&'a str> {
    let from = text.find(marker).unwrap_or_else(|| panic!("`{marker}` not found"));
    text[from..].lines().skip_while(|l| *l != fence).skip(1).take_while(|l| !l.starts_with("```")).collect()
}

#[test]
fn the_readme_quickstart_is_the_runtime_doctest() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let lib = std::fs::read_to_string(format!("{root}/stencil-runtime/src/lib.rs")).expect("lib.rs");
    let lib_text: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let in_readme = first_block_after(&readme, "## Quickstart\n", "```rust");
    // The doctest's hidden lines (`# ...`) are not shown in the README.
    let in_docs: Vec<&str> =
        first_block_after(&lib_text, "# Quickstart\n", "```").into_iter().filter(|l| !l.starts_with("# ")).collect();
    assert!(in_docs.len() > 20, "the doctest has {} lines", in_docs.len());
    assert_eq!(
        in_readme, in_docs,
        "README.md's quickstart differs from the first doctest of stencil-runtime/src/lib.rs"
    );
}

#[test]
fn the_readme_multi_gpu_program_is_the_distributed_executor_doctest() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let module =
        std::fs::read_to_string(format!("{root}/stencil-runtime/src/domain/distributed/mod.rs")).expect("module");
    let docs: String = module
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let in_readme = first_block_after(&readme, "## Many GPUs", "```rust");
    let in_docs: Vec<&str> =
        first_block_after(&docs, "# Many GPUs\n", "```").into_iter().filter(|l| !l.starts_with("# ")).collect();
    assert!((30..=60).contains(&in_docs.len()), "the program has {} lines", in_docs.len());
    assert_eq!(
        in_readme, in_docs,
        "README.md's multi-GPU program differs from the doctest in domain/distributed/mod.rs"
    );
}
