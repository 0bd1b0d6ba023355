//! `#[stencil(portable_math)]`: `exp`, `exp2`, `ln`, `log2`, `log10` and `powf` computed by the
//! stencil's own arithmetic instead of each backend's math library, so the CPU nest and every
//! CUDA strategy give the same bits.
//!
//! Each call becomes locals computed before the statement that holds it, from operations that are
//! exact or correctly rounded on every backend (`+ - * /`, comparisons, selects, `floor`,
//! `round`, conversions of small integers and `powi` of 2, which repeated squaring computes
//! exactly), with no contraction into fused multiply-adds (the printers keep none). `f32` values
//! are computed in `f64` and rounded once at the end.
//!
//! - `exp(x)`: `k = round(x / ln 2)`, `r = x − k ln 2` (ln 2 in two parts, so `k · hi` is exact),
//!   a degree-13 Taylor polynomial of `e^r` on `|r| ≤ ln 2 / 2`, times `2^k` as two exact powers
//!   (no overflow on the way). `exp2` the same with `k = round(x)`.
//! - `ln(x)`: `x = m 2^e` with `m` in `[√½, √2)`; the estimate of `e` from the backend's `log2`
//!   only starts the search, exact halvings and doublings settle it, so the result does not
//!   depend on the estimate. Then `ln m = 2 atanh s`, `s = (m − 1)/(m + 1)`, `|s| ≤ 0.172`, as a
//!   series of 12 terms, plus `e ln 2`. `log2` and `log10` scale it.
//! - `powf(x, y) = ±exp(y ln |x|)` with the special cases of Rust's `powf` (`y = 0` or `x = 1`
//!   gives 1, a negative `x` needs an integer `y`). Its relative error grows with `|y ln x|`
//!   (about `|y ln x| · 2⁻⁵²`), as in any `pow` built this way.
//!
//! Accuracy: within a few units in the last place of the correctly rounded result for `exp`,
//! `ln` and their scaled forms (the tests measure it against the platform's library). NaN
//! results are NaN everywhere; their payload bits may differ between backends.

use crate::ir::{BinOp, Expr, ExprKind, Literal, Local, LocalId, MathFn, ScalarType, StencilIr, Stmt, UnOp};

/// Functions whose results already agree bit for bit between the CPU nest and CUDA: exact or
/// correctly rounded, or computed by the same steps on both (`powi`).
const EXACT: [MathFn; 14] = {
    use MathFn::*;
    [Sqrt, Abs, Min, Max, Clamp, Powi, Floor, Ceil, Round, Trunc, Copysign, MulAdd, Signum, Recip]
};

/// Functions this pass computes itself.
pub const PORTABLE: [MathFn; 6] = [MathFn::Exp, MathFn::Exp2, MathFn::Ln, MathFn::Log2, MathFn::Log10, MathFn::Powf];

/// `ln 2` in two parts: `LN2_HI` has 20 significant bits, so `k · LN2_HI` is exact for every
/// `|k| < 2³³`; `LN2_LO` is the rest, rounded.
const LN2_HI: f64 = 0.693_146_705_627_441_4;
const LN2_LO: f64 = 4.749_325_039_031_672_6e-7;
const INV_LN2: f64 = std::f64::consts::LOG2_E;
const INV_LN10: f64 = std::f64::consts::LOG10_E;

/// `ir` with every call of a [`PORTABLE`] function computed by its own arithmetic (the point
/// functions' bodies too); `Err` names the first function that is neither portable nor exact
/// on every backend (`sin`, `cbrt`, ...).
pub fn portable_math(ir: &StencilIr) -> Result<StencilIr, MathFn> {
    let mut unsupported = None;
    let mut check = |body: &[Stmt]| {
        crate::ir::visit_exprs(body, &mut |e| {
            if let ExprKind::Call(f, _) = e.kind {
                if !EXACT.contains(&f) && !PORTABLE.contains(&f) && unsupported.is_none() {
                    unsupported = Some(f);
                }
            }
        })
    };
    check(&ir.body);
    ir.point_fns.iter().for_each(|p| check(&p.body));
    if let Some(s) = &ir.sweep {
        check(&s.carried);
    }
    if let Some(f) = unsupported {
        return Err(f);
    }
    let mut out = ir.clone();
    let mut r = Rewriter { locals: std::mem::take(&mut out.locals) };
    out.body = r.stmts(&ir.body);
    for p in &mut out.point_fns {
        p.body = r.stmts(&p.body);
    }
    if let Some(s) = &mut out.sweep {
        s.carried = r.stmts(&s.carried);
    }
    out.locals = r.locals;
    Ok(out)
}

struct Rewriter {
    locals: Vec<Local>,
}

/// Statements being emitted before the one that needs them.
struct Emit<'a> {
    locals: &'a mut Vec<Local>,
    out: &'a mut Vec<Stmt>,
}

impl Rewriter {
    fn stmts(&mut self, body: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        for stmt in body {
            let stmt = match stmt {
                Stmt::Let { local, init } => {
                    Stmt::Let { local: *local, init: init.as_ref().map(|e| self.expr(e, &mut out)) }
                }
                Stmt::Assign { local, value } => Stmt::Assign { local: *local, value: self.expr(value, &mut out) },
                Stmt::Store { field, value } => Stmt::Store { field: *field, value: self.expr(value, &mut out) },
                Stmt::Fold { reduction, value } => {
                    Stmt::Fold { reduction: *reduction, value: self.expr(value, &mut out) }
                }
                Stmt::If { cond, then_body, else_body } => Stmt::If {
                    cond: self.expr(cond, &mut out),
                    then_body: self.stmts(then_body),
                    else_body: self.stmts(else_body),
                },
            };
            out.push(stmt);
        }
        out
    }

    /// `e` with its portable calls replaced by locals that statements pushed to `out` compute.
    fn expr(&mut self, e: &Expr, out: &mut Vec<Stmt>) -> Expr {
        let mut map = |x: &Expr| self.expr(x, out);
        let kind = match &e.kind {
            ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(map(a))),
            ExprKind::Cast(a) => ExprKind::Cast(Box::new(map(a))),
            ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, Box::new(map(a)), Box::new(map(b))),
            ExprKind::Select(c, a, b) => ExprKind::Select(Box::new(map(c)), Box::new(map(a)), Box::new(map(b))),
            ExprKind::Call(f, args) => {
                let args: Vec<Expr> = args.iter().map(map).collect();
                if PORTABLE.contains(f) {
                    let mut em = Emit { locals: &mut self.locals, out };
                    return em.call(*f, e.ty, &args);
                }
                ExprKind::Call(*f, args)
            }
            other => other.clone(),
        };
        Expr { ty: e.ty, kind }
    }
}

fn lit(v: f64) -> Expr {
    Expr { ty: ScalarType::F64, kind: ExprKind::Lit(Literal::Float(v, v as f32)) }
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    let ty = if op.is_comparison() || matches!(op, BinOp::And | BinOp::Or) { ScalarType::Bool } else { a.ty };
    Expr { ty, kind: ExprKind::Binary(op, Box::new(a), Box::new(b)) }
}

fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}

fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}

fn div(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Div, a, b)
}

fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr { ty: a.ty, kind: ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)) }
}

fn call(f: MathFn, args: Vec<Expr>) -> Expr {
    Expr { ty: args[0].ty, kind: ExprKind::Call(f, args) }
}

fn cast(to: ScalarType, a: Expr) -> Expr {
    if a.ty == to {
        return a;
    }
    Expr { ty: to, kind: ExprKind::Cast(Box::new(a)) }
}

/// `2^k` for a whole `f64` `k` with `|k| ≤ 1023`: exact.
fn two_to(k: Expr) -> Expr {
    call(MathFn::Powi, vec![lit(2.0), cast(ScalarType::I32, k)])
}

fn neg(a: Expr) -> Expr {
    Expr { ty: a.ty, kind: ExprKind::Unary(UnOp::Neg, Box::new(a)) }
}

fn inf() -> Expr {
    lit(f64::INFINITY)
}

/// A quiet NaN (`0 · ∞`).
fn nan() -> Expr {
    mul(lit(0.0), inf())
}

/// Whether `x` is NaN.
fn is_nan(x: &Expr) -> Expr {
    bin(BinOp::Ne, x.clone(), x.clone())
}

impl Emit<'_> {
    /// A new local holding `e`, as an expression.
    fn bind(&mut self, e: Expr) -> Expr {
        let id: LocalId = self.locals.len();
        // A name no local of the stencil has (a user's `portable_3` keeps its own).
        let mut name = format!("portable_{id}");
        while self.locals.iter().any(|l| l.name == name) {
            name.push('_');
        }
        self.locals.push(Local { name, ty: e.ty });
        let ty = e.ty;
        self.out.push(Stmt::Let { local: id, init: Some(e) });
        Expr { ty, kind: ExprKind::Local(id) }
    }

    /// `f(args)` of type `ty`, as a local.
    fn call(&mut self, f: MathFn, ty: ScalarType, args: &[Expr]) -> Expr {
        let args: Vec<Expr> = args.iter().map(|a| cast(ScalarType::F64, a.clone())).collect();
        let x = self.bind(args[0].clone());
        let value = match f {
            MathFn::Exp => self.exp(x, false),
            MathFn::Exp2 => self.exp(x, true),
            MathFn::Ln => self.ln(x),
            MathFn::Log2 => {
                let l = self.ln(x);
                mul(l, lit(INV_LN2))
            }
            MathFn::Log10 => {
                let l = self.ln(x);
                mul(l, lit(INV_LN10))
            }
            MathFn::Powf => {
                let y = self.bind(args[1].clone());
                self.pow(x, y)
            }
            _ => unreachable!("only the portable functions are rewritten"),
        };
        let value = self.bind(value);
        self.bind(cast(ty, value))
    }

    /// `e^x` (or `2^x` when `base2`).
    fn exp(&mut self, x: Expr, base2: bool) -> Expr {
        // NaN → 0 so the conversions below see a number; clamped where the result is already
        // 0 or ∞, so `k` stays within the exponents of f64.
        let (lo, hi) = if base2 { (-1080.0, 1030.0) } else { (-750.0, 712.0) };
        let safe = select(is_nan(&x), lit(0.0), x.clone());
        let clamped = self.bind(call(MathFn::Min, vec![call(MathFn::Max, vec![safe, lit(lo)]), lit(hi)]));
        let scaled = if base2 { clamped.clone() } else { mul(clamped.clone(), lit(INV_LN2)) };
        let k = self.bind(call(MathFn::Round, vec![scaled]));
        let r = if base2 {
            self.bind(mul(sub(clamped, k.clone()), lit(std::f64::consts::LN_2)))
        } else {
            self.bind(sub(sub(clamped, mul(k.clone(), lit(LN2_HI))), mul(k.clone(), lit(LN2_LO))))
        };
        // e^r = Σ r^n / n!, n ≤ 13, by Horner.
        let mut factorial = [1.0f64; 14];
        for n in 1..14 {
            factorial[n] = factorial[n - 1] * n as f64;
        }
        let mut p = lit(1.0 / factorial[13]);
        for n in (0..13).rev() {
            p = add(mul(p, r.clone()), lit(1.0 / factorial[n]));
        }
        let p = self.bind(p);
        // 2^k as two halves, each a normal power of two.
        let k1 = self.bind(call(MathFn::Floor, vec![mul(k.clone(), lit(0.5))]));
        let k2 = sub(k, k1.clone());
        let value = mul(mul(p, two_to(k1)), two_to(k2));
        select(is_nan(&x), x, value)
    }

    /// `ln x`.
    fn ln(&mut self, x: Expr) -> Expr {
        use BinOp::{And, Ge, Gt, Lt};
        let usable = bin(And, bin(Gt, x.clone(), lit(0.0)), bin(Lt, x.clone(), inf()));
        let v = self.bind(select(usable, x.clone(), lit(1.0)));
        // Subnormals scaled into the normal range first.
        let tiny = self.bind(bin(Lt, v.clone(), lit(f64::MIN_POSITIVE)));
        let v = self.bind(select(tiny.clone(), mul(v.clone(), lit(2f64.powi(54))), v));
        // e: the backend's estimate, clamped, then settled by exact halvings and doublings.
        let estimate = call(MathFn::Floor, vec![call(MathFn::Log2, vec![v.clone()])]);
        let e0 = self.bind(call(MathFn::Min, vec![call(MathFn::Max, vec![estimate, lit(-1022.0)]), lit(1023.0)]));
        let m0 = self.bind(mul(v, two_to(neg(e0.clone()))));
        let high = self.bind(bin(Ge, m0.clone(), lit(2.0)));
        let low = self.bind(bin(Lt, m0.clone(), lit(1.0)));
        let m1 = self.bind(select(
            high.clone(),
            mul(m0.clone(), lit(0.5)),
            select(low.clone(), mul(m0.clone(), lit(2.0)), m0),
        ));
        let e1 = add(e0, select(high, lit(1.0), select(low, lit(-1.0), lit(0.0))));
        // m in [√½, √2).
        let big = self.bind(bin(Gt, m1.clone(), lit(std::f64::consts::SQRT_2)));
        let m = self.bind(select(big.clone(), mul(m1.clone(), lit(0.5)), m1));
        let e = self.bind(sub(add(e1, select(big, lit(1.0), lit(0.0))), select(tiny, lit(54.0), lit(0.0))));
        // ln m = 2 atanh s = 2 s Σ s^2j / (2j + 1), j ≤ 11.
        let s = self.bind(div(sub(m.clone(), lit(1.0)), add(m, lit(1.0))));
        let s2 = self.bind(mul(s.clone(), s.clone()));
        let mut p = lit(1.0 / 23.0);
        for j in (0..11).rev() {
            p = add(mul(p, s2.clone()), lit(1.0 / (2 * j + 1) as f64));
        }
        let ln_m = mul(add(s.clone(), s), p);
        let value = add(mul(e.clone(), lit(LN2_HI)), add(mul(e, lit(LN2_LO)), ln_m));
        let special = |cond, v, rest| select(cond, v, rest);
        special(
            is_nan(&x),
            x.clone(),
            special(
                bin(Lt, x.clone(), lit(0.0)),
                nan(),
                special(
                    bin(BinOp::Eq, x.clone(), lit(0.0)),
                    neg(inf()),
                    special(bin(BinOp::Eq, x, inf()), inf(), value),
                ),
            ),
        )
    }

    /// `x^y`.
    fn pow(&mut self, x: Expr, y: Expr) -> Expr {
        use BinOp::{And, Eq, Ne, Or};
        let ax = self.bind(call(MathFn::Abs, vec![x.clone()]));
        let l = self.ln(ax.clone());
        let l = self.bind(l);
        let t = self.bind(mul(y.clone(), l));
        let r = self.exp(t, false);
        let r = self.bind(r);
        let whole = self.bind(bin(Eq, call(MathFn::Floor, vec![y.clone()]), y.clone()));
        let half = self.bind(mul(y.clone(), lit(0.5)));
        let odd = bin(And, whole.clone(), bin(Ne, call(MathFn::Floor, vec![half.clone()]), half));
        // The sign bit of x (so that -0 counts as negative, as in Rust's powf).
        let negative = bin(BinOp::Lt, call(MathFn::Copysign, vec![lit(1.0), x.clone()]), lit(0.0));
        let signed = select(bin(And, negative, odd), neg(r.clone()), r);
        let fractional = Expr { ty: ScalarType::Bool, kind: ExprKind::Unary(UnOp::Not, Box::new(whole)) };
        // A finite negative x to a fractional power has no real value (-∞ does: ∞ or 0).
        let finite_negative = bin(And, bin(BinOp::Lt, x.clone(), lit(0.0)), bin(BinOp::Gt, x.clone(), neg(inf())));
        let value = select(bin(And, finite_negative, fractional), nan(), signed);
        // x^0 = 1 and 1^y = 1 (also for NaN), and (-1)^±∞ = 1.
        let one = bin(
            Or,
            bin(Or, bin(Eq, y.clone(), lit(0.0)), bin(Eq, x.clone(), lit(1.0))),
            bin(And, bin(Eq, ax, lit(1.0)), bin(Eq, call(MathFn::Abs, vec![y]), inf())),
        );
        select(one, lit(1.0), value)
    }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;

    fn lower(source: &str) -> StencilIr {
        StencilIr::from_source(source).unwrap_or_else(|e| panic!("{}", e.kind))
    }

    #[test]
    fn portable_calls_become_locals_and_others_are_refused() {
        let ir = lower(
            "fn f(idx: Idx1, k: f64, u: &Field1<f64>, out: &mut Field1<f64>) { out[idx] = (k * u[idx]).exp() + u[idx].powf(k).sqrt(); }",
        );
        let out = portable_math(&ir).expect("portable");
        let mut calls = Vec::new();
        crate::ir::visit_exprs(&out.body, &mut |e| {
            if let ExprKind::Call(f, _) = e.kind {
                calls.push(f);
            }
        });
        assert!(!calls.iter().any(|f| PORTABLE.contains(f) && *f != MathFn::Log2), "left: {calls:?}");
        // The backend's log2 only estimates the exponent of `ln` (inside `powf`); sqrt stays.
        assert!(calls.contains(&MathFn::Sqrt) && calls.contains(&MathFn::Log2));
        assert!(matches!(out.body.last(), Some(Stmt::Store { .. })));
        // A user's local with the name the pass would give keeps it; the pass's takes another.
        let taken = lower(
            "fn f(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) { let portable_1 = u[idx]; out[idx] = portable_1.exp(); }",
        );
        let out = portable_math(&taken).expect("portable");
        let names: Vec<&str> = out.locals.iter().map(|l| l.name.as_str()).collect();
        let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let sin = lower(
            "fn f(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) { out[idx] = u[idx].exp() * u[idx].sin(); }",
        );
        assert_eq!(portable_math(&sin), Err(MathFn::Sin));
    }
}
