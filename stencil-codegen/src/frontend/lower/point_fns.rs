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

/// A point function while the stencil is lowered.
pub(super) struct PendingPointFn {
    /// The closure's name.
    pub name: String,
    /// Its statements, for the point itself.
    pub body: Vec<Stmt<Var>>,
    /// The locals that hold its value, with the value's structure.
    pub value: Binding,
}

impl Lowerer {
    /// `let name = |p: IdxN| body;`: lowers `body` once for the point itself, with the closure's
    /// parameter as the point index, seeing the stencil's parameters and constants but none of
    /// its locals.
    pub(super) fn lower_point_fn(&mut self, name: &syn::Ident, c: &syn::ExprClosure) -> Result<(), Error> {
        let fn_name = name.to_string();
        let form = |at: &dyn quote::ToTokens, what: &str| {
            Error::spanned(&at, ErrorKind::PointFnForm { name: fn_name.clone(), what: what.to_string() })
        };
        if self.sweep.is_some() {
            return Err(Error::spanned(c, ErrorKind::PointFnInSweep { name: fn_name }));
        }
        if self.point_fn_depth > 0 || !self.call_stack.is_empty() {
            return Err(Error::spanned(c, ErrorKind::PointFnNested { name: fn_name }));
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
        // defined before it, not its locals; its parameter is the point index.
        let constants: HashMap<String, Binding> = self
            .scopes
            .iter()
            .flat_map(|s| s.iter())
            .filter(|(_, b)| matches!(b, Binding::ConstInt(_) | Binding::PointFn(_)))
            .map(|(n, b)| (n.clone(), b.clone()))
            .collect();
        let outer: HashMap<String, Binding> = self
            .scopes
            .iter()
            .flat_map(|s| s.iter())
            .filter(|(_, b)| !matches!(b, Binding::ConstInt(_) | Binding::PointFn(_)))
            .map(|(n, b)| (n.clone(), b.clone()))
            .collect();
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![constants]);
        let saved_index = std::mem::replace(&mut self.index_name, param.to_string());
        self.point_fn_depth += 1;
        let mut body = Vec::new();
        let lowered = self.lower_value(&c.body, &mut body);
        self.point_fn_depth -= 1;
        self.index_name = saved_index;
        self.scopes = saved_scopes;
        let value = lowered.map_err(|e| match e.kind {
            ErrorKind::UnknownName { name } if outer.contains_key(&name) => {
                Error { kind: ErrorKind::PointFnCapture { name: fn_name.clone(), local: name }, ..e }
            }
            kind => Error { kind, ..e },
        })?;
        let value = self.declare_value(&fn_name, value, false, &mut body);
        self.check_point_fn_body(&fn_name, &body, c)?;
        self.point_fns.push(PendingPointFn { name: fn_name.clone(), body, value });
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

    /// `name(point)`: the outputs of point function `func` at the point's offset.
    pub(super) fn call_point_fn(&mut self, c: &syn::ExprCall, func: usize) -> Result<Value, Error> {
        let name = self.point_fns[func].name.clone();
        if c.args.len() != 1 {
            let index = self.index_name.clone();
            return Err(Error::spanned(c, ErrorKind::PointFnCall { name, index }));
        }
        let offset = self.point_offset(&c.args[0], &name).map_err(|e| match e.kind {
            ErrorKind::BadIndex { .. } => {
                let index = self.index_name.clone();
                Error::spanned(&c.args[0], ErrorKind::PointFnCall { name: name.clone(), index })
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
            Binding::ConstInt(_) | Binding::PointFn(_) => unreachable!("a point function's value is held in locals"),
        }
    }
}

/// The locals of a point function's value, in the order of its outputs.
pub(super) fn output_locals(binding: &Binding, out: &mut Vec<LocalId>) {
    match binding {
        Binding::Local(id, _) => out.push(*id),
        Binding::Array(ids, _) => out.extend(ids),
        Binding::Tuple(parts) => parts.iter().for_each(|b| output_locals(b, out)),
        Binding::ConstInt(_) | Binding::PointFn(_) => unreachable!("a point function's value is held in locals"),
    }
}
