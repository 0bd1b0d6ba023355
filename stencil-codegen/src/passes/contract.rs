//! `#[stencil(fma)]`: a product added or subtracted in the same expression becomes one fused
//! multiply-add, `a * b + c` → `a.mul_add(b, c)` (one rounding instead of two).
//!
//! A fused multiply-add is correctly rounded on every backend (an FMA instruction of the CPU,
//! `fma` in CUDA; without FMA instructions Rust's `mul_add` computes it exactly in software), so
//! the contracted stencil still gives the same bits on the CPU nest and every CUDA strategy: the
//! pass fixes which operations fuse, not the compiler. C compilers contract on their own
//! (`-ffp-contract=fast`, GCC's default for GNU C, and `-ffast-math`), each where it likes.
//!
//! The rule, at every sum and difference:
//! - `x + y * z` → `y.mul_add(z, x)`; else `y * z + x` → `y.mul_add(z, x)` (the right operand's
//!   product first, so a sum written left to right, `a*u + b*v + c*w`, becomes a chain of
//!   `mul_add`s on the first product);
//! - `x - y * z` → `(-y).mul_add(z, x)`; else `y * z - x` → `y.mul_add(z, -x)` (negation is exact);
//! - only within an expression: a product bound to a `let` and added later is not fused;
//!   integers are left alone.

use crate::ir::{BinOp, Expr, ExprKind, Literal, MathFn, StencilIr, UnOp};

/// `ir` with every product added in its expressions fused into a `mul_add` (the point functions'
/// bodies too).
pub fn contract(ir: &StencilIr) -> StencilIr {
    let mut out = ir.clone();
    crate::ir::visit_exprs_mut(&mut out.body, &mut contract_expr);
    for p in &mut out.point_fns {
        crate::ir::visit_exprs_mut(&mut p.body, &mut contract_expr);
    }
    out
}

/// Fuses `e` itself; the visit then goes on into the fused call's operands. (Fusing a sum never
/// makes or unmakes a product, so the order of the visit does not change the result.)
fn contract_expr(e: &mut Expr) {
    if !e.ty.is_float() {
        return;
    }
    let ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) = &mut e.kind else { return };
    let (op, ty) = (*op, e.ty);
    let take = |x: &mut Expr| std::mem::replace(x, Expr { ty, kind: ExprKind::Lit(Literal::Float(0.0, 0.0)) });
    let fused = if is_product(b) {
        let (y, z) = factors(take(b));
        let y = if op == BinOp::Sub { negated(y) } else { y };
        vec![y, z, take(a)]
    } else if is_product(a) {
        let (y, z) = factors(take(a));
        let x = if op == BinOp::Sub { negated(take(b)) } else { take(b) };
        vec![y, z, x]
    } else {
        return;
    };
    e.kind = ExprKind::Call(MathFn::MulAdd, fused);
}

fn is_product(e: &Expr) -> bool {
    e.ty.is_float() && matches!(e.kind, ExprKind::Binary(BinOp::Mul, _, _))
}

fn factors(e: Expr) -> (Expr, Expr) {
    match e.kind {
        ExprKind::Binary(BinOp::Mul, y, z) => (*y, *z),
        _ => unreachable!("a product"),
    }
}

fn negated(e: Expr) -> Expr {
    Expr { ty: e.ty, kind: ExprKind::Unary(UnOp::Neg, Box::new(e)) }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;

    fn lower(body: &str) -> StencilIr {
        let source = format!(
            "fn f(idx: Idx1, a: f64, b: f64, c: f64, d: f64, n: i32, u: &Field1<f64>, out: &mut Field1<f64>, \
             k: &mut Field1<i32>) {{ {body} }}"
        );
        StencilIr::from_source(&source).unwrap_or_else(|e| panic!("{}", e.kind))
    }

    /// `contract` of `written` has the IR of `fused` (written with `mul_add` by hand).
    fn fuses(written: &str, fused: &str) {
        let (got, want) = (contract(&lower(written)), lower(fused));
        assert_eq!(got.body, want.body, "\n{written}\nshould fuse as\n{fused}");
    }

    #[test]
    fn products_added_in_an_expression_fuse() {
        fuses("out[idx] = a * u[idx] + b;", "out[idx] = a.mul_add(u[idx], b);");
        fuses("out[idx] = b + a * u[idx];", "out[idx] = a.mul_add(u[idx], b);");
        fuses("out[idx] = b - a * u[idx];", "out[idx] = (-a).mul_add(u[idx], b);");
        fuses("out[idx] = a * u[idx] - b;", "out[idx] = a.mul_add(u[idx], -b);");
        // A sum of products written left to right: a chain on the first product.
        fuses(
            "out[idx] = a * u[idx] + b * u[idx.ix::<1>()] + c * u[idx.ix::<-1>()];",
            "out[idx] = c.mul_add(u[idx.ix::<-1>()], b.mul_add(u[idx.ix::<1>()], a * u[idx]));",
        );
        // Inside calls, branches and products; a product of products fuses its inner sums only.
        fuses(
            "let t = (a * b + c).sqrt(); out[idx] = if t > d { t * (c * d + a) } else { a };",
            "let t = a.mul_add(b, c).sqrt(); out[idx] = if t > d { t * c.mul_add(d, a) } else { a };",
        );
        fuses("out[idx] = (a * b + c) * d + u[idx];", "out[idx] = a.mul_add(b, c).mul_add(d, u[idx]);");
    }

    #[test]
    fn what_does_not_fuse_stays() {
        for body in [
            "let p = a * b; out[idx] = p + c;",
            "out[idx] = a / b + c;",
            "out[idx] = (a + b) * c;",
            "k[idx] = n * 2 + 1; out[idx] = a;",
            "out[idx] = a.mul_add(b, c) + d;",
        ] {
            let ir = lower(body);
            assert_eq!(contract(&ir).body, ir.body, "{body}");
        }
    }
}
