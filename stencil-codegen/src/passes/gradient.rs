//! The derivative of a stencil's update with respect to parameter fields, transposed, as another
//! stencil in gather form: the gradient (imaging condition) of one time step.
//!
//! The forward stencil, run over a range `R`, computes for every written field `w` and point `x`
//! of `R` a value `w[x] = F_w(x; p, s)` of the parameter fields `P` (the requested ones, say a
//! velocity `c`) and of the other inputs `s` (the state `u`, `u_prev`, scalars). Its derivative
//! with respect to `p[x + o]`, evaluated at the forward state, is a coefficient
//! `d_{w,p,o}(x) = ∂F_w(x)/∂p[x + o]`; the gradient stencil accumulates the transpose:
//!
//! ```text
//! p̄[q] += Σ_w Σ_o [q − o ∈ R] · d_{w,p,o}(q − o) · w̄[q − o]
//! ```
//!
//! For a parameter read only at offset 0 this is the point-wise imaging condition
//! `p̄[x] += Σ_w w̄[x] · ∂w[x]/∂p[x]`; summed over the time steps of a reverse run it is the
//! gradient of a misfit with respect to `p`. Reads of `p` at other offsets (face-averaged
//! coefficients) gather from the neighbours as the adjoint does ([`super::adjoint()`]).
//!
//! **Derivatives.** Unlike the adjoint, the update need not be linear in `P`: the derivative is
//! taken point-wise at the forward state by the sum, product, quotient and chain rules, for
//! `+ - * /`, negation, `mul_add`, `sqrt`, `recip`, `powi`, `powf` with a fixed exponent,
//! `exp`, `ln`, `sin`, `cos`, `tanh`, `abs`, `min` and `max` (the last three: the derivative of
//! the branch taken, as for `if`/`else` and conditions on `P`, which pass through with the
//! branch the forward state takes). Another function of a term that depends on `P` is an
//! [`AdjointError`] naming it ([`AdjointErrorKind::NoDerivative`]), as is a conversion of one to
//! another type, or a derivative that reads the old value of a written field (whose place the
//! gradient gives to its cotangent).
//!
//! **Parameters.** The forward's parameters in the same places, with each written field `out`
//! replaced by its cotangent `out_bar: &` (read); scalars and read fields (the parameters
//! themselves and the state, at the forward step's values) unchanged. Then, appended in the
//! order of `gradient(..)`, `p_bar: &mut` for each parameter field (**accumulated into**), and
//! last `range_mask` as for the adjoint. A name the forward already uses gets `_` appended.

use super::adjoint::{
    add, load, mul, neg, one, render, select, shift, zero, Adjoint, AdjointError, AdjointErrorKind, AdjointRole, Site,
    BAR_SUFFIX, MASK_NAME,
};
use super::symbolic::{State, StateMut, Symbolic, Term};
use crate::ir::{
    BinOp, Expr, ExprKind, FieldParam, Literal, MathFn, Param, ParamId, ParamKind, ScalarType, StencilIr, Stmt, UnOp,
};

/// The suffix of the gradient's name (`wave` → `wave_gradient`, functor `WaveGradient`).
pub const GRADIENT_SUFFIX: &str = "_gradient";

/// A value at the forward point and its partial derivatives with respect to the parameter
/// fields (none: it does not depend on them).
#[derive(Clone, Debug, PartialEq)]
struct Dual {
    v: Expr,
    d: Vec<Term>,
}

impl Dual {
    fn fixed(v: Expr) -> Dual {
        Dual { v, d: Vec::new() }
    }
}

fn scale(d: Vec<Term>, by: &Expr) -> Vec<Term> {
    d.into_iter().map(|t| Term { coef: mul(t.coef, by.clone()), ..t }).collect()
}

fn binary(op: BinOp, a: Expr, b: Expr) -> Expr {
    let ty = if op.is_comparison() { ScalarType::Bool } else { a.ty };
    Expr { ty, kind: ExprKind::Binary(op, Box::new(a), Box::new(b)) }
}

fn call(ty: ScalarType, f: MathFn, args: Vec<Expr>) -> Expr {
    Expr { ty, kind: ExprKind::Call(f, args) }
}

fn lit(ty: ScalarType, v: f64) -> Expr {
    Expr { ty, kind: ExprKind::Lit(Literal::Float(v, v as f32)) }
}

/// `if c { a } else { b }`: the value selected, and the derivative of the branch taken.
fn merge(c: &Expr, a: Dual, b: Dual) -> Dual {
    if a == b {
        return a;
    }
    let mut d: Vec<Term> =
        a.d.into_iter().map(|t| Term { coef: select(c, t.coef.clone(), zero(t.coef.ty)), ..t }).collect();
    d.extend(b.d.into_iter().map(|t| Term { coef: select(c, zero(t.coef.ty), t.coef.clone()), ..t }));
    Dual { v: select(c, a.v, b.v), d }
}

struct Eval<'a> {
    ir: &'a StencilIr,
    param: &'a [bool],
    locals: Vec<Option<Dual>>,
    stored: Vec<Option<Dual>>,
    site: Site,
}

/// The gradient stencil of `ir` with respect to the parameter fields `wrt` (parameter indices,
/// in the order of `gradient(..)`). See the module documentation for its parameters, its body
/// and how to run it.
pub fn gradient(ir: &StencilIr, wrt: &[ParamId]) -> Result<Adjoint, AdjointError> {
    let fail = |kind| Err(AdjointError { kind, site: Site::Stencil });
    if ir.sweep.is_some() {
        return fail(AdjointErrorKind::Sweep);
    }
    if let Some((r, _)) = ir.reductions().next() {
        return fail(AdjointErrorKind::Reduction { name: ir.params[r].name.clone() });
    }
    let flat = super::inline_point_fns(ir);
    let mut param = vec![false; ir.params.len()];
    for &id in wrt {
        let name = ir.params[id].name.clone();
        let reason = match ir.field(id) {
            None => Some("is not a field"),
            Some(f) if f.writable => Some("is written by the stencil"),
            Some(_) => {
                let mut read = false;
                crate::ir::visit_exprs(&flat.body, &mut |e| {
                    read |= matches!(e.kind, ExprKind::Load { field, .. } if field == id)
                });
                (!read).then_some("is never read by the stencil")
            }
        };
        if let Some(reason) = reason {
            return fail(AdjointErrorKind::GradientParam { name, reason });
        }
        param[id] = true;
    }
    let mut eval = Eval {
        ir: &flat,
        param: &param,
        locals: vec![None; flat.locals.len()],
        stored: vec![None; flat.params.len()],
        site: Site::Stencil,
    };
    eval.block(&flat.body)?;

    // The taps: (parameter field, written field, offset) → summed derivative.
    let mut taps: Vec<(ParamId, ParamId, [i32; 3], Expr)> = Vec::new();
    for w in 0..flat.params.len() {
        let Some(Dual { d, .. }) = eval.stored[w].take() else { continue };
        for t in d {
            let mut reads_output = None;
            t.coef.visit(&mut |e| {
                if let ExprKind::Load { field, .. } = e.kind {
                    if flat.field(field).is_some_and(|f| f.writable) {
                        reads_output = Some(field);
                    }
                }
            });
            if let Some(field) = reads_output {
                return Err(AdjointError {
                    kind: AdjointErrorKind::CoefficientReadsOutput { field: flat.params[field].name.clone() },
                    site: Site::Store(flat.params[w].name.clone()),
                });
            }
            match taps.iter_mut().find(|(l, v, o, _)| *l == t.field && *v == w && *o == t.offset) {
                Some(tap) => tap.3 = add(tap.3.clone(), t.coef),
                None => taps.push((t.field, w, t.offset, t.coef)),
            }
        }
    }

    // The parameters: the forward's (written fields → cotangents), the gradients, the mask.
    let taken = |name: &str, params: &[Param]| {
        flat.params.iter().any(|p| p.name == name) || params.iter().any(|p| p.name == name)
    };
    let fresh = |base: String, params: &[Param]| {
        let mut name = base;
        while taken(&name, params) {
            name.push('_');
        }
        name
    };
    let mut params: Vec<Param> = Vec::with_capacity(flat.params.len() + wrt.len() + 1);
    let mut roles = Vec::with_capacity(flat.params.len() + wrt.len() + 1);
    for p in &flat.params {
        let (param, role) = match p.kind {
            ParamKind::Scalar(_) | ParamKind::Held(_) => (p.clone(), AdjointRole::Scalar),
            ParamKind::Field(f) if f.writable => (
                Param {
                    name: fresh(format!("{}{BAR_SUFFIX}", p.name), &params),
                    kind: ParamKind::Field(FieldParam { writable: false, ..f }),
                },
                AdjointRole::Cotangent,
            ),
            ParamKind::Field(_) => (p.clone(), AdjointRole::Fixed),
            ParamKind::Reduction(_) => unreachable!("reductions are rejected above"),
        };
        params.push(param);
        roles.push(role);
    }
    let mut bar_of = vec![usize::MAX; flat.params.len()];
    for &p in wrt {
        let f = flat.field(p).expect("checked above");
        bar_of[p] = params.len();
        let name = fresh(format!("{}{BAR_SUFFIX}", flat.params[p].name), &params);
        params.push(Param { name, kind: ParamKind::Field(FieldParam { writable: true, ..f }) });
        roles.push(AdjointRole::Gradient);
    }
    let first = *wrt.first().expect("a gradient is taken with respect to at least one field");
    let mask_elem = flat.field(first).expect("checked above").elem;
    let mask = params.len();
    params.push(Param {
        name: fresh(MASK_NAME.to_string(), &params),
        kind: ParamKind::Field(FieldParam { elem: mask_elem, writable: false }),
    });
    roles.push(AdjointRole::Mask);

    // The body: one accumulating store per parameter field, in the order asked.
    let mut body = Vec::new();
    for &p in wrt {
        let ty = flat.field(p).expect("a field").elem;
        let bar = bar_of[p];
        let mut value = load(ty, bar, [0; 3]);
        for (_, w, o, coef) in taps.iter().filter(|t| t.0 == p) {
            let back = [-o[0], -o[1], -o[2]];
            let wty = flat.field(*w).expect("a field").elem;
            let product = mul(shift(coef, back), load(wty, *w, back));
            let inside = binary(BinOp::Ne, load(mask_elem, mask, back), zero(mask_elem));
            value = add(value, select(&inside, product, zero(ty)));
        }
        body.push(Stmt::Store { field: bar, value });
    }
    let ir = StencilIr {
        name: format!("{}{GRADIENT_SUFFIX}", flat.name),
        dim: flat.dim,
        index_name: flat.index_name.clone(),
        params,
        locals: Vec::new(),
        body,
        sweep: None,
        point_fns: Vec::new(),
    };
    Ok(Adjoint { ir, roles })
}

impl Symbolic for Eval<'_> {
    type Error = AdjointError;
    type V = Dual;
    const NO_FIELD: &'static str = "a parameter field";

    fn ir(&self) -> &StencilIr {
        self.ir
    }

    fn followed(&self) -> &[bool] {
        self.param
    }

    fn state(&self) -> State<'_, Dual> {
        (&self.locals, &self.stored, &self.site)
    }

    fn state_mut(&mut self) -> StateMut<'_, Dual> {
        (&mut self.locals, &mut self.stored, &mut self.site)
    }

    fn expr(&self, e: &Expr) -> Result<Dual, AdjointError> {
        Eval::expr(self, e)
    }

    /// The branch the forward state takes: its derivative.
    fn condition(&self, cond: &Expr) -> Result<Expr, AdjointError> {
        Ok(self.expr(cond)?.v)
    }

    fn fixed(e: Expr) -> Dual {
        Dual::fixed(e)
    }

    fn merge(cond: &Expr, a: Dual, b: Dual) -> Dual {
        merge(cond, a, b)
    }

    fn terms(v: &Dual) -> &[Term] {
        &v.d
    }
}

impl Eval<'_> {
    fn error(&self, e: &Expr, kind: impl FnOnce(String, String) -> AdjointErrorKind) -> AdjointError {
        AdjointError { kind: kind(render(self.ir, e), self.fields_of(e)), site: self.site.clone() }
    }

    fn expr(&self, e: &Expr) -> Result<Dual, AdjointError> {
        let ty = e.ty;
        Ok(match &e.kind {
            ExprKind::Lit(_) | ExprKind::Scalar(_) | ExprKind::Level | ExprKind::Levels => Dual::fixed(e.clone()),
            ExprKind::Local(l) => self.locals[*l].clone().expect("a local is set before it is read"),
            ExprKind::Load { field, offset } => {
                if self.param[*field] {
                    Dual { v: e.clone(), d: vec![Term { field: *field, offset: *offset, coef: one(ty) }] }
                } else if let Some(v) = self.stored[*field].as_ref().filter(|_| *offset == [0; 3]) {
                    v.clone()
                } else {
                    Dual::fixed(e.clone())
                }
            }
            ExprKind::PointValue { .. } => unreachable!("point functions are inlined before"),
            ExprKind::Unary(op, a) => {
                let a = self.expr(a)?;
                let v = Expr { ty, kind: ExprKind::Unary(*op, Box::new(a.v)) };
                match op {
                    UnOp::Neg => Dual { v, d: a.d.into_iter().map(|t| Term { coef: neg(t.coef), ..t }).collect() },
                    UnOp::Not => Dual::fixed(v),
                }
            }
            ExprKind::Cast(a) => {
                let a = self.expr(a)?;
                if !a.d.is_empty() && a.v.ty != ty {
                    return Err(self.error(e, |term, fields| AdjointErrorKind::Cast { term, fields }));
                }
                Dual { v: Expr { ty, kind: ExprKind::Cast(Box::new(a.v)) }, d: a.d }
            }
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                let v = Expr { ty, kind: ExprKind::Binary(*op, Box::new(a.v.clone()), Box::new(b.v.clone())) };
                if a.d.is_empty() && b.d.is_empty() || op.is_comparison() || matches!(op, BinOp::And | BinOp::Or) {
                    return Ok(Dual::fixed(v));
                }
                let d = match op {
                    BinOp::Add => a.d.into_iter().chain(b.d).collect(),
                    BinOp::Sub => {
                        a.d.into_iter().chain(b.d.into_iter().map(|t| Term { coef: neg(t.coef), ..t })).collect()
                    }
                    // (ab)' = a'b + ab'
                    BinOp::Mul => scale(a.d, &b.v).into_iter().chain(scale(b.d, &a.v)).collect(),
                    // (a/b)' = a'/b − (a/b)/b · b'
                    BinOp::Div => {
                        let over = a.d.into_iter().map(|t| Term { coef: binary(BinOp::Div, t.coef, b.v.clone()), ..t });
                        let q = neg(binary(BinOp::Div, v.clone(), b.v.clone()));
                        over.chain(scale(b.d, &q)).collect()
                    }
                    op => {
                        let op = op.symbol();
                        return Err(self.error(e, |term, fields| AdjointErrorKind::Operator { term, op, fields }));
                    }
                };
                Dual { v, d }
            }
            ExprKind::Call(func, args) => {
                let vals = args.iter().map(|a| self.expr(a)).collect::<Result<Vec<_>, _>>()?;
                let v = call(ty, *func, vals.iter().map(|a| a.v.clone()).collect());
                if vals.iter().all(|a| a.d.is_empty()) {
                    return Ok(Dual::fixed(v));
                }
                let no_rule = || {
                    let func = func.rust_name();
                    Err(self.error(e, |term, fields| AdjointErrorKind::NoDerivative { term, func, fields }))
                };
                let mut vals = vals.into_iter();
                let a = vals.next().expect("an argument");
                let rest: Vec<Dual> = vals.collect();
                let x = a.v.clone();
                // The derivative of a function of `a` alone: a' · f'(a).
                let chain = |factor: Expr| -> Result<Dual, AdjointError> {
                    if rest.iter().any(|r| !r.d.is_empty()) {
                        return no_rule();
                    }
                    Ok(Dual { v: v.clone(), d: scale(a.d.clone(), &factor) })
                };
                match func {
                    MathFn::MulAdd => {
                        let [b, c] = <[Dual; 2]>::try_from(rest).expect("mul_add has three arguments");
                        let mut d = scale(a.d, &b.v);
                        d.extend(scale(b.d, &x));
                        d.extend(c.d);
                        Dual { v, d }
                    }
                    MathFn::Sqrt => chain(binary(BinOp::Div, lit(ty, 0.5), v.clone()))?,
                    MathFn::Recip => chain(neg(binary(BinOp::Mul, v.clone(), v.clone())))?,
                    MathFn::Exp => chain(v.clone())?,
                    MathFn::Ln => chain(binary(BinOp::Div, lit(ty, 1.0), x))?,
                    MathFn::Sin => chain(call(ty, MathFn::Cos, vec![x]))?,
                    MathFn::Cos => chain(neg(call(ty, MathFn::Sin, vec![x])))?,
                    MathFn::Tanh => chain(binary(BinOp::Sub, lit(ty, 1.0), binary(BinOp::Mul, v.clone(), v.clone())))?,
                    MathFn::Abs => chain(call(ty, MathFn::Signum, vec![x]))?,
                    // x.powi(n)' = n · x.powi(n − 1)
                    MathFn::Powi => {
                        let n = rest[0].v.clone();
                        let n1 = Expr {
                            ty: n.ty,
                            kind: ExprKind::Binary(
                                BinOp::Sub,
                                Box::new(n.clone()),
                                Box::new(Expr { ty: n.ty, kind: ExprKind::Lit(Literal::Int(1)) }),
                            ),
                        };
                        let nf = Expr { ty, kind: ExprKind::Cast(Box::new(n)) };
                        chain(binary(BinOp::Mul, nf, call(ty, MathFn::Powi, vec![x, n1])))?
                    }
                    // x.powf(y)' = y · x.powf(y − 1), y fixed
                    MathFn::Powf => {
                        let y = rest[0].v.clone();
                        let y1 = binary(BinOp::Sub, y.clone(), lit(ty, 1.0));
                        chain(binary(BinOp::Mul, y, call(ty, MathFn::Powf, vec![x, y1])))?
                    }
                    MathFn::Min | MathFn::Max => {
                        let [b] = <[Dual; 1]>::try_from(rest).expect("two arguments");
                        let op = if *func == MathFn::Min { BinOp::Le } else { BinOp::Ge };
                        let c = binary(op, x, b.v.clone());
                        let mut m = merge(&c, Dual { v: v.clone(), d: a.d }, Dual { v: v.clone(), d: b.d });
                        m.v = v;
                        m
                    }
                    _ => return no_rule(),
                }
            }
            ExprKind::Select(c, a, b) => {
                let c = self.expr(c)?.v;
                merge(&c, self.expr(a)?, self.expr(b)?)
            }
        })
    }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;

    fn gradient_of(source: &str, wrt: &[&str]) -> Result<Adjoint, AdjointError> {
        let ir = StencilIr::from_source(source).unwrap_or_else(|e| panic!("{}", e.kind));
        let ids: Vec<ParamId> = wrt.iter().map(|n| ir.params.iter().position(|p| p.name == *n).expect(n)).collect();
        gradient(&ir, &ids)
    }

    const WAVE: &str = "fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
        let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] - 2.0 * u[idx];
        u_next[idx] = 2.0 * u[idx] - u_prev[idx] + dt2 * c[idx] * lap;
    }";

    #[test]
    fn the_parameters_keep_the_forward_state_and_append_the_gradient() {
        let g = gradient_of(WAVE, &["c"]).expect("differentiable");
        let names: Vec<&str> = g.ir.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["dt2", "c", "u", "u_prev", "u_next_bar", "c_bar", "range_mask"]);
        use AdjointRole::*;
        assert_eq!(g.roles, [Scalar, Fixed, Fixed, Fixed, Cotangent, Gradient, Mask]);
        assert_eq!(g.ir.name, "wave_gradient");
        // c is read at offset 0 only: the cotangent is read there too, and the body never reads c.
        let mut reads = Vec::new();
        crate::ir::visit_exprs(&g.ir.body, &mut |e| {
            if let ExprKind::Load { field, offset } = e.kind {
                reads.push((g.ir.params[field].name.clone(), offset));
            }
        });
        assert!(reads.iter().all(|(_, o)| o[1] == 0 && o[2] == 0));
        assert!(reads.iter().any(|(n, o)| n == "u_next_bar" && *o == [0; 3]));
        assert!(!reads.iter().any(|(n, _)| n == "c" || n == "u_prev"));
    }

    #[test]
    fn unsupported_terms_and_fields_are_named() {
        let f = |body: &str| {
            format!("fn f(idx: Idx1, k: f64, c: &Field1<f64>, u: &Field1<f64>, out: &mut Field1<f64>) {{ {body} }}")
        };
        let err = gradient_of(&f("out[idx] = u[idx] * c[idx].floor();"), &["c"]).expect_err("no rule");
        assert!(matches!(err.kind, AdjointErrorKind::NoDerivative { func: "floor", .. }), "{err:?}");
        assert!(gradient_of(&f("out[idx] = u[idx] * c[idx].sqrt() / c[idx].powi(2) + c[idx].min(k);"), &["c"]).is_ok());
        let reason = |wrt| match gradient_of(&f("out[idx] = c[idx] * u[idx];"), &[wrt]).expect_err("not a field").kind {
            AdjointErrorKind::GradientParam { reason, .. } => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(reason("k"), "is not a field");
        assert_eq!(reason("out"), "is written by the stencil");
        let err = gradient_of(&f("out[idx] = c[idx];"), &["u"]).expect_err("not read");
        assert!(matches!(err.kind, AdjointErrorKind::GradientParam { reason: "is never read by the stencil", .. }));
        let err = gradient_of(&f("out[idx] += out[idx] * c[idx];"), &["c"]).expect_err("reads out");
        assert_eq!(err.kind, AdjointErrorKind::CoefficientReadsOutput { field: "out".into() });
    }
}
