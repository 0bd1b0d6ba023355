//! Snapshots of what the compiler makes of two stencils: the IR, the code `#[stencil]` expands
//! to (pretty-printed), and the analyses (field accesses, flops and minimal bytes per point).
//!
//! Review a change with `cargo insta review` (or `INSTA_UPDATE=always cargo test -p stencil-tests
//! --test snapshots` and read the diff) before committing the `.snap` files.

use stencil_codegen::analysis::{field_accesses, flops_per_point, min_bytes_per_point};
use stencil_codegen::StencilIr;

/// ASUCA's Diffusion3d.
const DIFFUSION: &str = r#"
fn diffusion3d(
    idx: Idx3,
    ce: f32,
    cw: f32,
    cn: f32,
    cs: f32,
    ct: f32,
    cb: f32,
    cc: f32,
    f: &Field3<f32>,
    f_new: &mut Field3<f32>,
) {
    f_new[idx] = cc * f[idx]
        + ce * f[idx.ix::<1, 0, 0>()]
        + cw * f[idx.ix::<-1, 0, 0>()]
        + cn * f[idx.ix::<0, 1, 0>()]
        + cs * f[idx.ix::<0, -1, 0>()]
        + ct * f[idx.ix::<0, 0, 1>()]
        + cb * f[idx.ix::<0, 0, -1>()];
}
"#;

/// Two outputs, an if / else-if / else statement assigning `let mut` locals, sqrt and max, a
/// select and a hoisted `if` value.
const BRANCHY: &str = r#"
fn two_outputs(idx: Idx2, thr: f32, a: &Field2<f32>, b: &Field2<f32>, mag: &mut Field2<f32>, flag: &mut Field2<f32>) {
    let gx = a[idx.ix::<1, 0>()] - a[idx.ix::<-1, 0>()];
    let gy = b[idx.ix::<0, 1>()] - b[idx.ix::<0, -1>()];
    let m = (gx * gx + gy * gy).sqrt();
    let mut s = 0.0;
    let mut hits = 0;
    if m > thr {
        s = m.max(a[idx]);
        hits += 1;
    } else if gx < 0.0 {
        s = -m;
    } else {
        s = gx.max(gy) * 0.5;
        hits = 2;
    }
    let w = if hits > 0 { s * 2.0 } else { s };
    let v = if s > 0.0 {
        let t = s.sqrt();
        t + 1.0
    } else {
        0.0
    };
    mag[idx] = w + v;
    flag[idx] = hits as f32;
}
"#;

/// The radius-4, 25-point star of an 8th-order wave equation step.
const STAR25: &str = r#"
fn star25(idx: Idx3, c: f32, u: &Field3<f32>, u_prev: &Field3<f32>, v2: &Field3<f32>, u_next: &mut Field3<f32>) {
    let lap = -8.541666 * u[idx]
        + 1.6 * (u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()]
            + u[idx.ix::<0, -1, 0>()] + u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()])
        - 0.2 * (u[idx.ix::<2, 0, 0>()] + u[idx.ix::<-2, 0, 0>()] + u[idx.ix::<0, 2, 0>()]
            + u[idx.ix::<0, -2, 0>()] + u[idx.ix::<0, 0, 2>()] + u[idx.ix::<0, 0, -2>()])
        + 0.025396825 * (u[idx.ix::<3, 0, 0>()] + u[idx.ix::<-3, 0, 0>()] + u[idx.ix::<0, 3, 0>()]
            + u[idx.ix::<0, -3, 0>()] + u[idx.ix::<0, 0, 3>()] + u[idx.ix::<0, 0, -3>()])
        - 0.0017857143 * (u[idx.ix::<4, 0, 0>()] + u[idx.ix::<-4, 0, 0>()] + u[idx.ix::<0, 4, 0>()]
            + u[idx.ix::<0, -4, 0>()] + u[idx.ix::<0, 0, 4>()] + u[idx.ix::<0, 0, -4>()]);
    u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
}
"#;

/// A CFL-type reduction next to a written field: a max and an f64 sum of an f32 field, one fold
/// under a branch.
const REDUCE: &str = r#"
fn speed_stats(idx: Idx2, g: f32, h: &Field2<f32>, u: &Field2<f32>, c: &mut Field2<f32>, fastest: &mut Max<f32>, mass: &mut Sum<f64>) {
    let s = u[idx].abs() + (g * h[idx]).sqrt();
    c[idx] = s;
    fastest.fold(s);
    if h[idx] > 0.0 {
        mass.fold(h[idx] as f64);
    }
}
"#;

/// A column sweep: a carried local, the level, and a written field read one level below.
const SWEEP: &str = r#"
fn settle(idx: Idx3, w: f64, q: &Field3<f64>, flux: &mut Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut falling = 0.0;
    let below = if idx.level() == 0 { 0.0 } else { flux[idx.ix(0, 0, -1)] };
    falling = 0.5 * falling + w * q[idx];
    flux[idx] = falling;
    out[idx] = q[idx] + below - falling;
}
"#;

fn lower(src: &str) -> StencilIr {
    StencilIr::from_source(src).unwrap_or_else(|e| panic!("lowering failed: {e}"))
}

/// The analyses in a few readable lines.
fn analyses(ir: &StencilIr) -> String {
    let mut s = String::new();
    for fa in field_accesses(ir) {
        s += &format!(
            "{} ({}{}): written {}, lo {:?}, hi {:?}, offsets {:?}\n",
            fa.name,
            if fa.writable { "&mut " } else { "&" },
            fa.elem,
            fa.written,
            fa.lo,
            fa.hi,
            fa.offsets
        );
    }
    s += &format!("flops per point: {}\n", flops_per_point(ir));
    s += &format!("min bytes per point: {}\n", min_bytes_per_point(ir));
    s
}

#[test]
fn ir_of_diffusion() {
    insta::assert_snapshot!("ir_diffusion", format!("{:#?}", lower(DIFFUSION)));
}

#[test]
fn ir_of_branchy() {
    insta::assert_snapshot!("ir_branchy", format!("{:#?}", lower(BRANCHY)));
}

#[test]
fn expansion_of_diffusion() {
    let item: proc_macro2::TokenStream = DIFFUSION.parse().expect("tokens");
    let tokens =
        stencil_codegen::expand(proc_macro2::TokenStream::new(), item, "::stencil_runtime".parse().expect("a path"))
            .expect("expands");
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!("expansion_diffusion", prettyplease::unparse(&file));
}

#[test]
fn ir_and_expansion_of_a_reduction() {
    let ir = lower(REDUCE);
    assert_eq!(StencilIr::decode(&ir.encode()), Ok(ir.clone()), "the encoded form reads back");
    insta::assert_snapshot!("ir_reduce", ir.encode());
    let item: proc_macro2::TokenStream = REDUCE.parse().expect("tokens");
    let tokens =
        stencil_codegen::expand(proc_macro2::TokenStream::new(), item, "::stencil_runtime".parse().expect("a path"))
            .expect("expands");
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!("expansion_reduce", prettyplease::unparse(&file));
}

#[test]
fn ir_and_expansion_of_a_sweep() {
    let attr: proc_macro2::TokenStream = "sweep = forward".parse().expect("tokens");
    let item: proc_macro2::TokenStream = SWEEP.parse().expect("tokens");
    let tokens = stencil_codegen::expand(attr, item, "::stencil_runtime".parse().expect("a path")).expect("expands");
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    let expansion = prettyplease::unparse(&file);
    let encoded = expansion.split("const IR: &'static str = \"").nth(1).and_then(|s| s.split('"').next());
    let ir = StencilIr::decode(&encoded.expect("the IR constant").replace("\\n", "\n")).expect("the IR decodes");
    assert!(ir.sweep.is_some() && ir.reads_written_at([0, 0, -1]) && !ir.reads_written_at([0, 0, 1]));
    insta::assert_snapshot!("ir_sweep", ir.encode());
    insta::assert_snapshot!("expansion_sweep", expansion);
}

#[test]
fn analyses_of_diffusion() {
    let ir = lower(DIFFUSION);
    // 7 multiplications and 6 additions; one f32 read and one f32 write per point.
    assert_eq!(flops_per_point(&ir), 13);
    assert_eq!(min_bytes_per_point(&ir), 8);
    insta::assert_snapshot!("analyses_diffusion", analyses(&ir));
}

#[test]
fn analyses_of_star25() {
    let ir = lower(STAR25);
    // u, u_prev and v2 read once each, u_next written: 4 x 4 bytes.
    assert_eq!(min_bytes_per_point(&ir), 16);
    let u = field_accesses(&ir).into_iter().find(|f| f.name == "u").expect("u");
    assert_eq!((u.offsets.len(), u.lo, u.hi), (25, [-4; 3], [4; 3]));
    insta::assert_snapshot!("analyses_star25", analyses(&ir));
}

#[test]
fn analyses_of_branchy() {
    insta::assert_snapshot!("analyses_branchy", analyses(&lower(BRANCHY)));
}
