//! Expressions: literals, names, field accesses, operators, casts, math calls, `if` and blocks.

use super::syntax::helper_name;
use super::types::{Require, TExpr, Var};
use super::values::Value;
use super::{path_name, tokens, unsupported, Binding, Lowerer};
use crate::frontend::error::{Error, ErrorKind};
use crate::ir::{BinOp, Expr, ExprKind, Literal, MathFn, ParamId, ParamKind, ScalarType, Stmt, UnOp};
use proc_macro2::Span;
use syn::spanned::Spanned;

impl Lowerer {
    pub(super) fn lower_expr(&mut self, e: &syn::Expr, out: &mut Vec<Stmt<Var>>) -> Result<TExpr, Error> {
        match e {
            syn::Expr::Lit(l) => self.literal(&l.lit),
            syn::Expr::Paren(p) => self.lower_expr(&p.expr, out),
            syn::Expr::Group(g) => self.lower_expr(&g.expr, out),
            // Forms that may also denote an array or a tuple: lowered as values, then required
            // to be a single number.
            syn::Expr::Path(_)
            | syn::Expr::Index(_)
            | syn::Expr::Field(_)
            | syn::Expr::Array(_)
            | syn::Expr::Repeat(_)
            | syn::Expr::Tuple(_)
            | syn::Expr::If(_)
            | syn::Expr::Block(_) => {
                let value = self.lower_value(e, out)?;
                value.scalar(e)
            }
            syn::Expr::Call(c) if helper_name(c).is_some() => {
                let value = self.lower_value(e, out)?;
                value.scalar(e)
            }
            syn::Expr::Unary(u) => {
                let arg = self.lower_expr(&u.expr, out)?;
                let (op, req) = match u.op {
                    syn::UnOp::Neg(_) => (UnOp::Neg, Require::Signed { op: "-".into() }),
                    syn::UnOp::Not(_) => (UnOp::Not, Require::IntOrBool { op: "!".into() }),
                    _ => return Err(unsupported(u, "dereferencing")),
                };
                self.types.require(arg.ty, req, u.span());
                Ok(Expr { ty: arg.ty, kind: ExprKind::Unary(op, Box::new(arg)) })
            }
            syn::Expr::Binary(b) => {
                let op =
                    binary_op(&b.op).ok_or_else(|| unsupported(&b.op, "a compound assignment inside an expression"))?;
                let l = self.lower_expr(&b.left, out)?;
                let mut right_stmts = Vec::new();
                let r = self.lower_expr(&b.right, &mut right_stmts)?;
                if right_stmts.is_empty() {
                    return self.binary(op, l, r, b.op.span());
                }
                if !matches!(op, BinOp::And | BinOp::Or) {
                    out.append(&mut right_stmts);
                    return self.binary(op, l, r, b.op.span());
                }
                // `a && { stmts; b }`: the statements run only when `a` does not decide.
                let ty = self.types.known(ScalarType::Bool);
                self.types.unify(ty, l.ty, b.left.span())?;
                self.types.unify(ty, r.ty, b.right.span())?;
                let tmp = self.declare("logic_value", ty, true, false);
                out.push(Stmt::Let { local: tmp, init: Some(l) });
                let current = Expr { ty, kind: ExprKind::Local(tmp) };
                let cond = if op == BinOp::And {
                    current
                } else {
                    Expr { ty, kind: ExprKind::Unary(UnOp::Not, Box::new(current)) }
                };
                right_stmts.push(Stmt::Assign { local: tmp, value: r });
                out.push(Stmt::If { cond, then_body: right_stmts, else_body: Vec::new() });
                Ok(Expr { ty, kind: ExprKind::Local(tmp) })
            }
            syn::Expr::Cast(c) => {
                let ty = super::signature::scalar_type(&c.ty)
                    .ok_or_else(|| Error::spanned(&c.ty, ErrorKind::UnsupportedParamType { ty: tokens(&c.ty) }))?;
                let arg = self.lower_expr(&c.expr, out)?;
                if ty == ScalarType::Bool {
                    return Err(unsupported(c, "a cast to bool (compare instead: `x != 0`)"));
                }
                let ty = self.types.known(ty);
                Ok(Expr { ty, kind: ExprKind::Cast(Box::new(arg)) })
            }
            syn::Expr::MethodCall(m) => {
                if self.is_index_expr(&m.receiver) && (m.method == "level" || m.method == "levels") {
                    return self.level(m);
                }
                if self.is_index_expr(&m.receiver) {
                    return Err(Error::spanned(&m, ErrorKind::IndexAsValue { index: self.index_name.clone() }));
                }
                if self.point_base(&m.receiver).is_some() {
                    return Err(Error::spanned(&m, ErrorKind::PointAsValue { name: tokens(&m.receiver) }));
                }
                if let Some(r) = self.reduction_receiver(&m.receiver) {
                    let name = self.params[r].name.clone();
                    let kind = if m.method == "fold" {
                        ErrorKind::FoldAsValue { name }
                    } else {
                        ErrorKind::ReductionAsValue { name }
                    };
                    return Err(Error::spanned(&m, kind));
                }
                if m.method == "fold" {
                    let (name, in_helper) = (tokens(&m.receiver), !self.call_stack.is_empty());
                    return Err(Error::spanned(&m.receiver, ErrorKind::FoldTarget { name, in_helper }));
                }
                let func = MathFn::from_rust_name(&m.method.to_string()).ok_or_else(|| {
                    Error::spanned(&m.method, ErrorKind::UnsupportedCall { name: m.method.to_string() })
                })?;
                let mut args = vec![self.lower_expr(&m.receiver, out)?];
                for a in &m.args {
                    args.push(self.lower_expr(a, out)?);
                }
                self.math_call(func, args, None, m.span())
            }
            syn::Expr::Call(c) => {
                let syn::Expr::Path(p) = &*c.func else { return Err(unsupported(&c.func, "calling this expression")) };
                let name = path_name(&p.path);
                let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
                let (owner, func) = match segs.as_slice() {
                    [t, f] => (ScalarType::from_name(t), MathFn::from_rust_name(f)),
                    _ => (None, None),
                };
                let (Some(owner), Some(func)) = (owner, func) else {
                    return Err(Error::spanned(&c.func, ErrorKind::UnsupportedCall { name }));
                };
                let args = c.args.iter().map(|a| self.lower_expr(a, out)).collect::<Result<Vec<_>, _>>()?;
                self.math_call(func, args, Some(owner), c.span())
            }
            syn::Expr::Closure(c) => Err(Error::spanned(&c, ErrorKind::Closure)),
            syn::Expr::Unsafe(u) => Err(Error::spanned(&u.unsafe_token, ErrorKind::Unsafe)),
            syn::Expr::Macro(m) => Err(Error::spanned(&m, ErrorKind::Macro { name: path_name(&m.mac.path) })),
            syn::Expr::ForLoop(f) => Err(Error::spanned(&f.for_token, ErrorKind::RuntimeLoop { which: "for" })),
            syn::Expr::While(w) => Err(Error::spanned(&w.while_token, ErrorKind::RuntimeLoop { which: "while" })),
            syn::Expr::Loop(l) => Err(Error::spanned(&l.loop_token, ErrorKind::RuntimeLoop { which: "loop" })),
            syn::Expr::Return(r) if !self.call_stack.is_empty() => Err(Error::spanned(&r, ErrorKind::HelperReturn)),
            syn::Expr::Return(r) => Err(Error::spanned(&r, ErrorKind::ReturnValue)),
            other => Err(unsupported(other, &format!("`{}`", tokens(other)))),
        }
    }

    pub(super) fn lower_cond(&mut self, e: &syn::Expr, out: &mut Vec<Stmt<Var>>) -> Result<TExpr, Error> {
        if let syn::Expr::Let(l) = e {
            return Err(unsupported(l, "`if let`"));
        }
        let cond = self.lower_expr(e, out)?;
        let b = self.types.known(ScalarType::Bool);
        self.types.unify(b, cond.ty, e.span())?;
        Ok(cond)
    }

    fn literal(&mut self, lit: &syn::Lit) -> Result<TExpr, Error> {
        let (ty, value) = match lit {
            syn::Lit::Float(f) => {
                let parse_error = |e: syn::Error| Error::spanned(&f, ErrorKind::Syntax { message: e.to_string() });
                let v: f64 = f.base10_parse().map_err(parse_error)?;
                let single: f32 = f.base10_parse().map_err(parse_error)?;
                let ty = match ScalarType::from_name(f.suffix()) {
                    Some(ScalarType::F32) if !single.is_finite() && v.is_finite() => {
                        return Err(Error::spanned(
                            &f,
                            ErrorKind::LiteralRange { literal: f.to_string(), ty: "f32".into() },
                        ))
                    }
                    Some(t) => self.types.known(t),
                    None => self.types.float_literal(f.to_string(), single.is_finite() || !v.is_finite(), f.span()),
                };
                (ty, Literal::Float(v, single))
            }
            syn::Lit::Int(i) => {
                let v: i64 =
                    i.base10_parse().map_err(|e| Error::spanned(&i, ErrorKind::Syntax { message: e.to_string() }))?;
                let ty = match ScalarType::from_name(i.suffix()) {
                    Some(t) if t.is_float() => {
                        let ty = self.types.known(t);
                        return Ok(Expr { ty, kind: ExprKind::Lit(Literal::Float(v as f64, v as f32)) });
                    }
                    Some(t) if !super::types::int_fits(v, t) => {
                        return Err(Error::spanned(
                            &i,
                            ErrorKind::LiteralRange { literal: i.to_string(), ty: t.to_string() },
                        ))
                    }
                    Some(t) => self.types.known(t),
                    None => self.types.int_literal(i.to_string(), v, i.span()),
                };
                (ty, Literal::Int(v))
            }
            syn::Lit::Bool(b) => (self.types.known(ScalarType::Bool), Literal::Bool(b.value)),
            other => return Err(unsupported(other, "this literal")),
        };
        Ok(Expr { ty, kind: ExprKind::Lit(value) })
    }

    /// A name or a constant path: a local (scalar, array or tuple), a scalar parameter or a
    /// type's constant (`f64::EPSILON`, `f32::consts::PI`).
    pub(super) fn path_value(&mut self, p: &syn::ExprPath) -> Result<Value, Error> {
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            if let Some(binding) = self.lookup(&name) {
                match binding {
                    Binding::PointFn(_) => {
                        let example = self.point_example();
                        return Err(Error::spanned(&p, ErrorKind::PointFnCall { name, example }));
                    }
                    Binding::Captured => return Err(self.captured(&p, &name)),
                    Binding::Point(_) => return Err(Error::spanned(&p, ErrorKind::PointAsValue { name })),
                    _ => {}
                }
                return Ok(self.binding_value(&binding, p.span()));
            }
            if let Some(elems) = self.param_array(&name) {
                let elems = elems.to_vec();
                return match self.params[elems[0]].kind {
                    ParamKind::Scalar(t) => Ok(Value::Array(
                        elems
                            .into_iter()
                            .map(|id| Expr { ty: self.types.known(t), kind: ExprKind::Scalar(id) })
                            .collect(),
                    )),
                    _ => {
                        let (len, index) = (elems.len(), self.index_name.clone());
                        Err(Error::spanned(&p, ErrorKind::FieldGroupAsValue { name, len, index }))
                    }
                };
            }
            if let Some((id, param)) = self.param(&name) {
                return match param.kind {
                    ParamKind::Scalar(t) | ParamKind::Held(t) => {
                        Ok(Value::Scalar(Expr { ty: self.types.known(t), kind: ExprKind::Scalar(id) }))
                    }
                    ParamKind::Field(_) => {
                        Err(Error::spanned(&p, ErrorKind::FieldAsValue { name, index: self.index_name.clone() }))
                    }
                    ParamKind::Reduction(_) => Err(Error::spanned(&p, ErrorKind::ReductionAsValue { name })),
                };
            }
            if self.call_stack.is_empty() && name == self.index_name {
                return Err(Error::spanned(&p, ErrorKind::IndexAsValue { index: name }));
            }
            if is_constant_name(&name) {
                return Ok(Value::Scalar(self.constant(ident)));
            }
            return Err(Error::spanned(&p, ErrorKind::UnknownName { name }));
        }
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).skip_while(|s| *s == "std" || *s == "core").collect();
        let constant = match segs.as_slice() {
            [t, "consts", c] => ScalarType::from_name(t).filter(|t| t.is_float()).zip(float_const(c)),
            [t, c] => ScalarType::from_name(t).and_then(|t| type_const(t, c).map(|v| (t, v))),
            _ => None,
        };
        let Some((ty, value)) = constant else {
            return Err(Error::spanned(&p, ErrorKind::UnknownName { name: path_name(&p.path) }));
        };
        Ok(Value::Scalar(Expr { ty: self.types.known(ty), kind: ExprKind::Lit(value) }))
    }

    /// `idx.level()` / `idx.levels()`: the level's place in a column sweep, the levels swept.
    fn level(&mut self, m: &syn::ExprMethodCall) -> Result<TExpr, Error> {
        let what = format!("{}.{}()", self.index_name, m.method);
        if self.sweep.is_none() {
            return Err(Error::spanned(m, ErrorKind::NotASweep { what }));
        }
        if !m.args.is_empty() || m.turbofish.is_some() {
            return Err(Error::spanned(m, ErrorKind::Arity { name: what, expected: 1, got: m.args.len() + 1 }));
        }
        let kind = if m.method == "level" { ExprKind::Level } else { ExprKind::Levels };
        Ok(Expr { ty: self.types.known(ScalarType::I32), kind })
    }

    /// Whether `e` is the point index (never inside a helper, which cannot see it).
    fn is_index_expr(&self, e: &syn::Expr) -> bool {
        self.call_stack.is_empty() && matches!(e, syn::Expr::Path(p) if p.path.is_ident(&self.index_name))
    }

    /// The offset of `e` when it names a point: the index (0) or a local bound to a point
    /// (`let below = idx.ix::<0, 0, -1>();`).
    fn point_base(&self, e: &syn::Expr) -> Option<[i32; 3]> {
        if self.is_index_expr(e) {
            return Some([0; 3]);
        }
        match e {
            syn::Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string()) {
                Some(Binding::Point(o)) => Some(o),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether `e` is a point: the index, a named point, or either shifted (`.ix::<..>()`).
    pub(super) fn is_point_expr(&self, e: &syn::Expr) -> bool {
        match e {
            syn::Expr::MethodCall(m) => m.method == "ix" && self.point_base(&m.receiver).is_some(),
            e => self.point_base(e).is_some(),
        }
    }

    /// Whether `e` names a field parameter of the stencil, or an element of an array of them
    /// (`q[2]` of `q: [&Field3<f64>; 5]`).
    pub(super) fn is_field(&self, e: &syn::Expr) -> bool {
        match e {
            syn::Expr::Path(p) => p.path.get_ident().is_some_and(|i| {
                self.lookup(&i.to_string()).is_none()
                    && matches!(self.param(&i.to_string()), Some((_, p)) if matches!(p.kind, ParamKind::Field(_)))
            }),
            // `q[2]` (a member), not `q[idx]` (the members' values at a point).
            syn::Expr::Index(ix) => self.field_array(&ix.expr).is_some() && self.group_at(ix).is_none(),
            _ => false,
        }
    }

    /// The name and elements of `e` if it names an array of fields.
    fn field_array(&self, e: &syn::Expr) -> Option<(String, Vec<usize>)> {
        let syn::Expr::Path(p) = e else { return None };
        let name = p.path.get_ident()?.to_string();
        let elems = self.param_array(&name)?;
        matches!(self.params[elems[0]].kind, ParamKind::Field(_)).then(|| (name, elems.to_vec()))
    }

    /// `f[idx]` / `f[idx.ix::<..>()]` read as a value (`f` a field parameter).
    pub(super) fn field_load(&mut self, ix: &syn::ExprIndex) -> Result<TExpr, Error> {
        let (field, offset) = self.field_access(ix)?;
        self.load_at(field, offset, &ix.index)
    }

    /// `q[idx]` / `q[idx.ix(..)]` of a group of fields `q`: the array of its members' values at
    /// that point.
    pub(super) fn group_load(&mut self, ix: &syn::ExprIndex) -> Result<Vec<TExpr>, Error> {
        let (name, members) = self.group_at(ix).expect("a group indexed at a point");
        let offset = self.point_offset(&ix.index, &name)?;
        members.into_iter().map(|field| self.load_at(field, offset, &ix.index)).collect()
    }

    /// `ix` if it is a group of fields indexed at a point (`q[idx]`, `q[idx.ix(..)]`, a named
    /// point): the group's name and members.
    pub(super) fn group_at(&self, ix: &syn::ExprIndex) -> Option<(String, Vec<usize>)> {
        if self.is_point_expr(&ix.index) {
            self.field_array(&ix.expr)
        } else {
            None
        }
    }

    /// Field `field` read at `offset` (`at`: the index expression, for errors): refused for a
    /// written field anywhere but the point itself (or, in a sweep, a level it has passed).
    fn load_at(&mut self, field: ParamId, offset: [i32; 3], at: &syn::Expr) -> Result<TExpr, Error> {
        let ParamKind::Field(fp) = self.params[field].kind else { unreachable!("a field parameter") };
        if fp.writable && offset != [0; 3] {
            let (name, shown) = (self.param_display(field), offset[..self.dim].to_vec());
            let kind = match self.sweep {
                Some(order) if order.has_passed(self.dim, offset) => None,
                Some(order) => {
                    let mut behind = vec![0; self.dim];
                    behind[self.dim - 1] = -order.step();
                    let list = behind.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
                    let allowed = format!("{name}[{}.ix({list})]", self.index_name);
                    Some(ErrorKind::SweepRacyRead { field: name, offset: shown, allowed })
                }
                None => Some(ErrorKind::RacyRead { field: name, offset: shown }),
            };
            if let Some(kind) = kind {
                return Err(Error::spanned(at, kind));
            }
        }
        let ty = self.types.known(fp.elem);
        Ok(Expr { ty, kind: ExprKind::Load { field, offset } })
    }

    /// Resolves `f[idx]`, `f[idx.ix::<a, b, c>()]` or `f[idx.ix(a, b, c)]` to a field and an
    /// offset. Each offset is a compile-time integer: a literal, a `const`, the variable of a
    /// constant `for` loop (`for r in 1..=4 { u[idx.ix(r, 0, 0)] }`), or `+ - *` of those.
    pub(super) fn field_access(&self, ix: &syn::ExprIndex) -> Result<(ParamId, [i32; 3]), Error> {
        let (name, field) = match &*ix.expr {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().expect("ident").to_string();
                match self.param(&name) {
                    Some((id, p)) if matches!(p.kind, ParamKind::Field(_)) => (name, id),
                    _ => {
                        return Err(unsupported(
                            &ix.expr,
                            &format!("indexing `{name}` (only field parameters can be indexed)"),
                        ))
                    }
                }
            }
            // `q[v][idx]`: element `v` (a compile-time integer) of an array of fields.
            syn::Expr::Index(inner) if self.field_array(&inner.expr).is_some() => {
                let (_, elems) = self.field_array(&inner.expr).expect("checked");
                let id = elems[self.element_index(inner, elems.len())?];
                (self.param_display(id), id)
            }
            other => return Err(unsupported(other, "indexing this expression (only field parameters can be indexed)")),
        };
        Ok((field, self.point_offset(&ix.index, &name)?))
    }

    /// The offset of a point expression indexing field `name`: `idx` (0), `idx.ix::<a, b, c>()`
    /// or `idx.ix(a, b, c)`, or a named point (`let below = idx.ix::<0, 0, -1>();`), alone or
    /// shifted further (`below.ix::<1, 0, 0>()`).
    pub(super) fn point_offset(&self, index: &syn::Expr, name: &str) -> Result<[i32; 3], Error> {
        let bad_index =
            || Error::spanned(index, ErrorKind::BadIndex { field: name.to_string(), index: self.index_name.clone() });
        let mut offset;
        match index {
            e if self.point_base(e).is_some() => offset = self.point_base(e).expect("checked"),
            syn::Expr::MethodCall(m) if m.method == "ix" && self.point_base(&m.receiver).is_some() => {
                let base = self.point_base(&m.receiver).expect("checked");
                // `ix::<a, b, c>()` or `ix(a, b, c)`, not both.
                let (args, spanned): (Vec<Option<i64>>, Vec<&dyn quote::ToTokens>) =
                    match (&m.turbofish, m.args.is_empty()) {
                        (Some(t), true) => t
                            .args
                            .iter()
                            .map(|arg| {
                                let v = match arg {
                                    syn::GenericArgument::Const(e) => self.const_int(e),
                                    // A bare name parses as a type argument.
                                    syn::GenericArgument::Type(syn::Type::Path(p)) if p.qself.is_none() => self
                                        .const_int(&syn::Expr::Path(syn::ExprPath {
                                            attrs: Vec::new(),
                                            qself: None,
                                            path: p.path.clone(),
                                        })),
                                    _ => None,
                                };
                                (v, arg as &dyn quote::ToTokens)
                            })
                            .unzip(),
                        (None, false) => m.args.iter().map(|e| (self.const_int(e), e as &dyn quote::ToTokens)).unzip(),
                        (None, true) => (Vec::new(), Vec::new()),
                        (Some(_), false) => return Err(Error::spanned(&m.args, ErrorKind::OffsetNotLiteral)),
                    };
                if !args.is_empty() && args.len() != self.dim {
                    let at: &dyn quote::ToTokens = match &m.turbofish {
                        Some(t) => t,
                        None => &m.args,
                    };
                    return Err(Error::spanned(&at, ErrorKind::OffsetCount { got: args.len(), dim: self.dim }));
                }
                offset = base;
                for (a, (value, arg)) in args.into_iter().zip(spanned).enumerate() {
                    let value = value.ok_or_else(|| Error::spanned(&arg, ErrorKind::OffsetNotLiteral))?;
                    let value = i32::try_from(value).map_err(|_| Error::spanned(&arg, ErrorKind::OffsetNotLiteral))?;
                    offset[a] = offset[a]
                        .checked_add(value)
                        .ok_or_else(|| Error::spanned(&arg, ErrorKind::OffsetNotLiteral))?;
                }
            }
            syn::Expr::MethodCall(m) if self.point_base(&m.receiver).is_some() => return Err(bad_index()),
            _ => return Err(bad_index()),
        }
        Ok(offset)
    }

    pub(super) fn binary(&mut self, op: BinOp, l: TExpr, r: TExpr, span: Span) -> Result<TExpr, Error> {
        use BinOp::*;
        let sym = op.symbol().to_string();
        let ty = match op {
            Add | Sub | Mul | Div | Rem => {
                self.types.unify(l.ty, r.ty, span)?;
                self.types.require(l.ty, Require::Numeric { op: sym }, span);
                l.ty
            }
            BitAnd | BitOr | BitXor => {
                self.types.unify(l.ty, r.ty, span)?;
                self.types.require(l.ty, Require::IntOrBool { op: sym }, span);
                l.ty
            }
            Shl | Shr => {
                self.types.require(l.ty, Require::Int { op: sym.clone() }, span);
                self.types.require(r.ty, Require::Int { op: sym }, span);
                l.ty
            }
            And | Or => {
                let b = self.types.known(ScalarType::Bool);
                self.types.unify(b, l.ty, span)?;
                self.types.unify(b, r.ty, span)?;
                b
            }
            Eq | Ne | Lt | Le | Gt | Ge => {
                self.types.unify(l.ty, r.ty, span)?;
                self.types.known(ScalarType::Bool)
            }
        };
        Ok(Expr { ty, kind: ExprKind::Binary(op, Box::new(l), Box::new(r)) })
    }

    fn math_call(
        &mut self,
        func: MathFn,
        args: Vec<TExpr>,
        owner: Option<ScalarType>,
        span: Span,
    ) -> Result<TExpr, Error> {
        if args.len() != func.arity() {
            return Err(Error::new(
                span,
                ErrorKind::Arity { name: func.rust_name().into(), expected: func.arity(), got: args.len() },
            ));
        }
        let ty = args[0].ty;
        if let Some(owner) = owner {
            let o = self.types.known(owner);
            self.types.unify(o, ty, span)?;
        }
        for (i, a) in args.iter().enumerate().skip(1) {
            if func == MathFn::Powi && i == 1 {
                let int = self.types.known(ScalarType::I32);
                self.types.unify(int, a.ty, span)?;
            } else {
                self.types.unify(ty, a.ty, span)?;
            }
        }
        let op = func.rust_name().to_string();
        let req = if func.accepts_int() { Require::Numeric { op } } else { Require::Float { op } };
        self.types.require(ty, req, span);
        Ok(Expr { ty, kind: ExprKind::Call(func, args) })
    }
}

fn binary_op(op: &syn::BinOp) -> Option<BinOp> {
    use BinOp::*;
    Some(match op {
        syn::BinOp::Add(_) => Add,
        syn::BinOp::Sub(_) => Sub,
        syn::BinOp::Mul(_) => Mul,
        syn::BinOp::Div(_) => Div,
        syn::BinOp::Rem(_) => Rem,
        syn::BinOp::And(_) => And,
        syn::BinOp::Or(_) => Or,
        syn::BinOp::BitAnd(_) => BitAnd,
        syn::BinOp::BitOr(_) => BitOr,
        syn::BinOp::BitXor(_) => BitXor,
        syn::BinOp::Shl(_) => Shl,
        syn::BinOp::Shr(_) => Shr,
        syn::BinOp::Eq(_) => Eq,
        syn::BinOp::Ne(_) => Ne,
        syn::BinOp::Lt(_) => Lt,
        syn::BinOp::Le(_) => Le,
        syn::BinOp::Gt(_) => Gt,
        syn::BinOp::Ge(_) => Ge,
        _ => return None,
    })
}

/// `PI`, `E`, ... of `f32::consts` / `f64::consts`.
fn float_const(name: &str) -> Option<Literal> {
    use std::{f32::consts as s, f64::consts as d};
    let (v, single) = match name {
        "PI" => (d::PI, s::PI),
        "TAU" => (d::TAU, s::TAU),
        "E" => (d::E, s::E),
        "SQRT_2" => (d::SQRT_2, s::SQRT_2),
        "FRAC_1_SQRT_2" => (d::FRAC_1_SQRT_2, s::FRAC_1_SQRT_2),
        "FRAC_PI_2" => (d::FRAC_PI_2, s::FRAC_PI_2),
        "FRAC_PI_4" => (d::FRAC_PI_4, s::FRAC_PI_4),
        "LN_2" => (d::LN_2, s::LN_2),
        "LN_10" => (d::LN_10, s::LN_10),
        _ => return None,
    };
    Some(Literal::Float(v, single))
}

/// `f32::MAX`, `f64::EPSILON`, `i32::MAX`, ...
fn type_const(ty: ScalarType, name: &str) -> Option<Literal> {
    let f32c = |v: f32| Literal::Float(v as f64, v);
    let f64c = |v: f64| Literal::Float(v, v as f32);
    Some(match (ty, name) {
        (ScalarType::F32, "MAX") => f32c(f32::MAX),
        (ScalarType::F32, "MIN") => f32c(f32::MIN),
        (ScalarType::F32, "EPSILON") => f32c(f32::EPSILON),
        (ScalarType::F32, "MIN_POSITIVE") => f32c(f32::MIN_POSITIVE),
        (ScalarType::F32 | ScalarType::F64, "INFINITY") => f64c(f64::INFINITY),
        (ScalarType::F32 | ScalarType::F64, "NEG_INFINITY") => f64c(f64::NEG_INFINITY),
        (ScalarType::F64, "MAX") => f64c(f64::MAX),
        (ScalarType::F64, "MIN") => f64c(f64::MIN),
        (ScalarType::F64, "EPSILON") => f64c(f64::EPSILON),
        (ScalarType::F64, "MIN_POSITIVE") => f64c(f64::MIN_POSITIVE),
        (ScalarType::I32, "MAX") => Literal::Int(i32::MAX as i64),
        (ScalarType::I32, "MIN") => Literal::Int(i32::MIN as i64),
        (ScalarType::U32, "MAX") => Literal::Int(u32::MAX as i64),
        (ScalarType::U32, "MIN") => Literal::Int(0),
        _ => return None,
    })
}

/// Whether `name` is written as a constant is (`RD`, `P0`, `G_EARTH`): upper case, digits and
/// underscores, starting with a letter.
fn is_constant_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
