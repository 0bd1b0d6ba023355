//! Lowering checks found while writing the suite, on source text (no trybuild needed): what
//! Rust itself accepts or rejects, the stencil language should too.

use stencil_codegen::StencilIr;

fn lower(src: &str) -> Result<StencilIr, String> {
    StencilIr::from_source(src).map_err(|e| e.to_string())
}

#[test]
fn a_body_may_end_in_an_assignment_without_semicolon() {
    // Rust accepts this (the value of an assignment is `()`); it is not a returned value.
    let plain = lower("fn s(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) { out[idx] = f[idx] * 2.0 }");
    assert!(plain.is_ok(), "{plain:?}");
    let compound = lower("fn s(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) { out[idx] += f[idx] }");
    assert!(compound.is_ok(), "{compound:?}");
}

#[test]
fn integer_literal_out_of_range_is_rejected() {
    // Rust rejects `n + 3000000000` for `n: i32` (literal out of range for `i32`); the nest
    // would print it as `-1294967296i32` and compute with that.
    let r = lower("fn s(idx: Idx1, n: i32, f: &Field1<f32>, out: &mut Field1<f32>) { out[idx] = f[idx] + ((n + 3000000000) as f32); }");
    let e = r.expect_err("3000000000 does not fit an i32");
    assert!(e.contains("3000000000"), "{e}");
}

#[test]
fn float_literal_out_of_f32_range_is_rejected() {
    // Rust rejects `1e40` as an f32 (literal out of range for `f32`); the nest prints
    // `f32::INFINITY`.
    let r = lower("fn s(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) { out[idx] = f[idx] * 1e40; }");
    let e = r.expect_err("1e40 does not fit an f32");
    assert!(e.contains("1e40"), "{e}");
}

#[test]
fn the_unit_value_is_an_error_not_a_stack_overflow() {
    // Found by the fuzz test: `x + ()` sent the lowering back and forth between scalar and value
    // forms until the stack overflowed (in the macro: a compiler crash).
    for body in
        ["out[idx] = f[idx] + ();", "let u = (); out[idx] = f[idx];", "out[idx] = if f[idx] > () { 1.0 } else { 0.0 };"]
    {
        let e =
            lower(&format!("fn s(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {{ {body} }}")).expect_err(body);
        assert!(e.contains("`()`"), "{body}: {e}");
    }
}
