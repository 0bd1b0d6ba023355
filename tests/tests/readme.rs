//! The README's quickstart is the runtime's first doctest, and its multi-GPU program the doctest
//! of the distributed executor, which `cargo test` compiles and runs: the copies must not drift
//! apart.

/// The lines of the first block fenced by `fence` after `marker` in `text`, without the fences.
fn first_block_after<'a>(text: &'a str, marker: &str, fence: &str) -> Vec<&'a str> {
    let from = text.find(marker).unwrap_or_else(|| panic!("`{marker}` not found"));
    text[from..].lines().skip_while(|l| *l != fence).skip(1).take_while(|l| !l.starts_with("```")).collect()
}

/// The README and the module docs (`//!` lines, their marker removed) of the file `path`.
fn readme_and_docs(path: &str) -> (String, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let source = std::fs::read_to_string(format!("{root}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"));
    let docs = source
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    (readme, docs)
}

/// The doctest's lines after `marker`, without its hidden lines (`# ...`, not shown in the README).
fn doctest_after<'a>(docs: &'a str, marker: &str) -> Vec<&'a str> {
    first_block_after(docs, marker, "```").into_iter().filter(|l| !l.starts_with("# ")).collect()
}

#[test]
fn the_readme_quickstart_is_the_runtime_doctest() {
    let (readme, docs) = readme_and_docs("stencil-runtime/src/lib.rs");
    let (in_readme, in_docs) =
        (first_block_after(&readme, "## Quickstart\n", "```rust"), doctest_after(&docs, "# Quickstart\n"));
    assert!(in_docs.len() > 20, "the doctest has {} lines", in_docs.len());
    assert_eq!(
        in_readme, in_docs,
        "README.md's quickstart differs from the first doctest of stencil-runtime/src/lib.rs"
    );
}

#[test]
fn the_readme_multi_gpu_program_is_the_distributed_executor_doctest() {
    let (readme, docs) = readme_and_docs("stencil-runtime/src/domain/distributed/mod.rs");
    let (in_readme, in_docs) =
        (first_block_after(&readme, "## Many GPUs", "```rust"), doctest_after(&docs, "# Many GPUs\n"));
    assert!((30..=60).contains(&in_docs.len()), "the program has {} lines", in_docs.len());
    assert_eq!(
        in_readme, in_docs,
        "README.md's multi-GPU program differs from the doctest in domain/distributed/mod.rs"
    );
}
