//! For every canonical stencil, the IR the runtime decodes from what the macro embedded
//! (`<S as Stencil<D>>::ir()`) is the IR `stencil_codegen` lowers from the same function's source
//! text, and the embedded form round-trips through `decode` and `encode`.

use stencil_codegen::StencilIr;
use stencil_runtime::Stencil;
use stencil_tests::canonical::*;

/// Checks stencil `S` against its source `source` (the stencil, then the helpers it reaches).
fn check<S: Stencil<D>, const D: usize>(sources: &[&str]) {
    let name = S::INFO.name;
    let lowered = StencilIr::from_source(&sources.join("\n"))
        .unwrap_or_else(|e| panic!("`{name}`: its source does not lower: {e}"));
    assert_eq!(S::ir(), &lowered, "`{name}`: the embedded IR differs from the IR lowered from the source");
    let decoded = StencilIr::decode(S::IR).unwrap_or_else(|e| panic!("`{name}`: the embedded IR does not decode: {e}"));
    assert_eq!(decoded, lowered, "`{name}`: decoding the embedded IR");
    assert_eq!(decoded.encode(), S::IR, "`{name}`: encode(decode(IR)) is not the embedded text");
    assert_eq!(StencilIr::decode(&lowered.encode()).expect("decodes"), lowered, "`{name}`: decode(encode(ir))");
}

#[test]
fn embedded_ir_is_the_lowered_source() {
    check::<Diffusion, 3>(&[DIFFUSION_SOURCE]);
    check::<Diffusion7F64, 3>(&[DIFFUSION7_F64_SOURCE]);
    check::<Star25, 3>(&[STAR25_SOURCE]);
    check::<Star25F64, 3>(&[STAR25_F64_SOURCE]);
    check::<Branchy, 3>(&[BRANCHY_SOURCE]);
    check::<DiffusionF64, 3>(&[DIFFUSION_F64_SOURCE]);
    check::<Jacobi2d, 2>(&[JACOBI2D_SOURCE]);
    check::<Leapfrog7, 3>(&[LEAPFROG7_SOURCE]);
    let euler: Vec<&str> = std::iter::once(EULER_FLUX_X_SOURCE).chain(EULER_HELPER_SOURCES).collect();
    check::<EulerFluxX, 3>(&euler);
}
