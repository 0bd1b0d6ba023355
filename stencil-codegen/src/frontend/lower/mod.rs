//! Lowering: `syn::ItemFn` → [`StencilIr`]. Checks the signature, walks the body, unrolls
//! constant loops, scalarises small arrays and tuples (`values`), inlines `#[stencil_fn]`
//! helpers ([`helpers`]), hoists statement-carrying `if`/block expressions, infers types, and
//! rejects everything that could race or could not run on a GPU.

mod expr;
pub mod generic;
pub mod helpers;
mod point_fns;
mod signature;
mod syntax;
mod types;
mod values;

use crate::frontend::error::{Error, ErrorKind};
use crate::ir::{ExprKind, Local, LocalId, Param, ParamKind, StencilIr, Stmt, Sweep, SweepOrder};
use std::collections::{HashMap, HashSet};
use syn::spanned::Spanned;
use types::{Types, Var};
use values::Value;

pub use crate::limits::MAX_ARRAY_LEN;
use crate::limits::MAX_UNROLL;

pub use signature::UserParam;

/// The parameters of a `#[stencil]` function as it declares them, each with the IR parameters
/// it stands for (an array parameter stands for one per element).
pub fn declared_params(item: &syn::ItemFn) -> Result<Vec<UserParam>, Error> {
    Ok(signature::lower_signature(item)?.groups)
}

/// Lowers a `#[stencil]` function that calls no helper to the IR.
pub fn lower(item: &syn::ItemFn) -> Result<StencilIr, Error> {
    lower_with_helpers(item, &[])
}

/// The element type of every field parameter, if they share one.
fn field_element(params: &[Param]) -> Option<crate::ir::ScalarType> {
    let mut elems = params.iter().filter_map(|p| match &p.kind {
        crate::ir::ParamKind::Field(f) => Some(f.elem),
        _ => None,
    });
    let first = elems.next()?;
    elems.all(|e| e == first).then_some(first)
}

/// Lowers a `#[stencil]` function to the IR, inlining calls of the `#[stencil_fn]` helpers in
/// `helpers` (the helpers a call reaches, directly or through other helpers).
pub fn lower_with_helpers(item: &syn::ItemFn, helpers: &[syn::ItemFn]) -> Result<StencilIr, Error> {
    Ok(lower_with_constants(item, helpers)?.0)
}

/// A constant of the stencil's module (`RD` in `p / (RD * t)`) that the stencil reads: the IR
/// reads it as the scalar parameter `param`, which the functor sets to the constant's value at
/// each launch. The IR's parameters end with these, after the declared ones.
#[derive(Clone, Debug)]
pub struct Constant {
    /// The IR parameter that holds the value.
    pub param: String,
    /// The constant's name, with the span of its first use.
    pub ident: proc_macro2::Ident,
}

/// [`lower_with_helpers`], and the module constants the stencil reads (the last parameters of
/// its IR, in order).
pub fn lower_with_constants(item: &syn::ItemFn, helpers: &[syn::ItemFn]) -> Result<(StencilIr, Vec<Constant>), Error> {
    let sig = signature::lower_signature(item)?;
    let mut cx = Lowerer::new(sig.dim, sig.index_name.clone(), sig.params, helpers);
    cx.sweep = sig.sweep;
    cx.element = field_element(&cx.params);
    for p in &cx.params {
        cx.used_names.insert(p.name.clone());
    }
    for g in sig.groups.iter().filter(|g| g.array) {
        cx.used_names.insert(g.name.clone());
        cx.param_arrays.insert(g.name.clone(), g.params.clone().collect());
    }
    cx.used_names.insert(sig.index_name.clone());
    let mut body = Vec::new();
    let mut carried = Vec::new();
    let stmts = &item.block.stmts;
    for (i, stmt) in stmts.iter().enumerate() {
        match carry_attribute(stmt) {
            Some(attr) if sig.sweep.is_none() => {
                return Err(Error::spanned(attr, ErrorKind::NotASweep { what: "#[carry]".into() }))
            }
            Some(attr) if !body.is_empty() => return Err(Error::spanned(attr, ErrorKind::CarryPlacement)),
            Some(_) => {
                let syn::Stmt::Local(local) = stmt else { unreachable!("carry_attribute finds `let`s") };
                let from = carried.len();
                cx.lower_let(local, &mut carried)?;
                check_carried(&local.pat, &carried[from..])?;
            }
            None => cx.lower_stmt(stmt, i + 1 == stmts.len(), &mut body)?,
        }
    }
    let writes = cx.params.iter().any(|p| matches!(p.kind, ParamKind::Field(f) if f.writable));
    if !writes && !cx.params.iter().any(|p| matches!(p.kind, ParamKind::Reduction(_))) {
        return Err(Error::spanned(&item.sig.ident, ErrorKind::NoOutput));
    }
    if !cx.params.iter().any(|p| matches!(p.kind, ParamKind::Field(_))) {
        return Err(Error::spanned(&item.sig.ident, ErrorKind::NoField));
    }
    let resolved = cx.types.finish()?;
    for (param, var, _) in &cx.constants {
        cx.params[*param].kind = ParamKind::Scalar(resolved.get(*var));
    }
    let constants = cx
        .constants
        .iter()
        .map(|(p, _, ident)| Constant { param: cx.params[*p].name.clone(), ident: ident.clone() })
        .collect();
    let mut resolve = |v: Var| -> Result<_, Error> { Ok(resolved.get(v)) };
    let body = body.into_iter().map(|s| s.map_types(&mut resolve)).collect::<Result<Vec<_>, _>>()?;
    let locals = cx.locals.into_iter().map(|(name, v, _)| Local { name, ty: resolved.get(v) }).collect();
    let point_fns = std::mem::take(&mut cx.point_fns)
        .into_iter()
        .map(|f| {
            let mut outputs = Vec::new();
            point_fns::output_locals(&f.value, &mut outputs);
            let body = f.body.iter().cloned().map(|s| s.map_types(&mut resolve)).collect::<Result<Vec<_>, _>>()?;
            point_fns::check_integer_division(&f, &body)?;
            Ok(crate::ir::PointFn { name: f.name, body, outputs })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let sweep = match sig.sweep {
        Some(order) => {
            let carried = carried.into_iter().map(|s| s.map_types(&mut resolve)).collect::<Result<Vec<_>, _>>()?;
            Some(Sweep { order, carried })
        }
        None => None,
    };
    let ir = StencilIr {
        name: item.sig.ident.to_string(),
        dim: sig.dim,
        index_name: sig.index_name,
        params: cx.params,
        locals,
        body,
        sweep,
        point_fns,
    };
    Ok((ir, constants))
}

/// The `#[carry]` attribute of a `let` statement, if it has one.
fn carry_attribute(stmt: &syn::Stmt) -> Option<&syn::Attribute> {
    match stmt {
        syn::Stmt::Local(local) => local.attrs.iter().find(|a| a.path().is_ident("carry")),
        _ => None,
    }
}

/// Refuses a carried local whose initial value reads a field or the level: it is computed once
/// per column, before the first level.
fn check_carried(pat: &syn::Pat, stmts: &[Stmt<Var>]) -> Result<(), Error> {
    fn writes(stmts: &[Stmt<Var>]) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::Store { .. } | Stmt::Fold { .. } => true,
            Stmt::If { then_body, else_body, .. } => writes(then_body) || writes(else_body),
            Stmt::Let { .. } | Stmt::Assign { .. } => false,
        })
    }
    let mut per_point = writes(stmts);
    crate::ir::visit_exprs(stmts, &mut |e| {
        per_point |= matches!(e.kind, ExprKind::Load { .. } | ExprKind::Level | ExprKind::Levels)
    });
    if per_point {
        let name = match pat {
            syn::Pat::Ident(p) => p.ident.to_string(),
            syn::Pat::Type(t) => tokens(&t.pat).replace("mut ", ""),
            other => tokens(other),
        };
        return Err(Error::spanned(pat, ErrorKind::CarryInit { name }));
    }
    Ok(())
}

/// What a name in scope stands for.
#[derive(Clone, Debug)]
enum Binding {
    /// A local; `true` if declared `mut`.
    Local(LocalId, bool),
    /// A compile-time integer: the variable of an unrolled loop (fixed to one value per copy of
    /// the body) or a `const N: usize`.
    ConstInt(i64),
    /// An array scalarised into one local per element; `true` if declared `mut`.
    Array(Vec<LocalId>, bool),
    /// A tuple, one binding per element.
    Tuple(Vec<Binding>),
    /// A point function (`let flux = |p: Idx3| ...;`): its index in `Lowerer::point_fns`.
    PointFn(usize),
    /// Inside a point function: a name the stencil binds to a local (refused where it is used).
    Captured,
    /// A point near the stencil's (`let below = idx.ix::<0, 0, -1>();`): its offset, which the
    /// fields it indexes (`u[below]`) read at; not a value.
    Point([i32; 3]),
}

struct Lowerer {
    dim: usize,
    index_name: String,
    params: Vec<Param>,
    scopes: Vec<HashMap<String, Binding>>,
    /// Unique name, type variable, and whether it was declared by the user.
    locals: Vec<(String, Var, bool)>,
    used_names: HashSet<String>,
    types: Types,
    /// The `#[stencil_fn]` helpers calls may reach, by name.
    helpers: HashMap<String, syn::ItemFn>,
    /// Helpers being inlined, outermost first: inside one, the stencil's parameters and index
    /// are out of scope, and a call of a helper already on the stack is recursion.
    call_stack: Vec<String>,
    /// `Some` in a column sweep.
    sweep: Option<SweepOrder>,
    /// The array parameters (`w: [f64; 9]`, `q: [&Field3<f64>; 5]`): their elements' IR
    /// parameters.
    param_arrays: HashMap<String, Vec<usize>>,
    /// The point functions defined so far.
    point_fns: Vec<point_fns::PendingPointFn>,
    /// The point function whose body is being lowered (they do not nest).
    point_fn: Option<String>,
    /// The element type generic helpers are instantiated for: that of the stencil's fields (all
    /// of one type), or of the helper being checked on its own.
    element: Option<crate::ir::ScalarType>,
    /// The module constants read so far: the parameter standing for each, the type all its uses
    /// share, and its name as first written.
    constants: Vec<(usize, Var, syn::Ident)>,
}

impl Lowerer {
    fn new(dim: usize, index_name: String, params: Vec<Param>, helpers: &[syn::ItemFn]) -> Self {
        Lowerer {
            dim,
            index_name,
            params,
            scopes: vec![HashMap::new()],
            locals: Vec::new(),
            used_names: HashSet::new(),
            types: Types::default(),
            helpers: helpers.iter().map(|h| (h.sig.ident.to_string(), h.clone())).collect(),
            call_stack: Vec::new(),
            sweep: None,
            param_arrays: HashMap::new(),
            point_fns: Vec::new(),
            point_fn: None,
            element: None,
            constants: Vec::new(),
        }
    }

    /// The value of the module constant `ident` (`RD`): a scalar parameter appended to the
    /// stencil's on first use (named `const_rd`, or with a suffix if taken), whose type is what
    /// its uses make it (`f64` if nothing does); the functor passes the constant itself.
    fn constant(&mut self, ident: &syn::Ident) -> crate::ir::Expr<Var> {
        let ty = match self.constants.iter().find(|(_, _, c)| c == ident) {
            Some(&(param, var, _)) => return crate::ir::Expr { ty: var, kind: ExprKind::Scalar(param) },
            None => self.types.fresh(),
        };
        let base = format!("const_{}", ident.to_string().to_lowercase());
        let name = (0..)
            .map(|k| if k == 0 { base.clone() } else { format!("{base}_{k}") })
            .find(|n| !self.used_names.contains(n));
        let name = name.expect("a free name");
        self.used_names.insert(name.clone());
        self.params.push(Param { name, kind: ParamKind::Scalar(crate::ir::ScalarType::F64) });
        self.constants.push((self.params.len() - 1, ty, ident.clone()));
        crate::ir::Expr { ty, kind: ExprKind::Scalar(self.params.len() - 1) }
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    /// The stencil parameter `name` (none inside a helper, which sees only its own parameters).
    fn param(&self, name: &str) -> Option<(usize, &Param)> {
        if !self.call_stack.is_empty() {
            return None;
        }
        // An array parameter's elements are reached through it (`w[1]`), not by the names the IR
        // gives them (`w_1`).
        let in_array = |id: &usize| self.param_arrays.values().any(|ids| ids.contains(id));
        self.params.iter().enumerate().find(|(id, p)| p.name == name && !in_array(id))
    }

    /// How errors name parameter `id`: `q[2]` for an element of an array parameter, else its name.
    pub(super) fn param_display(&self, id: usize) -> String {
        self.param_arrays
            .iter()
            .find_map(|(name, ids)| ids.iter().position(|&i| i == id).map(|k| format!("{name}[{k}]")))
            .unwrap_or_else(|| self.params[id].name.clone())
    }

    /// The elements of the array parameter `name` (none inside a helper or where a local of
    /// that name hides it).
    fn param_array(&self, name: &str) -> Option<&[usize]> {
        if !self.call_stack.is_empty() || self.lookup(name).is_some() {
            return None;
        }
        self.param_arrays.get(name).map(Vec::as_slice)
    }

    /// Refuses a local of the stencil body named like the point index (helpers do not see the
    /// index, so their locals may take any name).
    fn not_the_index(&self, ident: &syn::Ident) -> Result<(), Error> {
        if self.call_stack.is_empty() && *ident == self.index_name {
            return Err(Error::spanned(ident, ErrorKind::ShadowsIndex { name: self.index_name.clone() }));
        }
        Ok(())
    }

    /// Binds `name` in the innermost scope.
    fn bind(&mut self, name: String, binding: Binding) {
        self.scopes.last_mut().expect("scope").insert(name, binding);
    }

    /// Declares a new local (unique name derived from `base`) and binds `base` to it.
    fn declare(&mut self, base: &str, var: Var, mutable: bool, user: bool) -> LocalId {
        let fields: Vec<&str> =
            self.params.iter().filter(|p| matches!(p.kind, ParamKind::Field(_))).map(|p| p.name.as_str()).collect();
        // A suffix skips the kernels' per-field variables (`r_out_1`: field `out`'s register);
        // other reserved forms a suffix makes (`p_1`) clash with nothing and are kept.
        let name = crate::naming::fresh_local(
            base,
            &fields,
            |n| self.used_names.contains(n),
            |n| fields.iter().any(|f| crate::naming::is_field_variable(n, f)),
        );
        self.used_names.insert(name.clone());
        self.locals.push((name, var, user));
        let id = self.locals.len() - 1;
        if user {
            self.scopes.last_mut().expect("scope").insert(base.to_string(), Binding::Local(id, mutable));
        }
        id
    }

    fn with_scope<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R, Error>) -> Result<R, Error> {
        self.scopes.push(HashMap::new());
        let r = f(self);
        self.scopes.pop();
        r
    }

    fn lower_block(&mut self, block: &syn::Block, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        self.with_scope(|cx| {
            for stmt in &block.stmts {
                cx.lower_stmt(stmt, false, out)?;
            }
            Ok(())
        })
    }

    fn lower_stmt(&mut self, stmt: &syn::Stmt, is_last: bool, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        match stmt {
            // `#[carry]` is taken off the `let`s that open a sweep's body before they get here.
            syn::Stmt::Local(_) if carry_attribute(stmt).is_some() => {
                let attr = carry_attribute(stmt).expect("checked");
                let kind = match self.sweep {
                    Some(_) => ErrorKind::CarryPlacement,
                    None => ErrorKind::NotASweep { what: "#[carry]".into() },
                };
                Err(Error::spanned(attr, kind))
            }
            syn::Stmt::Local(local) => self.lower_let(local, out),
            syn::Stmt::Item(syn::Item::Const(c)) if is_usize(&c.ty) => {
                self.not_the_index(&c.ident)?;
                let value = self
                    .const_int(&c.expr)
                    .ok_or_else(|| Error::spanned(&c.expr, ErrorKind::ArrayLength { len: None }))?;
                self.bind(c.ident.to_string(), Binding::ConstInt(value));
                Ok(())
            }
            syn::Stmt::Item(syn::Item::Const(c)) => {
                self.not_the_index(&c.ident)?;
                let var = self.declared_type(&c.ty)?;
                let init = self.lower_expr(&c.expr, out)?;
                self.types.unify(var, init.ty, c.expr.span())?;
                let id = self.declare(&c.ident.to_string(), var, false, true);
                out.push(Stmt::Let { local: id, init: Some(init) });
                Ok(())
            }
            syn::Stmt::Item(item) => Err(Error::spanned(
                &item,
                ErrorKind::Unsupported { what: "a nested item (fn, struct, use, ...)".into() },
            )),
            syn::Stmt::Macro(m) => Err(Error::spanned(&m, ErrorKind::Macro { name: path_name(&m.mac.path) })),
            syn::Stmt::Expr(e, semi) => {
                // Only a value-producing tail is a return value; an assignment, a loop or a block
                // without `;` is a statement (and loops and `unsafe` get their own errors).
                let statement = match e {
                    syn::Expr::Binary(b) => compound_op(&b.op).is_some(),
                    _ => matches!(
                        e,
                        syn::Expr::If(_)
                            | syn::Expr::Block(_)
                            | syn::Expr::ForLoop(_)
                            | syn::Expr::While(_)
                            | syn::Expr::Loop(_)
                            | syn::Expr::Unsafe(_)
                            | syn::Expr::Assign(_)
                            | syn::Expr::Macro(_)
                            | syn::Expr::Return(_)
                    ),
                };
                if semi.is_none() && is_last && !statement {
                    return Err(Error::spanned(&e, ErrorKind::ReturnValue));
                }
                self.lower_expr_stmt(e, out)
            }
        }
    }

    fn declared_type(&mut self, ty: &syn::Type) -> Result<Var, Error> {
        match signature::scalar_type(ty) {
            Some(t) => Ok(self.types.known(t)),
            None => Err(Error::spanned(&ty, ErrorKind::UnsupportedParamType { ty: tokens(ty) })),
        }
    }

    fn lower_let(&mut self, local: &syn::Local, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        let Some(init) = &local.init else {
            let pat = match &local.pat {
                syn::Pat::Type(pt) => &*pt.pat,
                other => other,
            };
            let name = match pat {
                syn::Pat::Ident(p) => p.ident.to_string(),
                other => tokens(other),
            };
            let span = match pat {
                syn::Pat::Ident(p) => Error::spanned(&p.ident, ErrorKind::UninitialisedLocal { name }),
                other => Error::spanned(other, ErrorKind::UninitialisedLocal { name }),
            };
            return Err(span);
        };
        if let Some((_, diverge)) = &init.diverge {
            return Err(unsupported(diverge, "`let ... else`"));
        }
        if let (syn::Expr::Closure(c), syn::Pat::Ident(p)) = (&*init.expr, &local.pat) {
            self.not_the_index(&p.ident)?;
            return self.lower_point_fn(p, c);
        }
        // `let below = idx.ix::<0, 0, -1>();`: a name for a point, resolved at compile time.
        if let (true, syn::Pat::Ident(p)) = (self.is_point_expr(&init.expr), &local.pat) {
            self.not_the_index(&p.ident)?;
            let name = p.ident.to_string();
            let offset = self.point_offset(&init.expr, &name)?;
            self.bind(name, Binding::Point(offset));
            return Ok(());
        }
        let value = self.lower_value(&init.expr, out)?;
        self.bind_pattern(&local.pat, value, init.expr.span(), out)
    }

    fn lower_expr_stmt(&mut self, e: &syn::Expr, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        match e {
            syn::Expr::Assign(a) => {
                let value = self.lower_value(&a.right, out)?;
                self.assign(&a.left, value, out)
            }
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
                let op = compound_op(&b.op).expect("checked");
                let current = self.lower_expr(&b.left, out)?;
                let rhs = self.lower_expr(&b.right, out)?;
                let value = self.binary(op, current, rhs, b.op.span())?;
                self.assign(&b.left, Value::Scalar(value), out)
            }
            syn::Expr::MethodCall(m) if m.method == "fold" => self.lower_fold(m, out),
            syn::Expr::If(i) => self.lower_if_stmt(i, out),
            syn::Expr::Block(b) => self.lower_block(&b.block, out),
            syn::Expr::ForLoop(f) => self.lower_for(f, out),
            syn::Expr::Paren(p) => self.lower_expr_stmt(&p.expr, out),
            // Any other expression is evaluated for its errors and dropped: it has no effect.
            other => self.lower_value(other, out).map(|_| ()),
        }
    }

    /// `r.fold(value);` with `r` a reduction parameter of the stencil.
    fn lower_fold(&mut self, m: &syn::ExprMethodCall, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        let name = tokens(&m.receiver);
        let Some(reduction) = self.reduction_receiver(&m.receiver) else {
            return Err(Error::spanned(
                &m.receiver,
                ErrorKind::FoldTarget { name, in_helper: !self.call_stack.is_empty() },
            ));
        };
        if m.args.len() != 1 || m.turbofish.is_some() {
            return Err(Error::spanned(&m, ErrorKind::FoldArity { name, got: m.args.len() }));
        }
        let value = self.lower_expr(&m.args[0], out)?;
        let ParamKind::Reduction(r) = self.params[reduction].kind else { unreachable!("reduction_receiver checks") };
        let elem = self.types.known(r.elem);
        self.types.unify(elem, value.ty, m.args[0].span()).map_err(|e| match e.kind {
            ErrorKind::TypeMismatch { found, .. } => {
                Error::spanned(&m.args[0], ErrorKind::FoldType { name: name.clone(), elem: r.elem.to_string(), found })
            }
            _ => e,
        })?;
        out.push(Stmt::Fold { reduction, value });
        Ok(())
    }

    /// The reduction parameter `name` of the stencil (none inside a helper, or if a local hides it).
    fn reduction(&self, name: &str) -> Option<usize> {
        if self.lookup(name).is_some() {
            return None;
        }
        self.param(name).filter(|(_, p)| matches!(p.kind, ParamKind::Reduction(_))).map(|(id, _)| id)
    }

    /// The reduction parameter that `e` names, if it names one.
    fn reduction_receiver(&self, e: &syn::Expr) -> Option<usize> {
        match e {
            syn::Expr::Path(p) => self.reduction(&p.path.get_ident()?.to_string()),
            syn::Expr::Paren(p) => self.reduction_receiver(&p.expr),
            _ => None,
        }
    }

    fn lower_if_stmt(&mut self, i: &syn::ExprIf, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        let cond = self.lower_cond(&i.cond, out)?;
        let mut then_body = Vec::new();
        self.lower_block(&i.then_branch, &mut then_body)?;
        let mut else_body = Vec::new();
        if let Some((_, e)) = &i.else_branch {
            match &**e {
                syn::Expr::If(nested) => self.lower_if_stmt(nested, &mut else_body)?,
                syn::Expr::Block(b) => self.lower_block(&b.block, &mut else_body)?,
                other => return Err(unsupported(other, "this `else` branch")),
            }
        }
        out.push(Stmt::If { cond, then_body, else_body });
        Ok(())
    }

    fn lower_for(&mut self, f: &syn::ExprForLoop, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        let runtime = || Error::spanned(&f.for_token, ErrorKind::RuntimeLoop { which: "for" });
        let syn::Pat::Ident(var) = &*f.pat else { return Err(unsupported(&f.pat, "this loop pattern")) };
        self.not_the_index(&var.ident)?;
        let syn::Expr::Range(range) = &*f.expr else { return Err(runtime()) };
        let bound = |e: &Option<Box<syn::Expr>>| e.as_deref().and_then(|e| self.const_int(e)).ok_or_else(runtime);
        let start = bound(&range.start)?;
        let mut end = bound(&range.end)?;
        if matches!(range.limits, syn::RangeLimits::Closed(_)) {
            end += 1;
        }
        let trips = end - start;
        if trips > MAX_UNROLL {
            return Err(Error::spanned(&f.expr, ErrorKind::UnrollTooLong { trips }));
        }
        for value in start..end {
            self.with_scope(|cx| {
                cx.bind(var.ident.to_string(), Binding::ConstInt(value));
                cx.lower_block(&f.body, out)
            })?;
        }
        Ok(())
    }

    fn assign(&mut self, target: &syn::Expr, value: Value, out: &mut Vec<Stmt<Var>>) -> Result<(), Error> {
        match target {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().expect("ident").to_string();
                match self.lookup(&name) {
                    Some(binding @ (Binding::Local(..) | Binding::Array(..) | Binding::Tuple(_))) => {
                        self.assign_binding(&binding, &name, value, target, out)
                    }
                    Some(Binding::Captured) => Err(self.captured(&target, &name)),
                    None if self.reduction(&name).is_some() => {
                        Err(Error::spanned(&target, ErrorKind::ReductionAsValue { name }))
                    }
                    _ => Err(Error::spanned(&target, ErrorKind::BadAssignTarget)),
                }
            }
            // `q[idx] = [..]`: every member of a group of fields at the point.
            syn::Expr::Index(ix) if self.group_at(ix).is_some() => {
                let (name, members) = self.group_at(ix).expect("checked");
                let values = match value {
                    Value::Array(v) if v.len() == members.len() => v,
                    other => {
                        let kind = ErrorKind::GroupStore { name, len: members.len(), found: other.shape().to_string() };
                        return Err(Error::spanned(target, kind));
                    }
                };
                for (field, value) in members.into_iter().zip(values) {
                    self.store_at(field, ix, value, out)?;
                }
                Ok(())
            }
            syn::Expr::Index(ix) if !self.is_field(&ix.expr) => self.assign_element(ix, value, out),
            syn::Expr::Index(ix) => {
                let value = value.scalar(target)?;
                let (field, _) = self.field_access(ix)?;
                self.store_at(field, ix, value, out)
            }
            syn::Expr::Paren(p) => self.assign(&p.expr, value, out),
            other => Err(Error::spanned(&other, ErrorKind::BadAssignTarget)),
        }
    }
}

impl Lowerer {
    /// Stores `value` into field `field` at the point `ix` indexes (refused for a read-only field
    /// or another point than the current one).
    fn store_at(
        &mut self,
        field: usize,
        ix: &syn::ExprIndex,
        value: crate::ir::Expr<Var>,
        out: &mut Vec<Stmt<Var>>,
    ) -> Result<(), Error> {
        let name = self.param_display(field);
        let offset = self.point_offset(&ix.index, &name)?;
        let ParamKind::Field(fp) = self.params[field].kind else { unreachable!("a field parameter") };
        if !fp.writable {
            let kind = ErrorKind::ReadOnlyWrite { field: name, dim: self.dim, elem: fp.elem.to_string() };
            return Err(Error::spanned(&ix.expr, kind));
        }
        if offset != [0; 3] {
            return Err(Error::spanned(
                &ix.index,
                ErrorKind::OffsetWrite { field: name, offset: offset[..self.dim].to_vec() },
            ));
        }
        let elem = self.types.known(fp.elem);
        self.types.unify(elem, value.ty, ix.span())?;
        out.push(Stmt::Store { field, value });
        Ok(())
    }
}

/// Whether `ty` is `usize` (the type of a `const` array length).
fn is_usize(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("usize"))
}

fn compound_op(op: &syn::BinOp) -> Option<crate::ir::BinOp> {
    use crate::ir::BinOp as B;
    Some(match op {
        syn::BinOp::AddAssign(_) => B::Add,
        syn::BinOp::SubAssign(_) => B::Sub,
        syn::BinOp::MulAssign(_) => B::Mul,
        syn::BinOp::DivAssign(_) => B::Div,
        syn::BinOp::RemAssign(_) => B::Rem,
        syn::BinOp::BitAndAssign(_) => B::BitAnd,
        syn::BinOp::BitOrAssign(_) => B::BitOr,
        syn::BinOp::BitXorAssign(_) => B::BitXor,
        syn::BinOp::ShlAssign(_) => B::Shl,
        syn::BinOp::ShrAssign(_) => B::Shr,
        _ => return None,
    })
}

/// An integer literal, possibly negated or in braces (`1`, `-2`, `{ -2 }`).
fn int_literal(e: &syn::Expr) -> Option<i64> {
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse().ok(),
        syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => int_literal(expr).map(|v| -v),
        syn::Expr::Paren(p) => int_literal(&p.expr),
        syn::Expr::Group(g) => int_literal(&g.expr),
        syn::Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(e, None) => int_literal(e),
            _ => None,
        },
        _ => None,
    }
}

fn tokens(t: &impl quote::ToTokens) -> String {
    t.to_token_stream().to_string()
}

fn path_name(p: &syn::Path) -> String {
    p.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::")
}

fn unsupported(t: &impl quote::ToTokens, what: &str) -> Error {
    Error::spanned(t, ErrorKind::Unsupported { what: what.to_string() })
}
