//! Inlining of point functions: each value `f(idx.ix(o))` of a point function `f` becomes `f`'s
//! statements with every load shifted by `o`, on fresh locals, placed before the first statement
//! that needs it and shared by the later ones that see it (the statements after it in the same
//! list, and the branches nested in them). The result computes every value with the same
//! operations in the same order as the point function does, so a printer that keeps point
//! functions (the CPU nest computes each once per point and reads it back) and one that prints
//! the inlined IR give the same bits. A point function may call the ones defined before it;
//! their values are shared the same way, across the functions that need them.

use crate::ir::{Expr, ExprKind, Local, LocalId, StencilIr, Stmt};
use std::collections::{HashMap, HashSet};

/// `ir` with its point functions inlined ([`crate::ir::StencilIr::point_fns`] empty); `ir`
/// itself when it has none.
pub fn inline_point_fns(ir: &StencilIr) -> StencilIr {
    let mut out = ir.clone();
    if ir.point_fns.is_empty() {
        return out;
    }
    assert!(
        ir.sweep.is_none(),
        "stencil `{}`: a column sweep has no point functions (the frontend refuses them)",
        ir.name
    );
    out.point_fns.clear();
    let mut inliner = Inliner {
        ir,
        names: ir.locals.iter().map(|l| l.name.clone()).chain(ir.params.iter().map(|p| p.name.clone())).collect(),
        locals: std::mem::take(&mut out.locals),
    };
    out.body = inliner.stmts(&ir.body, &HashMap::new());
    out.locals = inliner.locals;
    out
}

/// `ir` with the bodies of its point functions free of calls of other point functions (those
/// inlined as [`inline_point_fns`] does); the stencil's body and the functions' outputs stay:
/// what the CPU nest computes each function from.
pub fn inline_nested_point_fns(ir: &StencilIr) -> StencilIr {
    let mut out = ir.clone();
    let mut inliner = Inliner {
        ir,
        names: ir.locals.iter().map(|l| l.name.clone()).chain(ir.params.iter().map(|p| p.name.clone())).collect(),
        locals: std::mem::take(&mut out.locals),
    };
    for (f, pf) in ir.point_fns.iter().enumerate() {
        out.point_fns[f].body = inliner.stmts(&pf.body, &HashMap::new());
    }
    out.locals = inliner.locals;
    out
}

/// Values already computed where a statement runs: (function, offset) → its outputs' locals.
type Available = HashMap<(usize, [i32; 3]), Vec<LocalId>>;

struct Inliner<'a> {
    ir: &'a StencilIr,
    /// Every local and parameter name in use (fresh ones get a numbered suffix).
    names: HashSet<String>,
    /// The locals of the result: the original ones, then the inlined copies'.
    locals: Vec<Local>,
}

impl Inliner<'_> {
    fn stmts(&mut self, body: &[Stmt], outer: &Available) -> Vec<Stmt> {
        let mut available = outer.clone();
        let mut out = Vec::new();
        for stmt in body {
            self.stmt(stmt, &mut available, &mut out);
        }
        out
    }

    /// Appends `stmt` to `out`, after the point values its own expressions need (not its
    /// branches') that `available` lacks.
    fn stmt(&mut self, stmt: &Stmt, available: &mut Available, out: &mut Vec<Stmt>) {
        let mut needed = Vec::new();
        let own: Vec<&Expr> = match stmt {
            Stmt::Let { init, .. } => init.iter().collect(),
            Stmt::Assign { value, .. } | Stmt::Store { value, .. } | Stmt::Fold { value, .. } => vec![value],
            Stmt::If { cond, .. } => vec![cond],
        };
        for e in own {
            e.visit(&mut |e| {
                if let ExprKind::PointValue { func, offset, .. } = e.kind {
                    if !available.contains_key(&(func, offset)) && !needed.contains(&(func, offset)) {
                        needed.push((func, offset));
                    }
                }
            });
        }
        for (func, offset) in needed {
            // A value an earlier one in `needed` computed on the way (a nested call) is shared.
            if !available.contains_key(&(func, offset)) {
                let outputs = self.emit(func, offset, available, out);
                available.insert((func, offset), outputs);
            }
        }
        out.push(match stmt {
            Stmt::Let { local, init } => Stmt::Let { local: *local, init: init.as_ref().map(|e| subst(e, available)) },
            Stmt::Assign { local, value } => Stmt::Assign { local: *local, value: subst(value, available) },
            Stmt::Store { field, value } => Stmt::Store { field: *field, value: subst(value, available) },
            Stmt::Fold { reduction, value } => Stmt::Fold { reduction: *reduction, value: subst(value, available) },
            Stmt::If { cond, then_body, else_body } => Stmt::If {
                cond: subst(cond, available),
                then_body: self.stmts(then_body, available),
                else_body: self.stmts(else_body, available),
            },
        });
    }

    /// Appends point function `func`'s statements, shifted by `offset` and on fresh locals, to
    /// `out` (with the values of other point functions they need that `available` lacks);
    /// returns the locals holding its outputs.
    fn emit(&mut self, func: usize, offset: [i32; 3], available: &mut Available, out: &mut Vec<Stmt>) -> Vec<LocalId> {
        let f = &self.ir.point_fns[func];
        let mut declared = Vec::new();
        collect_declared(&f.body, &mut declared);
        let mut renamed = HashMap::new();
        let fields: Vec<&str> = self.ir.field_ids().map(|p| self.ir.params[p].name.as_str()).collect();
        for l in declared {
            let local = &self.ir.locals[l];
            // Suffixed, clear of the names the printers make (`r_out_1` is a kernel register).
            let name = crate::naming::fresh_local(
                &local.name,
                &fields,
                |n| self.names.contains(n),
                |n| crate::naming::is_reserved(n, &fields),
            );
            self.names.insert(name.clone());
            self.locals.push(Local { name, ty: local.ty });
            renamed.insert(l, self.locals.len() - 1);
        }
        for s in shift_stmts(&f.body, offset, &renamed) {
            self.stmt(&s, available, out);
        }
        f.outputs.iter().map(|o| renamed[o]).collect()
    }
}

/// The locals `body` declares, nested branches included.
fn collect_declared(body: &[Stmt], out: &mut Vec<LocalId>) {
    for s in body {
        match s {
            Stmt::Let { local, .. } => out.push(*local),
            Stmt::If { then_body, else_body, .. } => {
                collect_declared(then_body, out);
                collect_declared(else_body, out);
            }
            Stmt::Assign { .. } | Stmt::Store { .. } | Stmt::Fold { .. } => {}
        }
    }
}

fn shift_stmts(body: &[Stmt], offset: [i32; 3], renamed: &HashMap<LocalId, LocalId>) -> Vec<Stmt> {
    let local = |l: &LocalId| *renamed.get(l).expect("a point function uses only its own locals");
    let e = |x: &Expr| shift_expr(x, offset, renamed);
    body.iter()
        .map(|s| match s {
            Stmt::Let { local: l, init } => Stmt::Let { local: local(l), init: init.as_ref().map(e) },
            Stmt::Assign { local: l, value } => Stmt::Assign { local: local(l), value: e(value) },
            Stmt::If { cond, then_body, else_body } => Stmt::If {
                cond: e(cond),
                then_body: shift_stmts(then_body, offset, renamed),
                else_body: shift_stmts(else_body, offset, renamed),
            },
            Stmt::Store { .. } | Stmt::Fold { .. } => {
                unreachable!("a point function writes nothing (the frontend refuses it)")
            }
        })
        .collect()
}

/// `e` with its loads shifted by `offset` and its locals renamed.
fn shift_expr(e: &Expr, offset: [i32; 3], renamed: &HashMap<LocalId, LocalId>) -> Expr {
    map_expr(e, &mut |k| match k {
        ExprKind::Load { field, offset: o } => {
            Some(ExprKind::Load { field: *field, offset: std::array::from_fn(|a| o[a] + offset[a]) })
        }
        ExprKind::Local(l) => {
            Some(ExprKind::Local(*renamed.get(l).expect("a point function uses only its own locals")))
        }
        ExprKind::PointValue { func, output, offset: o } => Some(ExprKind::PointValue {
            func: *func,
            output: *output,
            offset: std::array::from_fn(|a| o[a] + offset[a]),
        }),
        _ => None,
    })
}

/// `e` with its point values replaced by the locals that hold them.
fn subst(e: &Expr, available: &Available) -> Expr {
    map_expr(e, &mut |k| match k {
        ExprKind::PointValue { func, output, offset } => Some(ExprKind::Local(available[&(*func, *offset)][*output])),
        _ => None,
    })
}

/// A copy of `e` in which every node that `leaf` maps is replaced by what it returns.
fn map_expr(e: &Expr, leaf: &mut impl FnMut(&ExprKind) -> Option<ExprKind>) -> Expr {
    if let Some(kind) = leaf(&e.kind) {
        return Expr { ty: e.ty, kind };
    }
    let mut sub = |a: &Expr| Box::new(map_expr(a, leaf));
    let kind = match &e.kind {
        ExprKind::Unary(op, a) => ExprKind::Unary(*op, sub(a)),
        ExprKind::Binary(op, a, b) => {
            let a = sub(a);
            ExprKind::Binary(*op, a, sub(b))
        }
        ExprKind::Cast(a) => ExprKind::Cast(sub(a)),
        ExprKind::Call(f, args) => ExprKind::Call(*f, args.iter().map(|a| map_expr(a, leaf)).collect()),
        ExprKind::Select(c, a, b) => {
            let (c, a) = (sub(c), sub(a));
            ExprKind::Select(c, a, sub(b))
        }
        other => other.clone(),
    };
    Expr { ty: e.ty, kind }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;
    use crate::ir::{visit_exprs, BinOp};

    #[test]
    fn each_offset_is_computed_once_before_its_first_use_and_shifted() {
        let ir = StencilIr::from_source(
            "fn s(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
                 let f = |p: Idx1| u[p] * u[p.ix::<1>()];
                 let a = f(idx) + f(idx.ix::<-1>());
                 if a > 0.0 { out[idx] = f(idx); } else { out[idx] = f(idx.ix::<2>()); }
             }",
        )
        .unwrap();
        assert_eq!(ir.point_fns.len(), 1);
        let flat = inline_point_fns(&ir);
        assert!(flat.point_fns.is_empty());
        let (mut muls, mut loads, mut values) = (0, Vec::new(), 0);
        visit_exprs(&flat.body, &mut |e| match e.kind {
            ExprKind::Binary(BinOp::Mul, ..) => muls += 1,
            ExprKind::Load { offset, .. } => loads.push(offset[0]),
            ExprKind::PointValue { .. } => values += 1,
            _ => {}
        });
        // f at 0 (shared by the `let` and the `then` branch), at -1, and at 2 in the `else`.
        assert_eq!((muls, values), (3, 0));
        loads.sort();
        assert_eq!(loads, [-1, 0, 0, 1, 2, 3]);
        // The value at 2 is computed inside the `else` branch, not before the `if`.
        let Stmt::If { else_body, .. } = flat.body.last().unwrap() else { panic!("an if last") };
        assert_eq!(else_body.len(), 2, "{else_body:?}");
        // Fresh locals, unique names.
        let mut names: Vec<&str> = flat.locals.iter().map(|l| l.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), flat.locals.len());
    }
}

#[cfg(all(test, feature = "frontend"))]
mod nested_tests {
    use super::*;
    use crate::ir::{visit_exprs, BinOp};

    const SOURCE: &str = "fn s(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
        let w = |p: Idx1| u[p] * u[p];
        let f = |p: Idx1| w(p.ix::<-1>()) + w(p);
        out[idx] = f(idx) - f(idx.ix::<-1>());
    }";

    fn count(body: &[Stmt]) -> (usize, usize, Vec<i32>) {
        let (mut muls, mut values, mut loads) = (0, 0, Vec::new());
        visit_exprs(body, &mut |e| match e.kind {
            ExprKind::Binary(BinOp::Mul, ..) => muls += 1,
            ExprKind::PointValue { .. } => values += 1,
            ExprKind::Load { offset, .. } => loads.push(offset[0]),
            _ => {}
        });
        loads.sort();
        (muls, values, loads)
    }

    #[test]
    fn a_nested_value_is_computed_once_for_every_function_that_needs_it() {
        let ir = StencilIr::from_source(SOURCE).unwrap();
        // `f` at 0 and at -1 need `w` at -1, 0 and -2: three squares, not four.
        let (muls, values, loads) = count(&inline_point_fns(&ir).body);
        assert_eq!((muls, values), (3, 0));
        assert_eq!(loads, [-2, -2, -1, -1, 0, 0]);
    }

    #[test]
    fn the_nest_gets_point_functions_whose_bodies_call_none() {
        let ir = StencilIr::from_source(SOURCE).unwrap();
        let nest = inline_nested_point_fns(&ir);
        assert_eq!(nest.body, ir.body, "the stencil's body keeps its calls");
        assert_eq!(nest.point_fns[0], ir.point_fns[0], "`w` calls nothing");
        let (muls, values, loads) = count(&nest.point_fns[1].body);
        assert_eq!((muls, values), (2, 0));
        assert_eq!(loads, [-1, -1, 0, 0]);
        assert_eq!(nest.point_fns[1].outputs, ir.point_fns[1].outputs);
    }
}
