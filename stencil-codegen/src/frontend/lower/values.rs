//! Small fixed-size arrays (`[f64; 5]`) and tuples, scalarised while lowering: an array local
//! becomes one scalar local per element, every index is a compile-time integer, and a tuple is
//! a list of values. The IR and the printers only ever see scalars.

use super::syntax::{helper_name, split_tail};
use super::types::{TExpr, Var};
use super::{int_literal, tokens, unsupported, Binding, Lowerer};
use crate::frontend::error::{Error, ErrorKind};
use crate::ir::{Expr, ExprKind, Literal, LocalId, ScalarType, Stmt};
use crate::limits::MAX_ARRAY_LEN;
use proc_macro2::Span;
use std::fmt;
use syn::spanned::Spanned;

/// A value while lowering: a scalar expression, or an aggregate of them.
#[derive(Clone, Debug)]
pub(super) enum Value {
    /// One number or bool.
    Scalar(TExpr),
    /// An array: its elements, all of one type.
    Array(Vec<TExpr>),
    /// A tuple: its elements.
    Tuple(Vec<Value>),
}

/// A declared type: `f64`, `[f64; 5]`, `(f64, [f32; 2])`.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum DeclType {
    /// A scalar.
    Scalar(ScalarType),
    /// An array of `n` scalars.
    Array(ScalarType, usize),
    /// A tuple.
    Tuple(Vec<DeclType>),
}

/// The structure of a value or a type, without element types (for error messages and checks).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Shape {
    Scalar,
    Array(usize),
    Tuple(Vec<Shape>),
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Scalar => write!(f, "a single value"),
            Shape::Array(n) => write!(f, "an array of {n} values"),
            Shape::Tuple(v) => write!(f, "a tuple of {} values", v.len()),
        }
    }
}

impl Value {
    pub(super) fn shape(&self) -> Shape {
        match self {
            Value::Scalar(_) => Shape::Scalar,
            Value::Array(v) => Shape::Array(v.len()),
            Value::Tuple(v) => Shape::Tuple(v.iter().map(Value::shape).collect()),
        }
    }

    /// The scalar expressions of the value, in order.
    fn leaves(self) -> Vec<TExpr> {
        match self {
            Value::Scalar(e) => vec![e],
            Value::Array(v) => v,
            Value::Tuple(v) => v.into_iter().flat_map(Value::leaves).collect(),
        }
    }

    /// A value of this one's shape built from `leaves` (as many as [`Value::leaves`] gives).
    fn rebuild(&self, leaves: &mut impl Iterator<Item = TExpr>) -> Value {
        let mut next = || leaves.next().expect("as many leaves as the shape has");
        match self {
            Value::Scalar(_) => Value::Scalar(next()),
            Value::Array(v) => Value::Array(v.iter().map(|_| next()).collect()),
            Value::Tuple(v) => Value::Tuple(v.iter().map(|e| e.rebuild(leaves)).collect()),
        }
    }
}

impl Value {
    /// The scalar, or an error at `at` if this is an array or a tuple.
    pub(super) fn scalar(self, at: &impl quote::ToTokens) -> Result<TExpr, Error> {
        match self {
            Value::Scalar(e) => Ok(e),
            other => Err(Error::spanned(at, ErrorKind::AggregateAsScalar { what: other.shape().to_string() })),
        }
    }
}

impl DeclType {
    fn shape(&self) -> Shape {
        match self {
            DeclType::Scalar(_) => Shape::Scalar,
            DeclType::Array(_, n) => Shape::Array(*n),
            DeclType::Tuple(v) => Shape::Tuple(v.iter().map(DeclType::shape).collect()),
        }
    }

    /// The element type of every scalar of the type, in order.
    fn leaf_types(&self) -> Vec<ScalarType> {
        match self {
            DeclType::Scalar(t) => vec![*t],
            DeclType::Array(t, n) => vec![*t; *n],
            DeclType::Tuple(v) => v.iter().flat_map(DeclType::leaf_types).collect(),
        }
    }

    /// Parses a type; array lengths through `len` (literals, or also the body's `const`s).
    pub(super) fn parse(ty: &syn::Type, len: &dyn Fn(&syn::Expr) -> Option<i64>) -> Result<DeclType, Error> {
        let unsupported = || Error::spanned(ty, ErrorKind::UnsupportedValueType { ty: tokens(ty) });
        match ty {
            syn::Type::Paren(p) => DeclType::parse(&p.elem, len),
            syn::Type::Group(g) => DeclType::parse(&g.elem, len),
            syn::Type::Array(a) => {
                let elem = super::signature::scalar_type(&a.elem).ok_or_else(unsupported)?;
                let n = len(&a.len).ok_or_else(|| Error::spanned(&a.len, ErrorKind::ArrayLength { len: None }))?;
                Ok(DeclType::Array(elem, array_len(n, &a.len)?))
            }
            syn::Type::Tuple(t) if !t.elems.is_empty() => {
                Ok(DeclType::Tuple(t.elems.iter().map(|e| DeclType::parse(e, len)).collect::<Result<_, _>>()?))
            }
            other => super::signature::scalar_type(other).map(DeclType::Scalar).ok_or_else(unsupported),
        }
    }
}

/// Checks an array length (1 to [`MAX_ARRAY_LEN`]).
fn array_len(n: i64, at: &impl quote::ToTokens) -> Result<usize, Error> {
    usize::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_ARRAY_LEN).contains(n))
        .ok_or_else(|| Error::spanned(at, ErrorKind::ArrayLength { len: Some(n) }))
}

impl Lowerer {
    /// Lowers an expression that may be an array or a tuple as well as a scalar.
    pub(super) fn lower_value(&mut self, e: &syn::Expr, out: &mut Vec<Stmt<Var>>) -> Result<Value, Error> {
        match e {
            syn::Expr::Paren(p) => self.lower_value(&p.expr, out),
            syn::Expr::Group(g) => self.lower_value(&g.expr, out),
            syn::Expr::Path(p) => self.path_value(p),
            syn::Expr::Index(ix) if self.group_at(ix).is_some() => Ok(Value::Array(self.group_load(ix)?)),
            syn::Expr::Index(ix) if self.is_field(&ix.expr) => Ok(Value::Scalar(self.field_load(ix)?)),
            syn::Expr::Index(ix) => {
                let array = self.lower_value(&ix.expr, out)?;
                let Value::Array(elems) = array else {
                    return Err(unsupported(
                        &ix.expr,
                        &format!("indexing `{}` (only field parameters and arrays can be indexed)", tokens(&ix.expr)),
                    ));
                };
                let k = self.element_index(ix, elems.len())?;
                Ok(Value::Scalar(elems[k].clone()))
            }
            syn::Expr::Field(f) => {
                let syn::Member::Unnamed(m) = &f.member else {
                    return Err(unsupported(&f.member, "a named field (only tuples, as `t.0`, have fields)"));
                };
                let Value::Tuple(mut elems) = self.lower_value(&f.base, out)? else {
                    return Err(unsupported(&f.base, &format!("`.{}` on a value that is not a tuple", m.index)));
                };
                let k = m.index as usize;
                if k >= elems.len() {
                    return Err(Error::spanned(
                        &f.member,
                        ErrorKind::IndexOutOfBounds { what: tokens(&f.base), index: k as i64, len: elems.len() },
                    ));
                }
                Ok(elems.swap_remove(k))
            }
            syn::Expr::Array(a) => {
                array_len(a.elems.len() as i64, a)?;
                let elems = a.elems.iter().map(|x| self.lower_expr(x, out)).collect::<Result<Vec<_>, _>>()?;
                for (x, syn_x) in elems.iter().zip(&a.elems).skip(1) {
                    self.types.unify(elems[0].ty, x.ty, syn_x.span())?;
                }
                Ok(Value::Array(elems))
            }
            syn::Expr::Repeat(r) => {
                let n = self
                    .const_int(&r.len)
                    .ok_or_else(|| Error::spanned(&r.len, ErrorKind::ArrayLength { len: None }))?;
                let n = array_len(n, &r.len)?;
                let elem = self.lower_expr(&r.expr, out)?;
                Ok(Value::Array(vec![elem; n]))
            }
            syn::Expr::Tuple(t) if !t.elems.is_empty() => {
                Ok(Value::Tuple(t.elems.iter().map(|x| self.lower_value(x, out)).collect::<Result<_, _>>()?))
            }
            // Not through `lower_expr`, which sends tuples here (found by the fuzz test: `x + ()`
            // recursed until the compiler's stack overflowed).
            syn::Expr::Tuple(t) => Err(unsupported(t, "the unit value `()`")),
            syn::Expr::Call(c) if helper_name(c).is_some() => self.call_helper(c, out),
            syn::Expr::Block(b) => {
                let (stmts, tail) =
                    split_tail(&b.block).ok_or_else(|| unsupported(b, "a block without a final value"))?;
                self.with_scope(|cx| {
                    for s in stmts {
                        cx.lower_stmt(s, false, out)?;
                    }
                    cx.lower_value(tail, out)
                })
            }
            syn::Expr::If(i) => self.if_value(i, out),
            other => Ok(Value::Scalar(self.lower_expr(other, out)?)),
        }
    }

    /// A compile-time integer: a literal, a constant `for` variable, a `const N: usize`, or
    /// `+`, `-`, `*` of those.
    pub(super) fn const_int(&self, e: &syn::Expr) -> Option<i64> {
        match e {
            syn::Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string())? {
                Binding::ConstInt(v) => Some(v),
                _ => None,
            },
            syn::Expr::Binary(b) => {
                let (l, r) = (self.const_int(&b.left)?, self.const_int(&b.right)?);
                match b.op {
                    syn::BinOp::Add(_) => l.checked_add(r),
                    syn::BinOp::Sub(_) => l.checked_sub(r),
                    syn::BinOp::Mul(_) => l.checked_mul(r),
                    _ => None,
                }
            }
            syn::Expr::Paren(p) => self.const_int(&p.expr),
            syn::Expr::Group(g) => self.const_int(&g.expr),
            syn::Expr::Cast(c) => self.const_int(&c.expr),
            syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => self.const_int(expr).map(|v| -v),
            syn::Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                syn::Stmt::Expr(e, None) => self.const_int(e),
                _ => None,
            },
            other => int_literal(other),
        }
    }

    /// The constant element index of `ix` into an array of `len`.
    pub(super) fn element_index(&self, ix: &syn::ExprIndex, len: usize) -> Result<usize, Error> {
        let array = tokens(&ix.expr);
        let k = self
            .const_int(&ix.index)
            .ok_or_else(|| Error::spanned(&ix.index, ErrorKind::ArrayIndexNotConstant { array: array.clone() }))?;
        usize::try_from(k)
            .ok()
            .filter(|&k| k < len)
            .ok_or_else(|| Error::spanned(&ix.index, ErrorKind::IndexOutOfBounds { what: array, index: k, len }))
    }

    /// The value a binding denotes (its locals' current values).
    pub(super) fn binding_value(&mut self, binding: &Binding, span: Span) -> Value {
        let local = |cx: &Self, id: LocalId| Expr { ty: cx.locals[id].1, kind: ExprKind::Local(id) };
        match binding {
            Binding::Local(id, _) => Value::Scalar(local(self, *id)),
            Binding::ConstInt(v) => {
                let ty = self.types.int_literal(v.to_string(), *v, span);
                Value::Scalar(Expr { ty, kind: ExprKind::Lit(Literal::Int(*v)) })
            }
            Binding::Array(ids, _) => Value::Array(ids.iter().map(|&id| local(self, id)).collect()),
            Binding::Tuple(v) => Value::Tuple(v.iter().map(|b| self.binding_value(b, span)).collect()),
            Binding::PointFn(_) | Binding::Captured | Binding::Point(_) => {
                unreachable!("path_value refuses a point function, a captured local or a point used as a value")
            }
        }
    }

    /// Declares locals holding `value` (named after `name`; an array `q` becomes `q_0`, `q_1`,
    /// ...), initialised in `out`, and returns their binding (not yet in scope).
    pub(super) fn declare_value(
        &mut self,
        name: &str,
        value: Value,
        mutable: bool,
        out: &mut Vec<Stmt<Var>>,
    ) -> Binding {
        match value {
            Value::Scalar(e) => {
                let id = self.declare(name, e.ty, mutable, false);
                out.push(Stmt::Let { local: id, init: Some(e) });
                Binding::Local(id, mutable)
            }
            Value::Array(elems) => {
                let ids = elems
                    .into_iter()
                    .enumerate()
                    .map(|(k, e)| {
                        let id = self.declare(&format!("{name}_{k}"), e.ty, mutable, false);
                        out.push(Stmt::Let { local: id, init: Some(e) });
                        id
                    })
                    .collect();
                Binding::Array(ids, mutable)
            }
            Value::Tuple(elems) => Binding::Tuple(
                elems
                    .into_iter()
                    .enumerate()
                    .map(|(k, v)| self.declare_value(&format!("{name}_{k}"), v, mutable, out))
                    .collect(),
            ),
        }
    }

    /// Binds a `let` pattern (a name, `name: Type`, a tuple of patterns or `_`) to `value`;
    /// `span` is the initialiser's, for type errors.
    pub(super) fn bind_pattern(
        &mut self,
        pat: &syn::Pat,
        value: Value,
        span: Span,
        out: &mut Vec<Stmt<Var>>,
    ) -> Result<(), Error> {
        match pat {
            syn::Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                self.not_the_index(&p.ident)?;
                let name = p.ident.to_string();
                let binding = self.declare_value(&name, value, p.mutability.is_some(), out);
                self.bind(name, binding);
                Ok(())
            }
            syn::Pat::Type(pt) => {
                let ty = DeclType::parse(&pt.ty, &|e| self.const_int(e))?;
                let value = self.coerce(value, &ty, span)?;
                self.bind_pattern(&pt.pat, value, span, out)
            }
            syn::Pat::Tuple(t) => {
                let Value::Tuple(elems) = value else {
                    return Err(Error::spanned(
                        t,
                        ErrorKind::ShapeMismatch {
                            expected: format!("a tuple of {} values", t.elems.len()),
                            found: value.shape().to_string(),
                        },
                    ));
                };
                if elems.len() != t.elems.len() {
                    return Err(Error::spanned(
                        t,
                        ErrorKind::ShapeMismatch {
                            expected: format!("a tuple of {} values", t.elems.len()),
                            found: format!("a tuple of {} values", elems.len()),
                        },
                    ));
                }
                for (p, v) in t.elems.iter().zip(elems) {
                    self.bind_pattern(p, v, span, out)?;
                }
                Ok(())
            }
            syn::Pat::Wild(_) => Ok(()),
            other => Err(unsupported(other, "this pattern (write a name, `name: Type` or a tuple of names)")),
        }
    }

    /// Checks that `value` has the shape of `ty` and gives its scalars `ty`'s element types.
    pub(super) fn coerce(&mut self, value: Value, ty: &DeclType, span: Span) -> Result<Value, Error> {
        if value.shape() != ty.shape() {
            return Err(Error::new(
                span,
                ErrorKind::ShapeMismatch { expected: ty.shape().to_string(), found: value.shape().to_string() },
            ));
        }
        let leaves = value.clone().leaves();
        for (e, t) in leaves.iter().zip(ty.leaf_types()) {
            let known = self.types.known(t);
            self.types.unify(known, e.ty, span)?;
        }
        Ok(value)
    }

    /// Checks that two values have one shape and unifies their scalars' types pairwise.
    fn unify_values(&mut self, a: &Value, b: &Value, span: Span) -> Result<(), Error> {
        if a.shape() != b.shape() {
            return Err(Error::new(
                span,
                ErrorKind::ShapeMismatch { expected: a.shape().to_string(), found: b.shape().to_string() },
            ));
        }
        for (x, y) in a.clone().leaves().iter().zip(b.clone().leaves()) {
            self.types.unify(x.ty, y.ty, span)?;
        }
        Ok(())
    }

    /// `name = value` for a local, array or tuple binding: every scalar is assigned, through
    /// temporaries when there are several (`q = [q[1], q[0]]` swaps).
    pub(super) fn assign_binding(
        &mut self,
        binding: &Binding,
        name: &str,
        value: Value,
        target: &syn::Expr,
        out: &mut Vec<Stmt<Var>>,
    ) -> Result<(), Error> {
        let current = self.binding_value(binding, target.span());
        let mut targets = Vec::new();
        collect_locals(binding, &mut targets);
        if targets.iter().any(|(_, mutable)| !mutable) {
            return Err(Error::spanned(target, ErrorKind::ImmutableLocal { name: name.to_string() }));
        }
        self.unify_values(&current, &value, target.span())?;
        let mut values = value.leaves();
        if values.len() > 1 {
            values = values
                .into_iter()
                .map(|e| {
                    let ty = e.ty;
                    let tmp = self.declare("assigned_value", ty, false, false);
                    out.push(Stmt::Let { local: tmp, init: Some(e) });
                    Expr { ty, kind: ExprKind::Local(tmp) }
                })
                .collect();
        }
        for ((local, _), value) in targets.into_iter().zip(values) {
            out.push(Stmt::Assign { local, value });
        }
        Ok(())
    }

    /// `q[k] = value` for an array local `q`.
    pub(super) fn assign_element(
        &mut self,
        ix: &syn::ExprIndex,
        value: Value,
        out: &mut Vec<Stmt<Var>>,
    ) -> Result<(), Error> {
        let value = value.scalar(ix)?;
        let name = match &*ix.expr {
            syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        let binding = name.as_ref().and_then(|n| self.lookup(n));
        if let (Some(Binding::Captured), Some(name)) = (&binding, &name) {
            return Err(self.captured(&ix.expr, name));
        }
        let Some(Binding::Array(ids, mutable)) = binding else {
            return Err(Error::spanned(ix, ErrorKind::BadAssignTarget));
        };
        if !mutable {
            return Err(Error::spanned(ix, ErrorKind::ImmutableLocal { name: name.expect("array name") }));
        }
        let local = ids[self.element_index(ix, ids.len())?];
        self.types.unify(self.locals[local].1, value.ty, ix.span())?;
        out.push(Stmt::Assign { local, value });
        Ok(())
    }

    /// `if c { a } else { b }` as a value: a select when both branches are plain scalar
    /// expressions, otherwise temporaries (one per scalar) assigned in a hoisted `if` statement.
    fn if_value(&mut self, i: &syn::ExprIf, out: &mut Vec<Stmt<Var>>) -> Result<Value, Error> {
        let Some((_, else_expr)) = &i.else_branch else {
            return Err(Error::spanned(&i.if_token, ErrorKind::MissingElse));
        };
        let cond = self.lower_cond(&i.cond, out)?;
        let (then_stmts, then_tail) =
            split_tail(&i.then_branch).ok_or_else(|| Error::spanned(&i.then_branch, ErrorKind::MissingElse))?;
        let mut then_body = Vec::new();
        let then_value = self.with_scope(|cx| {
            for s in then_stmts {
                cx.lower_stmt(s, false, &mut then_body)?;
            }
            cx.lower_value(then_tail, &mut then_body)
        })?;
        let mut else_body = Vec::new();
        let else_value = self.lower_value(else_expr, &mut else_body)?;
        self.unify_values(&then_value, &else_value, i.span())?;
        if let (Value::Scalar(a), Value::Scalar(b)) = (&then_value, &else_value) {
            if then_body.is_empty() && else_body.is_empty() {
                let kind = ExprKind::Select(Box::new(cond), Box::new(a.clone()), Box::new(b.clone()));
                return Ok(Value::Scalar(Expr { ty: a.ty, kind }));
            }
        }
        let temps: Vec<TExpr> = then_value
            .clone()
            .leaves()
            .into_iter()
            .map(|e| {
                let tmp = self.declare("if_value", e.ty, true, false);
                out.push(Stmt::Let { local: tmp, init: None });
                Expr { ty: e.ty, kind: ExprKind::Local(tmp) }
            })
            .collect();
        for (body, value) in [(&mut then_body, then_value.clone()), (&mut else_body, else_value)] {
            for (tmp, e) in temps.iter().zip(value.leaves()) {
                let ExprKind::Local(local) = tmp.kind else { unreachable!("temporaries are locals") };
                body.push(Stmt::Assign { local, value: e });
            }
        }
        out.push(Stmt::If { cond, then_body, else_body });
        Ok(then_value.rebuild(&mut temps.into_iter()))
    }
}

/// The locals of a binding with their mutability, in leaf order.
fn collect_locals(binding: &Binding, out: &mut Vec<(LocalId, bool)>) {
    match binding {
        Binding::Local(id, m) => out.push((*id, *m)),
        Binding::ConstInt(_) | Binding::PointFn(_) | Binding::Captured | Binding::Point(_) => {
            out.push((usize::MAX, false))
        }
        Binding::Array(ids, m) => out.extend(ids.iter().map(|&id| (id, *m))),
        Binding::Tuple(v) => v.iter().for_each(|b| collect_locals(b, out)),
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{ExprKind, ScalarType, StencilIr, Stmt};
    use crate::ErrorKind;

    fn lower(body: &str) -> Result<StencilIr, ErrorKind> {
        let src = format!("fn s(idx: Idx1, flag: bool, f: &Field1<f64>, out: &mut Field1<f64>) {{ {body} }}");
        StencilIr::from_source(&src).map_err(|e| e.kind)
    }

    fn local_names(ir: &StencilIr) -> Vec<&str> {
        ir.locals.iter().map(|l| l.name.as_str()).collect()
    }

    fn lower3(body: &str) -> Result<StencilIr, ErrorKind> {
        let src = format!("fn s(idx: Idx3, f: &Field3<f64>, out: &mut Field3<f64>) {{ {body} }}");
        StencilIr::from_source(&src).map_err(|e| e.kind)
    }

    #[test]
    fn a_named_point_reads_where_its_shift_says() {
        let named = lower3(
            "let below = idx.ix::<0, 0, -1>(); let east_below = below.ix::<1, 0, 0>(); let mut s = 0.0; \
             for r in 1..=2 { let west = idx.ix(-r, 0, 0); s += f[west]; } \
             out[idx] = f[below] + f[east_below] + f[below.ix::<0, 0, 2>()] + f[idx] + s;",
        )
        .unwrap();
        let written_out = lower3(
            "let mut s = 0.0; for r in 1..=2 { s += f[idx.ix(-r, 0, 0)]; } \
             out[idx] = f[idx.ix::<0, 0, -1>()] + f[idx.ix::<1, 0, -1>()] + f[idx.ix::<0, 0, 1>()] + f[idx] + s;",
        )
        .unwrap();
        assert_eq!(named, written_out);
        // A planted difference shows: the shift of `below.ix` taken from the index instead.
        let other =
            lower3("out[idx] = f[idx.ix::<0, 0, -1>()] + f[idx.ix::<1, 0, 0>()] + f[idx.ix::<0, 0, 1>()] + f[idx];");
        assert_ne!(named, other.unwrap());
    }

    #[test]
    fn a_group_of_fields_reads_at_a_named_point() {
        let group = |body: &str| {
            let src = format!("fn s(idx: Idx3, q: [&Field3<f64>; 2], out: &mut Field3<f64>) {{ {body} }}");
            StencilIr::from_source(&src).map_err(|e| e.kind)
        };
        let named = group(
            "let below = idx.ix::<0, 0, -1>(); let v = q[below]; let w = q[below.ix::<1, 0, 0>()]; \
                           out[idx] = v[0] + v[1] * w[1];",
        )
        .unwrap();
        let written_out = group(
            "let v = q[idx.ix::<0, 0, -1>()]; let w = q[idx.ix::<1, 0, -1>()]; \
                                 out[idx] = v[0] + v[1] * w[1];",
        )
        .unwrap();
        assert_eq!(named, written_out);
    }

    #[test]
    fn a_named_point_is_not_a_value_and_a_value_may_take_its_name() {
        assert_eq!(
            lower3("let below = idx.ix::<0, 0, -1>(); out[idx] = 2.0 * below.ix::<1, 0, 0>();").unwrap_err(),
            ErrorKind::PointAsValue { name: "below".into() }
        );
        assert_eq!(
            lower3("let below = idx.ix::<0, 0, -1>(); out[idx] = below;").unwrap_err(),
            ErrorKind::PointAsValue { name: "below".into() }
        );
        assert_eq!(
            lower3("let below = idx.ix::<0, 0, -1>(); out[idx] = f[below] * below;").unwrap_err(),
            ErrorKind::PointAsValue { name: "below".into() }
        );
        // Shadowed by a value, and out of scope after its block.
        let ir = lower3("let p = idx.ix::<1, 0, 0>(); let a = f[p]; let p = 2.0; out[idx] = a * p;").unwrap();
        assert_eq!(ir.locals.len(), 2, "{:?}", ir.locals);
        assert!(matches!(
            lower3("{ let p = idx.ix::<1, 0, 0>(); } out[idx] = f[p];").unwrap_err(),
            ErrorKind::BadIndex { .. }
        ));
        // Only the point itself is written, named or not.
        assert!(lower3("let here = idx; out[here] = f[idx];").is_ok());
        assert!(lower3("let east = idx.ix::<1, 0, 0>(); out[east] = f[idx];").is_err());
    }

    #[test]
    fn an_array_becomes_one_local_per_element() {
        let ir = lower(
            "let mut q = [0.0; 3]; for i in 0..3 { q[i] = f[idx] * (i as f64); } q[1] += 1.0; let r = q; \
             out[idx] = r[0] + r[1] + r[2];",
        )
        .unwrap();
        assert_eq!(local_names(&ir), ["q_0", "q_1", "q_2", "r_0", "r_1", "r_2"]);
        assert!(ir.locals.iter().all(|l| l.ty == ScalarType::F64));
        let assigns = ir.body.iter().filter(|s| matches!(s, Stmt::Assign { .. })).count();
        assert_eq!(assigns, 4, "three from the loop, one compound");
    }

    #[test]
    fn whole_array_assignment_goes_through_temporaries() {
        let ir = lower("let mut q = [f[idx], 2.0]; q = [q[1], q[0]]; out[idx] = q[0] - q[1];").unwrap();
        assert_eq!(local_names(&ir), ["q_0", "q_1", "assigned_value", "assigned_value_1"]);
        let tail: Vec<String> = ir.body[2..6]
            .iter()
            .map(|s| match s {
                Stmt::Let { local, init: Some(e) } => format!("let {} = {:?}", ir.locals[*local].name, e.kind),
                Stmt::Assign { local, value } => format!("{} = {:?}", ir.locals[*local].name, value.kind),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            tail,
            ["let assigned_value = Local(1)", "let assigned_value_1 = Local(0)", "q_0 = Local(2)", "q_1 = Local(3)"]
        );
    }

    #[test]
    fn consts_tuples_and_array_valued_if() {
        let ir = lower(
            "const N: usize = 2; let (a, b) = (f[idx], [1.0; N]); \
             let c = if flag { b } else { [a, a * 2.0] }; out[idx] = c[N - 1];",
        )
        .unwrap();
        assert_eq!(local_names(&ir), ["a", "b_0", "b_1", "if_value", "if_value_1", "c_0", "c_1"]);
        let Some(Stmt::Store { value, .. }) = ir.body.last() else { panic!("store last") };
        assert_eq!(value.kind, ExprKind::Local(6));
    }

    #[test]
    fn array_mistakes_are_named_errors() {
        assert_eq!(
            lower("let q = [f[idx]; 2]; let k = 1; out[idx] = q[k];"),
            Err(ErrorKind::ArrayIndexNotConstant { array: "q".into() })
        );
        assert_eq!(
            lower("let q = [f[idx]; 2]; out[idx] = q[2];"),
            Err(ErrorKind::IndexOutOfBounds { what: "q".into(), index: 2, len: 2 })
        );
        assert_eq!(lower("let q = [f[idx]; 17]; out[idx] = q[0];"), Err(ErrorKind::ArrayLength { len: Some(17) }));
        assert_eq!(
            lower("let q = [f[idx]; 2]; out[idx] = q;"),
            Err(ErrorKind::AggregateAsScalar { what: "an array of 2 values".into() })
        );
        assert_eq!(
            lower("let q = [f[idx]; 2]; q[0] = 1.0; out[idx] = q[0];"),
            Err(ErrorKind::ImmutableLocal { name: "q".into() })
        );
        assert_eq!(
            lower("let q: [f64; 3] = [f[idx]; 2]; out[idx] = q[0];"),
            Err(ErrorKind::ShapeMismatch {
                expected: "an array of 3 values".into(),
                found: "an array of 2 values".into()
            })
        );
        assert_eq!(
            lower("let q = [f[idx], 1.0f32]; out[idx] = q[0];"),
            Err(ErrorKind::TypeMismatch { expected: "f64".into(), found: "f32".into() })
        );
    }
}
