//! Compile-time behaviour of `#[stencil]`, through trybuild: every rejection points at the
//! offending tokens and says what to write instead (`tests/ui/*.rs` with their `.stderr`), and a
//! few programs that must compile and run (`tests/ui/pass/*.rs`).
//!
//! Regenerate the `.stderr` files of `ui/*.rs` with
//! `TRYBUILD=overwrite cargo test -p stencil-tests --test ui -- --exact ui_rejects` and read every
//! diff before committing it. The `.stderr` files under `ui/tail/` were first written by hand with
//! the message the macro should give (it then gave a wrong one); check any regeneration of them
//! against that intent.

#[test]
fn ui_rejects() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}

/// Loops and `unsafe` blocks that end the body are rejected for what they are, not as a value
/// the stencil would return.
#[test]
fn ui_rejects_block_statements_that_end_the_body() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/tail/*.rs");
}

#[test]
fn ui_accepts() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
}
