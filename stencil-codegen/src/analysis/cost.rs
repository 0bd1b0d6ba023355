//! Work and traffic per point: the two numbers a roofline needs.

use super::access::{field_accesses, FieldAccess};
use crate::ir::{BinOp, Expr, ExprKind, StencilIr, Stmt};

/// Floating-point operations per point: float `+ - * /`, negations excluded, math calls by
/// [`crate::ir::MathFn::flops`], a float fold as one. Of two branches the larger counts (the work of
/// the worse path).
pub fn flops_per_point(ir: &StencilIr) -> usize {
    stmts_flops(&ir.body)
}

/// Fewest bytes a point must move through memory: each field read once, each written field
/// written once (a field both read and written counts both).
pub fn min_bytes_per_point(ir: &StencilIr) -> usize {
    min_bytes(&field_accesses(ir))
}

/// [`min_bytes_per_point`] from the field accesses.
pub(super) fn min_bytes(fields: &[FieldAccess]) -> usize {
    fields.iter().map(|f| (f.is_read() as usize + f.written as usize) * f.elem.size_bytes()).sum()
}

/// Floating-point operations of `body` (as [`flops_per_point`] counts them; the values of point
/// functions it reads count nothing).
pub fn stmts_flops(body: &[Stmt]) -> usize {
    body.iter()
        .map(|s| match s {
            Stmt::Let { init, .. } => init.as_ref().map_or(0, expr_flops),
            Stmt::Assign { value, .. } | Stmt::Store { value, .. } => expr_flops(value),
            Stmt::Fold { value, .. } => 1 + expr_flops(value),
            Stmt::If { cond, then_body, else_body } => {
                expr_flops(cond) + stmts_flops(then_body).max(stmts_flops(else_body))
            }
        })
        .sum()
}

fn expr_flops(e: &Expr) -> usize {
    match &e.kind {
        ExprKind::Lit(_)
        | ExprKind::Local(_)
        | ExprKind::Scalar(_)
        | ExprKind::Load { .. }
        | ExprKind::Level
        | ExprKind::Levels => 0,
        // Counted where the analysis runs on the inlined IR (as the functor's facts do).
        ExprKind::PointValue { .. } => 0,
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => expr_flops(a),
        ExprKind::Binary(op, a, b) => {
            let own = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div) && e.ty.is_float();
            own as usize + expr_flops(a) + expr_flops(b)
        }
        ExprKind::Call(f, args) => f.flops() + args.iter().map(expr_flops).sum::<usize>(),
        ExprKind::Select(c, a, b) => expr_flops(c) + expr_flops(a).max(expr_flops(b)),
    }
}
