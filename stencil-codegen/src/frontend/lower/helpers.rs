//! `#[stencil_fn]` helpers: functions of scalars, arrays and tuples that stencils (and other
//! helpers) call by their bare name. Every call is inlined while lowering: the arguments are
//! bound to fresh locals, the helper's body is lowered in a scope that sees only its own
//! parameters, and its final expression is the call's value. So the IR stays call-free and the
//! CPU nest and every CUDA strategy print helpers without knowing about them. (Printing them as
//! `__device__ __forceinline__` functions instead would need calls, pointer outputs for array
//! results and a second printer per backend, for the machine code nvcc produces by inlining
//! anyway.)

use super::generic::{element_parameter, instantiate, ELEMENT_TYPES};
use super::syntax::{helper_name, split_tail};
use super::types::Var;
use super::values::{DeclType, Value};
use super::{int_literal, unsupported, Lowerer};
use crate::frontend::error::{Error, ErrorKind};
use crate::ir::ScalarType;
use crate::ir::{Expr, ExprKind, Stmt};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A helper's parameter.
struct HelperParam {
    name: String,
    mutable: bool,
    ty: DeclType,
}

/// A helper's checked signature.
struct HelperSig {
    params: Vec<HelperParam>,
    ret: DeclType,
}

/// Checks a helper's signature: no generics or qualifiers, plain (possibly `mut`) parameter
/// names, parameter and return types that are scalars, arrays of literal length or tuples.
fn helper_signature(item: &syn::ItemFn) -> Result<HelperSig, Error> {
    let sig = &item.sig;
    super::signature::plain_signature(sig, ErrorKind::HelperGenerics)?;
    let mut params = Vec::new();
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else { return Err(Error::spanned(input, ErrorKind::ParamPattern)) };
        let syn::Pat::Ident(p) = &*pt.pat else { return Err(Error::spanned(&pt.pat, ErrorKind::ParamPattern)) };
        if p.subpat.is_some() || p.by_ref.is_some() {
            return Err(Error::spanned(&pt.pat, ErrorKind::ParamPattern));
        }
        let ty = DeclType::parse(&pt.ty, &int_literal)?;
        params.push(HelperParam { name: p.ident.to_string(), mutable: p.mutability.is_some(), ty });
    }
    let syn::ReturnType::Type(_, ret) = &sig.output else {
        return Err(Error::spanned(&sig.ident, ErrorKind::HelperNoReturn));
    };
    Ok(HelperSig { params, ret: DeclType::parse(ret, &int_literal)? })
}

/// Checks a `#[stencil_fn]` helper on its own, as every call will inline it: its signature, its
/// body (with the same rules as a stencil's, and no fields), and the calls it makes, with
/// `helpers` the helpers it reaches (itself included, so that recursion is found). A helper
/// generic over its element type (`fn twice<T>(x: T) -> T`) is checked as `f32` and as `f64`.
pub fn check_helper(item: &syn::ItemFn, helpers: &[syn::ItemFn]) -> Result<(), Error> {
    let instances: Vec<(syn::ItemFn, Option<ScalarType>)> =
        match element_parameter(item).map_err(|e| Error { kind: ErrorKind::HelperGenerics, ..e })? {
            None => vec![(item.clone(), None)],
            Some(param) => ELEMENT_TYPES.iter().map(|&e| (instantiate(item, &param, e), Some(e))).collect(),
        };
    let param = element_parameter(item).ok().flatten();
    for (item, element) in instances {
        let check = || -> Result<(), Error> {
            let sig = helper_signature(&item)?;
            let mut cx = Lowerer::new(0, String::new(), Vec::new(), helpers);
            cx.element = element.or_else(|| own_element(&sig));
            cx.call_stack.push(item.sig.ident.to_string());
            let args = sig.params.iter().map(|p| placeholder(&mut cx, &p.name, &p.ty)).collect();
            cx.inline_body(&item, &sig, args, &mut Vec::new())?;
            cx.types.finish().map(|_| ())
        };
        check().map_err(|e| match (&param, element) {
            (Some(param), Some(elem)) => Error {
                kind: ErrorKind::Instantiation {
                    param: param.to_string(),
                    elem: elem.rust_name(),
                    error: Box::new(e.kind),
                },
                ..e
            },
            _ => e,
        })?;
    }
    Ok(())
}

/// The floating-point type of every parameter and of the result of a (non-generic) helper, if
/// they share one: the element type the generic helpers it calls take.
fn own_element(sig: &HelperSig) -> Option<ScalarType> {
    fn floats(ty: &DeclType, out: &mut Vec<ScalarType>) {
        match ty {
            DeclType::Scalar(t) | DeclType::Array(t, _) => out.push(*t),
            DeclType::Tuple(v) => v.iter().for_each(|t| floats(t, out)),
        }
    }
    let mut all = Vec::new();
    sig.params.iter().map(|p| &p.ty).chain([&sig.ret]).for_each(|t| floats(t, &mut all));
    all.retain(|t| matches!(t, ScalarType::F32 | ScalarType::F64));
    let first = *all.first()?;
    all.iter().all(|&t| t == first).then_some(first)
}

/// An opaque value of type `ty`: fresh locals standing for a parameter when a helper is
/// checked on its own.
fn placeholder(cx: &mut Lowerer, name: &str, ty: &DeclType) -> Value {
    let leaf = |cx: &mut Lowerer, t| {
        let ty = cx.types.known(t);
        Expr { ty, kind: ExprKind::Local(cx.declare(name, ty, false, false)) }
    };
    match ty {
        DeclType::Scalar(t) => Value::Scalar(leaf(cx, *t)),
        DeclType::Array(t, n) => Value::Array((0..*n).map(|_| leaf(cx, *t)).collect()),
        DeclType::Tuple(v) => Value::Tuple(v.iter().map(|t| placeholder(cx, name, t)).collect()),
    }
}

impl Lowerer {
    /// Inlines a call of a helper: checks the arguments against its parameters, then lowers its
    /// body with the arguments bound to its parameter names.
    pub(super) fn call_helper(&mut self, c: &syn::ExprCall, out: &mut Vec<Stmt<Var>>) -> Result<Value, Error> {
        let name = helper_name(c).expect("a bare name").to_string();
        if let Some(super::Binding::PointFn(func)) = self.lookup(&name) {
            return self.call_point_fn(c, func);
        }
        if self.lookup(&name).is_some() || self.param(&name).is_some() {
            return Err(unsupported(&c.func, &format!("calling `{name}`, which is a value")));
        }
        let Some(helper) = self.helpers.get(&name).cloned() else {
            return Err(Error::spanned(&c.func, ErrorKind::UnsupportedCall { name }));
        };
        if self.call_stack.contains(&name) {
            let chain = self.call_stack.iter().chain([&name]).cloned().collect::<Vec<_>>().join(" -> ");
            return Err(Error::spanned(&c.func, ErrorKind::Recursion { chain }));
        }
        // A generic helper takes the element type of the stencil's fields (or of the generic
        // helper being checked).
        let helper = match element_parameter(&helper).map_err(|e| Error { kind: ErrorKind::HelperGenerics, ..e })? {
            None => helper,
            Some(param) => {
                let Some(elem) = self.element else {
                    return Err(Error::spanned(&c.func, ErrorKind::HelperElement { helper: name }));
                };
                instantiate(&helper, &param, elem)
            }
        };
        let sig = helper_signature(&helper)?;
        if c.args.len() != sig.params.len() {
            return Err(Error::spanned(
                c,
                ErrorKind::HelperArity { name, expected: sig.params.len(), got: c.args.len() },
            ));
        }
        let mut args = Vec::new();
        for (arg, param) in c.args.iter().zip(&sig.params) {
            if self.is_field(arg) || self.is_index(arg) {
                return Err(Error::spanned(arg, ErrorKind::FieldToHelper { field: super::tokens(arg), helper: name }));
            }
            let value = self.lower_value(arg, out)?;
            args.push(self.coerce(value, &param.ty, arg.span())?);
        }
        self.call_stack.push(name);
        let saved = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        // Inside a helper written for one element type, generic helpers take that type.
        let element = self.element;
        self.element = own_element(&sig).or(element);
        let result = self.inline_body(&helper, &sig, args, out);
        self.element = element;
        self.scopes = saved;
        self.call_stack.pop();
        result
    }

    /// Whether `e` is the stencil's point index.
    fn is_index(&self, e: &syn::Expr) -> bool {
        matches!(e, syn::Expr::Path(p) if self.call_stack.is_empty() && p.path.is_ident(&self.index_name))
    }

    /// Lowers a helper's body in the current (fresh) scope with `args` bound to its parameters;
    /// returns the value of its final expression, checked against the return type.
    fn inline_body(
        &mut self,
        helper: &syn::ItemFn,
        sig: &HelperSig,
        args: Vec<Value>,
        out: &mut Vec<Stmt<Var>>,
    ) -> Result<Value, Error> {
        for (p, v) in sig.params.iter().zip(args) {
            let binding = self.declare_value(&p.name, v, p.mutable, out);
            self.bind(p.name.clone(), binding);
        }
        let block = &helper.block;
        let Some((stmts, tail)) = split_tail(block) else {
            // Statements first: a `return` among them gets its own error.
            for s in &block.stmts {
                self.lower_stmt(s, false, out)?;
            }
            let at = block.stmts.last().map_or_else(|| block.span(), |s| s.span());
            return Err(Error::new(at, ErrorKind::HelperNoReturn));
        };
        for s in stmts {
            self.lower_stmt(s, false, out)?;
        }
        if let syn::Expr::Return(r) = tail {
            return Err(Error::spanned(r, ErrorKind::HelperReturn));
        }
        let value = self.lower_value(tail, out)?;
        self.coerce(value, &sig.ret, tail.span())
    }
}

/// The bare function names `item`'s body calls (`flux(a, b)`), in order of first call: the
/// `#[stencil_fn]` helpers it needs. Names the function binds itself (parameters, locals,
/// closures) are left out: calling one is an error the lowering reports. Binding the others to
/// helpers happens in the caller's scope (the proc macro asks each name's `macro_rules!` twin
/// for the helper's tokens).
pub fn called_names(item: &syn::ItemFn) -> Vec<syn::Ident> {
    #[derive(Default)]
    struct Names {
        calls: Vec<syn::Ident>,
        bound: Vec<syn::Ident>,
    }
    impl<'ast> Visit<'ast> for Names {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Some(name) = helper_name(c) {
                if !self.calls.contains(name) {
                    self.calls.push(name.clone());
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.bound.push(p.ident.clone());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut names = Names::default();
    names.visit_item_fn(item);
    names.calls.into_iter().filter(|c| !names.bound.contains(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::{called_names, check_helper};
    use crate::ir::{BinOp, ExprKind, StencilIr, Stmt};
    use crate::ErrorKind;

    const STENCIL: &str = "fn s(idx: Idx1, dt: f64, f: &Field1<f64>, out: &mut Field1<f64>)";

    fn lower(body: &str, helpers: &str) -> Result<StencilIr, ErrorKind> {
        StencilIr::from_source(&format!("{STENCIL} {{ {body} }} {helpers}")).map_err(|e| e.kind)
    }

    fn check(helpers: &str) -> Result<(), ErrorKind> {
        let file: syn::File = syn::parse_str(helpers).unwrap();
        let fns: Vec<syn::ItemFn> =
            file.items.into_iter().map(|i| if let syn::Item::Fn(f) = i { f } else { panic!("fn") }).collect();
        check_helper(&fns[0], &fns).map_err(|e| e.kind)
    }

    #[test]
    fn calls_are_inlined_with_fresh_locals() {
        let ir = lower("out[idx] = sq(f[idx]) + sq(2.0);", "fn sq(x: f64) -> f64 { x * x }").unwrap();
        assert_eq!(ir.locals.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["x", "x_1"]);
        let Some(Stmt::Store { value, .. }) = ir.body.last() else { panic!("store last") };
        let ExprKind::Binary(BinOp::Add, a, b) = &value.kind else { panic!("{value:?}") };
        assert!(matches!(&a.kind, ExprKind::Binary(BinOp::Mul, x, _) if x.kind == ExprKind::Local(0)));
        assert!(matches!(&b.kind, ExprKind::Binary(BinOp::Mul, x, _) if x.kind == ExprKind::Local(1)));
    }

    #[test]
    fn arrays_and_tuples_cross_helper_boundaries() {
        let helpers = "fn split(q: [f64; 3], mut s: f64) -> (f64, [f64; 2]) { s += q[0]; (s, [q[1], q[2]]) } \
                       fn sum(q: [f64; 2]) -> f64 { q[0] + q[1] }";
        let ir = lower("let (a, r) = split([f[idx], dt, 1.0], 0.5); out[idx] = a + sum(r);", helpers).unwrap();
        let mut stores = 0;
        crate::ir::visit_exprs(&ir.body, &mut |e| assert!(!matches!(e.kind, ExprKind::Call(..)), "{e:?}"));
        for s in &ir.body {
            stores += matches!(s, Stmt::Store { .. }) as usize;
        }
        assert_eq!(stores, 1);
    }

    #[test]
    fn helpers_see_only_their_parameters() {
        assert_eq!(
            lower("out[idx] = g(1.0);", "fn g(x: f64) -> f64 { x * dt }"),
            Err(ErrorKind::UnknownName { name: "dt".into() })
        );
    }

    #[test]
    fn call_mistakes_are_named_errors() {
        let sq = "fn sq(x: f64) -> f64 { x * x }";
        assert_eq!(
            lower("out[idx] = sq(f[idx], 1.0);", sq),
            Err(ErrorKind::HelperArity { name: "sq".into(), expected: 1, got: 2 })
        );
        assert_eq!(
            lower("out[idx] = sq(f);", sq),
            Err(ErrorKind::FieldToHelper { field: "f".into(), helper: "sq".into() })
        );
        assert_eq!(
            lower("out[idx] = sq(1.0f32) as f64;", sq),
            Err(ErrorKind::TypeMismatch { expected: "f64".into(), found: "f32".into() })
        );
        assert_eq!(lower("out[idx] = nope(1.0);", sq), Err(ErrorKind::UnsupportedCall { name: "nope".into() }));
        assert_eq!(
            lower("out[idx] = a(1.0);", "fn a(x: f64) -> f64 { b(x) } fn b(x: f64) -> f64 { a(x) }"),
            Err(ErrorKind::Recursion { chain: "a -> b -> a".into() })
        );
    }

    #[test]
    fn helpers_are_checked_on_their_own() {
        assert_eq!(check("fn ok(q: [f32; 2]) -> (f32, f32) { (q[0].sqrt(), q[1]) }"), Ok(()));
        assert_eq!(check("fn f(x: f64) -> f64 { f(x) }"), Err(ErrorKind::Recursion { chain: "f -> f".into() }));
        assert_eq!(check("fn f(x: f64) { }"), Err(ErrorKind::HelperNoReturn));
        assert_eq!(check("fn f(x: f64) -> f64 { return x; }"), Err(ErrorKind::HelperReturn));
        assert!(matches!(check("fn f(x: i32) -> i32 { x.sqrt() }"), Err(ErrorKind::BadOperand { .. })));
        assert_eq!(
            check("fn f(x: &Field1<f64>) -> f64 { 1.0 }"),
            Err(ErrorKind::UnsupportedValueType { ty: "& Field1 < f64 >".into() })
        );
    }

    #[test]
    fn called_names_leave_out_what_the_function_binds() {
        let item: syn::ItemFn = syn::parse_str(
            "fn s(g: f64) { let sq = 1.0; let a = flux(g) + sq(2.0) + g(1.0) + flux(3.0) + f64::sqrt(g); }",
        )
        .unwrap();
        assert_eq!(called_names(&item), ["flux"]);
    }
}
