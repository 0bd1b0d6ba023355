//! A stencil with point functions split into two stencils that run one after the other: the
//! first writes the point functions' values that the body reads at a neighbour into fields of
//! their own, the second is the body with those values loaded from the fields.
//!
//! The depot kernel keeps point functions on chip, which saves their recomputation but ties the
//! kernel to shared memory, barriers and the recomputation of the tile's halo. Written out, a
//! value read at 25 neighbours (an adjoint's scaled cotangent `[p ∈ R] · w̄[p] / m[p] / (1 + d[p])`)
//! is computed once per point by a point-parallel pass, and the second pass is a plain stencil
//! over a field, which the z-marching and streaming kernels run near the copy bandwidth.
//!
//! **The same bits.** The first pass evaluates each value with the point function's own
//! statements (inlined at the point itself), and the second reads it where the body read the
//! point value, in the same expression: every operation and its order are kept, so the result is
//! bit for bit the one-pass stencil's (and the CPU nest's, which also computes each value once
//! per point).
//!
//! **Which values.** Only the outputs the body reads at a nonzero offset get a field; those read
//! at the point itself only stay point functions of the second pass (inlined there: they are
//! computed once per point either way, and writing them out would only add traffic).
//!
//! **The point pass.** Where the body is a list of stores, each a sum (`w[p] = a + b + c + ...`,
//! evaluated left to right) into a field that no other statement reads, the part of each sum
//! before its first term read at a neighbour (`a + b`) needs only values at the point itself: a
//! third stencil, the *point pass* ([`Materialised::point`]), computes those parts and stores
//! them into their fields, and writes the values out at the same time; the second pass continues
//! each sum from the stored part (`w[p] + c + ...`, the same additions in the same order), and a
//! store with no term at a neighbour is done by the point pass alone. An adjoint's cotangent of
//! the previous time level (`u_prev_bar += k · z(p)`) is such a store, and its cotangent of the
//! current level starts with the terms at the point itself: the point pass reads the fixed
//! fields and the mask once, and the second pass reads only the written-out values and the
//! cotangent it adds into.
//!
//! **Ranges.** The second pass runs over the launch's range `R`; the values are needed over `R`
//! grown by the reach of their offsets ([`Materialised::lo`], [`Materialised::hi`]), each axis on
//! its own (a box). Without a point pass the first pass runs over that grown box; with one, the
//! point pass runs over `R` (writing the values there) and the first pass over the rest of the
//! box only. A launch whose range plus the stencil's reach fits its fields covers these reads
//! too: a value at `p + o` reads the fields at `p + o` plus its own offsets, which the stencil's
//! reach check already bounds per axis.

use crate::ir::{BinOp, Expr, ExprKind, FieldParam, Param, ParamKind, StencilIr, Stmt};

/// The two passes of a stencil whose point functions are written out (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Materialised {
    /// The first pass: the stencil's parameters, then one writable field per written-out value
    /// (in [`Materialised::values`] order), into which it stores each value at its own point.
    /// It writes none of the stencil's fields.
    pub first: StencilIr,
    /// The second pass: the stencil's parameters, then the same fields, read only; the body with
    /// every written-out value loaded from its field.
    pub second: StencilIr,
    /// The point pass (see the module docs), where the body's form allows one: the stencil's
    /// parameters and the extra fields (writable), it stores the parts of the sums that need
    /// values at the point only, and every written-out value at its point. With it, `second`
    /// continues the sums from the stored parts.
    pub point: Option<StencilIr>,
    /// The point function and output each extra field holds.
    pub values: Vec<(usize, usize)>,
    /// The least offset at which the body reads a written-out value, per stencil axis (≤ 0).
    pub lo: [i32; 3],
    /// The greatest such offset, per stencil axis (≥ 0).
    pub hi: [i32; 3],
}

/// Why a stencil cannot be split into the two passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaterialiseError {
    /// The body reads no point function value at a neighbour: there is nothing to write out.
    NothingShared {
        /// The stencil.
        stencil: String,
    },
    /// A column sweep or a reducing stencil (they run their own kernels).
    NotPointParallel {
        /// The stencil.
        stencil: String,
    },
    /// A point pass was asked for, but the body's form has none ([`Materialised::point`]).
    NoPointPass {
        /// The stencil.
        stencil: String,
    },
}

impl std::fmt::Display for MaterialiseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaterialiseError::NothingShared { stencil } => write!(
                f,
                "stencil `{stencil}` reads no point function at a neighbour, so there is no value to write out \
                 between two passes: run it in one"
            ),
            MaterialiseError::NotPointParallel { stencil } => {
                write!(f, "stencil `{stencil}` is a column sweep or a reduction, which run their own kernels")
            }
            MaterialiseError::NoPointPass { stencil } => write!(
                f,
                "stencil `{stencil}` has no point pass: its body is not a list of sums into fields it reads only \
                 there, or no sum starts with terms at the point itself"
            ),
        }
    }
}

impl std::error::Error for MaterialiseError {}

/// `ir` split into its two passes (see the module docs).
pub fn materialise(ir: &StencilIr) -> Result<Materialised, MaterialiseError> {
    if ir.sweep.is_some() || ir.reduces() {
        return Err(MaterialiseError::NotPointParallel { stencil: ir.name.clone() });
    }
    // Point functions that call others are first made self-contained (the CPU nest computes
    // them from the same form, so the bits are unchanged).
    let ir = &super::inline_nested_point_fns(ir);
    let mut values: Vec<(usize, usize)> = Vec::new();
    let (mut lo, mut hi) = ([0i32; 3], [0i32; 3]);
    crate::ir::visit_exprs(&ir.body, &mut |e| {
        if let ExprKind::PointValue { func, output, offset } = e.kind {
            if offset != [0; 3] && !values.contains(&(func, output)) {
                values.push((func, output));
            }
        }
    });
    if values.is_empty() {
        return Err(MaterialiseError::NothingShared { stencil: ir.name.clone() });
    }
    crate::ir::visit_exprs(&ir.body, &mut |e| {
        if let ExprKind::PointValue { func, output, offset } = e.kind {
            if values.contains(&(func, output)) {
                for a in 0..3 {
                    lo[a] = lo[a].min(offset[a]);
                    hi[a] = hi[a].max(offset[a]);
                }
            }
        }
    });
    let taken = |name: &str| {
        ir.params.iter().any(|p| p.name == name)
            || ir.locals.iter().any(|l| l.name == name)
            || ir.point_fns.iter().any(|f| f.name == name)
    };
    let n = ir.params.len();
    let mut extra = Vec::with_capacity(values.len());
    for &(func, output) in &values {
        let pf = &ir.point_fns[func];
        let mut name =
            if pf.outputs.len() == 1 { format!("{}_field", pf.name) } else { format!("{}_field{output}", pf.name) };
        while taken(&name) || extra.iter().any(|p: &Param| p.name == name) {
            name.push('_');
        }
        let elem = ir.locals[pf.outputs[output]].ty;
        extra.push(Param { name, kind: ParamKind::Field(FieldParam { elem, writable: true }) });
    }
    let first = StencilIr {
        name: format!("{}_values", ir.name),
        params: ir.params.iter().chain(&extra).cloned().collect(),
        body: values
            .iter()
            .enumerate()
            .map(|(s, &(func, output))| Stmt::Store {
                field: n + s,
                value: Expr {
                    ty: ir.locals[ir.point_fns[func].outputs[output]].ty,
                    kind: ExprKind::PointValue { func, output, offset: [0; 3] },
                },
            })
            .collect(),
        ..ir.clone()
    };
    let read_only = extra.into_iter().map(|p| match p.kind {
        ParamKind::Field(f) => Param { kind: ParamKind::Field(FieldParam { writable: false, ..f }), ..p },
        _ => unreachable!("a field"),
    });
    let mut body = ir.body.clone();
    for s in &mut body {
        load_values(s, &values, n);
    }
    let read_only: Vec<Param> = read_only.collect();
    let mut point = None;
    if let Some((near, far)) = split_sums(ir, &body, n) {
        let mut point_body: Vec<Stmt> = near.into_iter().map(|(field, value)| Stmt::Store { field, value }).collect();
        point_body.extend(first.body.iter().cloned());
        // The parts at the point read the written-out values at offset 0 as point values again
        // (computed there, then stored), so that the point pass reads no extra field.
        for s in &mut point_body {
            unload_values(s, &values, n);
        }
        point = Some(StencilIr { name: format!("{}_point", ir.name), body: point_body, ..first.clone() });
        body = far;
    }
    let second = StencilIr {
        name: format!("{}_gather", ir.name),
        params: ir.params.iter().cloned().chain(read_only).collect(),
        body,
        ..ir.clone()
    };
    Ok(Materialised { first, point, second, values, lo, hi })
}

/// The stores' sums split before their first load of an extra field (index `n` on) at a
/// neighbour: the parts before it (field, value) and the second pass's body (each remaining sum
/// continued from a load of its field at the point; stores with no such load dropped). `None`
/// where the body has another form (anything but stores, a field stored twice or read by a
/// store other than its own at the point, a point function reading a stored field) or nothing
/// would move.
#[allow(clippy::type_complexity)]
fn split_sums(ir: &StencilIr, body: &[Stmt], n: usize) -> Option<(Vec<(usize, Expr)>, Vec<Stmt>)> {
    let mut stored = Vec::new();
    for s in body {
        match s {
            Stmt::Store { field, .. } if !stored.contains(field) => stored.push(*field),
            _ => return None,
        }
    }
    let reads_stored = |e: &Expr, own: Option<usize>| {
        let mut bad = false;
        e.visit(&mut |x| {
            if let ExprKind::Load { field, offset } = x.kind {
                bad |= stored.contains(&field) && !(Some(field) == own && offset == [0; 3]);
            }
        });
        bad
    };
    for f in &ir.point_fns {
        let mut bad = false;
        crate::ir::visit_exprs(&f.body, &mut |e| bad |= reads_stored(e, None));
        if bad {
            return None;
        }
    }
    let far = |e: &Expr| {
        let mut far = false;
        e.visit(&mut |x| far |= matches!(x.kind, ExprKind::Load { field, offset } if field >= n && offset != [0; 3]));
        far
    };
    let (mut near, mut rest, mut moved) = (Vec::new(), Vec::new(), false);
    for s in body {
        let Stmt::Store { field, value } = s else { unreachable!("checked above") };
        if reads_stored(value, Some(*field)) {
            return None;
        }
        if !far(value) {
            near.push((*field, value.clone()));
            moved = true;
            continue;
        }
        // Down the left operands of the sum to the first part with no load at a neighbour.
        let mut value = value.clone();
        if let Some(part) = cut(&mut value, *field, &far) {
            near.push((*field, part));
            moved = true;
        }
        rest.push(Stmt::Store { field: *field, value });
    }
    moved.then_some((near, rest))
}

/// The first left operand down the sum `e` that has no load at a neighbour (`far`), replaced in
/// `e` by a load of `field` at the point; `None` where that operand is that load already.
fn cut(e: &mut Expr, field: usize, far: &dyn Fn(&Expr) -> bool) -> Option<Expr> {
    let ExprKind::Binary(BinOp::Add, a, _) = &mut e.kind else { return None };
    if far(a) {
        return cut(a, field, far);
    }
    if matches!(a.kind, ExprKind::Load { field: f, offset } if f == field && offset == [0; 3]) {
        return None;
    }
    let ty = a.ty;
    Some(std::mem::replace(&mut **a, Expr { ty, kind: ExprKind::Load { field, offset: [0; 3] } }))
}

/// `stmt` with every load of an extra field (`values[s]` in field `n + s`) at the point turned
/// back into its point value.
fn unload_values(stmt: &mut Stmt, values: &[(usize, usize)], n: usize) {
    fn go(e: &mut Expr, values: &[(usize, usize)], n: usize) {
        if let ExprKind::Load { field, offset } = e.kind {
            if field >= n {
                debug_assert_eq!(offset, [0; 3], "only parts with no neighbour value move to the point pass");
                let (func, output) = values[field - n];
                e.kind = ExprKind::PointValue { func, output, offset };
            }
            return;
        }
        match &mut e.kind {
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => go(a, values, n),
            ExprKind::Binary(_, a, b) => {
                go(a, values, n);
                go(b, values, n);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(|a| go(a, values, n)),
            ExprKind::Select(c, a, b) => {
                go(c, values, n);
                go(a, values, n);
                go(b, values, n);
            }
            _ => {}
        }
    }
    if let Stmt::Store { value, .. } = stmt {
        go(value, values, n);
    }
}

/// `stmt` with every written-out value (`values[s]`, in field `n + s`) loaded from its field.
fn load_values(stmt: &mut Stmt, values: &[(usize, usize)], n: usize) {
    match stmt {
        Stmt::Let { init: Some(e), .. }
        | Stmt::Assign { value: e, .. }
        | Stmt::Store { value: e, .. }
        | Stmt::Fold { value: e, .. } => load_in(e, values, n),
        Stmt::Let { init: None, .. } => {}
        Stmt::If { cond, then_body, else_body } => {
            load_in(cond, values, n);
            then_body.iter_mut().chain(else_body.iter_mut()).for_each(|s| load_values(s, values, n));
        }
    }
}

fn load_in(e: &mut Expr, values: &[(usize, usize)], n: usize) {
    match &mut e.kind {
        ExprKind::PointValue { func, output, offset } => {
            if let Some(s) = values.iter().position(|v| *v == (*func, *output)) {
                e.kind = ExprKind::Load { field: n + s, offset: *offset };
            }
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => load_in(a, values, n),
        ExprKind::Binary(_, a, b) => {
            load_in(a, values, n);
            load_in(b, values, n);
        }
        ExprKind::Call(_, args) => args.iter_mut().for_each(|a| load_in(a, values, n)),
        ExprKind::Select(c, a, b) => {
            load_in(c, values, n);
            load_in(a, values, n);
            load_in(b, values, n);
        }
        ExprKind::Lit(_)
        | ExprKind::Local(_)
        | ExprKind::Scalar(_)
        | ExprKind::Load { .. }
        | ExprKind::Level
        | ExprKind::Levels => {}
    }
}
