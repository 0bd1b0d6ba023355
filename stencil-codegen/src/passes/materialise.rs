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
//! **Ranges.** The second pass runs over the launch's range `R`. Each value is needed over `R`
//! grown by the offsets at which the body reads it, each axis on its own (a box that contains
//! the point). Values with the same box share a first pass ([`Materialised::first`]), which
//! writes them over `R` grown by that box, so no value is computed where the body does not read
//! it: a value that the body reads only at `p` and `p − x̂` reads its fields over `R` grown by its
//! own reach and one point down along x, no further, however far along other axes other values
//! are read. Without a point pass each first pass runs over its grown box; with one, the point
//! pass runs over `R` (writing every value there) and each first pass over the rest of its box.
//! [`ValuePass::reads_lo`] and [`ValuePass::reads_hi`] bound where a pass reads the fields: a
//! launch runs the two passes only where these reads stay inside the fields (they stay inside
//! the stencil's own reach wherever the body reads each value at the point itself).

use crate::ir::{BinOp, Expr, ExprKind, FieldParam, Param, ParamKind, StencilIr, Stmt};

/// The two passes of a stencil whose point functions are written out (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Materialised {
    /// The first passes, one per box of offsets at which the body reads values (see the module
    /// docs).
    pub first: Vec<ValuePass>,
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
}

/// A first pass: the values whose reads by the body span the same box of offsets.
#[derive(Clone, Debug, PartialEq)]
pub struct ValuePass {
    /// The stencil's parameters, then one writable field per written-out value (in
    /// [`Materialised::values`] order, every pass the same list); it stores this pass's values
    /// into their fields at its own point, and writes none of the stencil's fields.
    pub ir: StencilIr,
    /// The least offset at which the body reads one of these values, per stencil axis (≤ 0).
    pub lo: [i32; 3],
    /// The greatest such offset, per stencil axis (≥ 0).
    pub hi: [i32; 3],
    /// The least offset from the launch's range at which this pass, run over the range grown by
    /// `lo` and `hi`, reads a field, per stencil axis.
    pub reads_lo: [i32; 3],
    /// The greatest such offset, per stencil axis.
    pub reads_hi: [i32; 3],
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
    /// A first pass was asked for by a number the split does not have.
    NoSuchPass {
        /// The stencil.
        stencil: String,
        /// The number asked for.
        pass: usize,
        /// How many first passes the split has.
        count: usize,
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
            MaterialiseError::NoSuchPass { stencil, pass, count } => write!(
                f,
                "stencil `{stencil}` has {count} first pass(es), one per box of offsets at which its body reads \
                 values: there is no pass {pass}"
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
    // The box of offsets at which the body reads each value (with the point itself).
    let mut boxes = vec![([0i32; 3], [0i32; 3]); values.len()];
    crate::ir::visit_exprs(&ir.body, &mut |e| {
        if let ExprKind::PointValue { func, output, offset } = e.kind {
            if let Some(v) = values.iter().position(|&x| x == (func, output)) {
                let (lo, hi) = &mut boxes[v];
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
    let base = StencilIr { params: ir.params.iter().chain(&extra).cloned().collect(), body: Vec::new(), ..ir.clone() };
    let store = |s: usize| {
        let (func, output) = values[s];
        Stmt::Store {
            field: n + s,
            value: Expr {
                ty: ir.locals[ir.point_fns[func].outputs[output]].ty,
                kind: ExprKind::PointValue { func, output, offset: [0; 3] },
            },
        }
    };
    let mut first: Vec<ValuePass> = Vec::new();
    for (s, &(lo, hi)) in boxes.iter().enumerate() {
        match first.iter_mut().find(|p| (p.lo, p.hi) == (lo, hi)) {
            Some(pass) => pass.ir.body.push(store(s)),
            None => {
                let name = match first.len() {
                    0 => format!("{}_values", ir.name),
                    g => format!("{}_values{g}", ir.name),
                };
                let ir = StencilIr { name, body: vec![store(s)], ..base.clone() };
                first.push(ValuePass { ir, lo, hi, reads_lo: lo, reads_hi: hi });
            }
        }
    }
    for pass in &mut first {
        let inlined = super::inline_point_fns(&pass.ir);
        crate::ir::visit_exprs(&inlined.body, &mut |e| {
            if let ExprKind::Load { offset, .. } = e.kind {
                for a in 0..3 {
                    pass.reads_lo[a] = pass.reads_lo[a].min(pass.lo[a] + offset[a]);
                    pass.reads_hi[a] = pass.reads_hi[a].max(pass.hi[a] + offset[a]);
                }
            }
        });
    }
    let read_only = extra.into_iter().map(|p| match p.kind {
        ParamKind::Field(f) => Param { kind: ParamKind::Field(FieldParam { writable: false, ..f }), ..p },
        _ => unreachable!("a field"),
    });
    let mut body = ir.body.clone();
    crate::ir::visit_exprs_mut(&mut body, &mut |e| {
        if let ExprKind::PointValue { func, output, offset } = e.kind {
            if let Some(s) = values.iter().position(|&v| v == (func, output)) {
                e.kind = ExprKind::Load { field: n + s, offset };
            }
        }
    });
    let read_only: Vec<Param> = read_only.collect();
    let mut point = None;
    if let Some((near, far)) = split_sums(ir, &body, n) {
        let mut point_body: Vec<Stmt> = near.into_iter().map(|(field, value)| Stmt::Store { field, value }).collect();
        point_body.extend((0..values.len()).map(store));
        // The parts at the point read the written-out values at offset 0 as point values again
        // (computed there, then stored), so that the point pass reads no extra field.
        crate::ir::visit_exprs_mut(&mut point_body, &mut |e| {
            if let ExprKind::Load { field, offset } = e.kind {
                if field >= n {
                    debug_assert_eq!(offset, [0; 3], "only parts with no neighbour value move to the point pass");
                    let (func, output) = values[field - n];
                    e.kind = ExprKind::PointValue { func, output, offset };
                }
            }
        });
        point = Some(StencilIr { name: format!("{}_point", ir.name), body: point_body, ..base.clone() });
        body = far;
    }
    let second = StencilIr {
        name: format!("{}_gather", ir.name),
        params: ir.params.iter().cloned().chain(read_only).collect(),
        body,
        ..ir.clone()
    };
    Ok(Materialised { first, point, second, values })
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
