//! Point functions: `let flux = |p: Idx3| face(q[p.ix::<-1, 0, 0>()], q[p]);` in a stencil body
//! defines values at every point from the stencil's fields and scalars alone; `flux(idx)` and
//! `flux(idx.ix::<-1, 0, 0>())` are two of them. The body is lowered once, for the point itself
//! ([`crate::ir::PointFn`]); a call is its outputs at the call's offset
//! ([`crate::ir::ExprKind::PointValue`]). A point function may call those defined before it, at
//! points relative to its own.

use super::types::Var;
use super::values::Value;
use super::{tokens, Binding, Lowerer};
use crate::frontend::error::{Error, ErrorKind};
use crate::ir::{visit_exprs, Expr, ExprKind, LocalId, ParamKind, Stmt};
use std::collections::HashMap;
use syn::spanned::Spanned;

/// A point function while the stencil is lowered.
pub(super) struct PendingPointFn {
    /// The closure's name.
    pub name: String,
    /// Its statements, for the point itself.
    pub body: Vec<Stmt<Var>>,
    /// The locals that hold its value, with the value's structure.
    pub value: Binding,
    /// The closure's first and last tokens, for errors found once types are known.
    pub span: (proc_macro2::Span, proc_macro2::Span),
}

impl Lowerer {
    /// `let name = |p: IdxN| body;`: lowers `body` once for the point itself, with the closure's
    /// parameter as the point index, seeing the stencil's parameters and constants but none of
    /// its locals.
    pub(super) fn lower_point_fn(&mut self, local: &syn::PatIdent, c: &syn::ExprClosure) -> Result<(), Error> {
        let fn_name = local.ident.to_string();
        let form = |at: &dyn quote::ToTokens, what: &str| {
            Error::spanned(&at, ErrorKind::PointFnForm { name: fn_name.clone(), what: what.to_string() })
        };
        if self.sweep.is_some() {
            return Err(Error::spanned(c, ErrorKind::PointFnInSweep { name: fn_name }));
        }
        if self.point_fn.is_some() || !self.call_stack.is_empty() {
            return Err(Error::spanned(c, ErrorKind::PointFnNested { name: fn_name }));
        }
        if let Some(m) = &local.mutability {
            return Err(form(m, "leave out `mut`: a point function is not assigned"));
        }
        if let Some(m) = &c.movability {
            return Err(form(m, "`static` closures are not point functions"));
        }
        if let Some(a) = &c.asyncness {
            return Err(form(a, "a point function cannot be `async`"));
        }
        if let Some(m) = &c.capture {
            return Err(form(m, "leave out `move`: a point function reads the stencil's fields where it is evaluated"));
        }
        if let syn::ReturnType::Type(arrow, ty) = &c.output {
            return Err(form(&quote::quote!(#arrow #ty), "leave out the return type: it is the body's"));
        }
        if c.inputs.len() != 1 {
            return Err(form(&c.inputs, "a point function takes one parameter, the point: `|p: Idx3| ...`"));
        }
        let (param, ty) = match &c.inputs[0] {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.mutability.is_none() && p.subpat.is_none() => {
                (&p.ident, None)
            }
            syn::Pat::Type(t) => match &*t.pat {
                syn::Pat::Ident(p) if p.by_ref.is_none() && p.mutability.is_none() && p.subpat.is_none() => {
                    (&p.ident, Some(&*t.ty))
                }
                other => return Err(form(other, "the parameter is a plain name: `|p: Idx3| ...`")),
            },
            other => return Err(form(other, "the parameter is a plain name: `|p: Idx3| ...`")),
        };
        let index_type = format!("Idx{}", self.dim);
        if let Some(ty) = ty {
            if tokens(ty).replace(' ', "") != index_type {
                return Err(form(
                    ty,
                    &format!(
                        "a closure in a stencil is a point function, whose parameter is a point of the \
                         stencil (`|p: {index_type}| ...`); for a function of values, write a \
                         `#[stencil_fn]` helper"
                    ),
                ));
            }
        }
        // The body sees the stencil's parameters, compile-time constants and the point functions
        // defined before it; a name the stencil binds to anything else (a local, which may hide a
        // parameter or a constant) is a capture, refused where it is used. Its parameter is the
        // point index, and hides the stencil's parameter of its name.
        if self.params.iter().any(|p| *param == p.name) || self.param_arrays.contains_key(&param.to_string()) {
            return Err(form(
                param,
                &format!("`{param}` names a parameter of the stencil: give the point another name"),
            ));
        }
        let mut visible: HashMap<String, Binding> = HashMap::new();
        for scope in &self.scopes {
            for (n, b) in scope {
                let seen = match b {
                    Binding::ConstInt(_) | Binding::PointFn(_) => b.clone(),
                    _ => Binding::Captured,
                };
                visible.insert(n.clone(), seen);
            }
        }
        visible.remove(&param.to_string());
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![visible]);
        let saved_index = std::mem::replace(&mut self.index_name, param.to_string());
        let saved_name = self.point_fn.replace(fn_name.clone());
        let mut body = Vec::new();
        let lowered = self.lower_value(&c.body, &mut body);
        self.point_fn = saved_name;
        self.index_name = saved_index;
        self.scopes = saved_scopes;
        let value = lowered.map_err(|e| match e.kind {
            // `|x| x * x`: a closure of a value, not of a point.
            ErrorKind::IndexAsValue { index } if *param == index && ty.is_none() => Error {
                kind: ErrorKind::PointFnForm {
                    name: fn_name.clone(),
                    what: format!(
                        "a closure in a stencil is a point function, whose parameter is a point of the stencil \
                         (`|p: {index_type}| ...`), not a value; for a function of values, write a \
                         `#[stencil_fn]` helper"
                    ),
                },
                ..e
            },
            kind => Error { kind, ..e },
        })?;
        let value = self.declare_value(&fn_name, value, false, &mut body);
        self.check_point_fn_body(&fn_name, &body, c)?;
        self.point_fns.push(PendingPointFn {
            name: fn_name.clone(),
            body,
            value,
            span: (c.or1_token.span, c.body.span()),
        });
        self.bind(fn_name, Binding::PointFn(self.point_fns.len() - 1));
        Ok(())
    }

    /// Refuses a point function body that writes or reads a written field: its values must be
    /// the same wherever and however often it is evaluated.
    fn check_point_fn_body(&self, name: &str, body: &[Stmt<Var>], c: &syn::ExprClosure) -> Result<(), Error> {
        fn writes(stmts: &[Stmt<Var>]) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::Store { .. } | Stmt::Fold { .. } => true,
                Stmt::If { then_body, else_body, .. } => writes(then_body) || writes(else_body),
                Stmt::Let { .. } | Stmt::Assign { .. } => false,
            })
        }
        if writes(body) {
            return Err(Error::spanned(&c.body, ErrorKind::PointFnWrites { name: name.to_string() }));
        }
        let mut written = None;
        visit_exprs(body, &mut |e| {
            if let ExprKind::Load { field, .. } = e.kind {
                if matches!(self.params[field].kind, ParamKind::Field(f) if f.writable) {
                    written.get_or_insert(field);
                }
            }
        });
        if let Some(field) = written {
            let field = self.param_display(field);
            return Err(Error::spanned(&c.body, ErrorKind::PointFnReadsWritten { name: name.to_string(), field }));
        }
        Ok(())
    }

    /// How a call of a point function is written in this stencil: `idx.ix::<-1, 0>()` in 2D.
    pub(super) fn point_example(&self) -> String {
        let mut offset = vec!["0"; self.dim];
        offset[0] = "-1";
        format!("{}.ix::<{}>()", self.index_name, offset.join(", "))
    }

    /// The error for a use of `local`, a local of the stencil, inside the point function being
    /// lowered.
    pub(super) fn captured(&self, at: &dyn quote::ToTokens, local: &str) -> Error {
        let name = self.point_fn.clone().unwrap_or_default();
        Error::spanned(&at, ErrorKind::PointFnCapture { name, local: local.to_string() })
    }

    /// `name(point)`: the outputs of point function `func` at the point's offset.
    pub(super) fn call_point_fn(&mut self, c: &syn::ExprCall, func: usize) -> Result<Value, Error> {
        let name = self.point_fns[func].name.clone();
        if c.args.len() != 1 {
            let example = self.point_example();
            return Err(Error::spanned(c, ErrorKind::PointFnCall { name, example }));
        }
        let offset = self.point_offset(&c.args[0], &name).map_err(|e| match e.kind {
            ErrorKind::BadIndex { .. } => {
                let example = self.point_example();
                Error::spanned(&c.args[0], ErrorKind::PointFnCall { name: name.clone(), example })
            }
            _ => e,
        })?;
        let value = self.point_fns[func].value.clone();
        let mut output = 0;
        Ok(self.point_value(&value, func, offset, &mut output))
    }

    /// The value of structure `binding` whose scalars are outputs `output..` of `func` at `offset`.
    fn point_value(&self, binding: &Binding, func: usize, offset: [i32; 3], output: &mut usize) -> Value {
        let mut leaf = |id: LocalId| {
            let e = Expr { ty: self.locals[id].1, kind: ExprKind::PointValue { func, output: *output, offset } };
            *output += 1;
            e
        };
        match binding {
            Binding::Local(id, _) => Value::Scalar(leaf(*id)),
            Binding::Array(ids, _) => Value::Array(ids.iter().map(|&id| leaf(id)).collect()),
            Binding::Tuple(parts) => {
                Value::Tuple(parts.iter().map(|b| self.point_value(b, func, offset, output)).collect())
            }
            Binding::ConstInt(_) | Binding::PointFn(_) | Binding::Captured | Binding::Point(_) => {
                unreachable!("a point function's value is held in locals")
            }
        }
    }
}

/// The locals of a point function's value, in the order of its outputs.
pub(super) fn output_locals(binding: &Binding, out: &mut Vec<LocalId>) {
    match binding {
        Binding::Local(id, _) => out.push(*id),
        Binding::Array(ids, _) => out.extend(ids),
        Binding::Tuple(parts) => parts.iter().for_each(|b| output_locals(b, out)),
        Binding::ConstInt(_) | Binding::PointFn(_) | Binding::Captured | Binding::Point(_) => {
            unreachable!("a point function's value is held in locals")
        }
    }
}

/// Refuses integer `/` and `%` in a point function's (typed) body: the CPU nest also computes it
/// at points no call reads (the edges of a block's widened rows), where a zero divisor would
/// panic although the stencil never divides by it.
pub(super) fn check_integer_division(f: &PendingPointFn, body: &[crate::ir::Stmt]) -> Result<(), Error> {
    let mut divides = false;
    visit_exprs(body, &mut |e| {
        if let ExprKind::Binary(crate::ir::BinOp::Div | crate::ir::BinOp::Rem, a, _) = &e.kind {
            divides |= a.ty.is_int();
        }
    });
    if divides {
        let what = "it divides integers (`/` or `%`); a point function is also computed at points no call reads \
                    (the edges of a block), where a zero divisor would panic: divide in the stencil's body, or in \
                    floating point"
            .to_string();
        let (span, end) = f.span;
        return Err(Error { span, end, kind: ErrorKind::PointFnForm { name: f.name.clone(), what } });
    }
    Ok(())
}
