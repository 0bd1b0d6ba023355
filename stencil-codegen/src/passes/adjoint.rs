//! The adjoint of a stencil that is linear in some of its read fields, as another stencil, in
//! gather form.
//!
//! The forward stencil, run over a range `R`, computes for every written field `w` and point
//! `p` of `R`
//!
//! ```text
//! w[p] = Σ_l Σ_o c_{w,l,o}(p) · l[p + o]  +  (terms without any field of L)
//! ```
//!
//! where `L` are the fields it is linear in (the requested ones) and the coefficients `c` depend
//! only on the other fields and the scalars, which are held fixed. Its adjoint (the transpose of
//! the derivative with respect to `L`) maps cotangents `w̄` of the outputs to cotangents `l̄` of
//! the inputs:
//!
//! ```text
//! l̄[q] += Σ_w Σ_o [q − o ∈ R] · c_{w,l,o}(q − o) · w̄[q − o]
//! ```
//!
//! Each adjoint point gathers from its neighbours at the negated offsets, with the coefficient
//! evaluated at the forward point `q − o` (every load in it shifted by `−o`), so the adjoint is a
//! point-parallel stencil with no write conflict. The terms that do not depend on `L` (sources,
//! the previous value of an accumulated output) do not enter the adjoint.
//!
//! **Scaled cotangents.** Evaluated tap by tap, the coefficients cost as many times more than the
//! forward's as there are taps: a wave update's `Δt² c_k / m / (1 + d)` is 2 divisions at the
//! forward point, but 50 in the gather, one pair per neighbour. So each coefficient is split into
//! a constant factor `k` (scalars and literals only) and a point part `g` (the factors that read
//! fields, through products, quotients and negations), and the body becomes
//!
//! ```text
//! z_{w,g}(p) = [p ∈ R] · w̄[p] · g(p)          (a point function per distinct (w, g))
//! l̄[q] += Σ_{taps} k · z_{w,g}(q − o)
//! ```
//!
//! The CPU nest and the GPU's depot kernel compute each point function once per point, so the
//! wave's adjoint divides twice per point and gathers with constant weights, as the forward does.
//! Other GPU strategies inline the point functions (one value per tap, as before the split).
//!
//! **Parameters.** The adjoint has the forward's parameters in the same places, then one more:
//!
//! - a scalar stays (same name);
//! - a read field not in `L` stays, read only (same name);
//! - a field `u` of `L` becomes `u_bar: &mut`, which the adjoint **accumulates** into
//!   (`u_bar[q] += ...`): several forward outputs and several stencils contribute to one input,
//!   so the caller zeroes it once and lets every adjoint add to it;
//! - a written field `out` becomes `out_bar: &` (read at any offset);
//! - last, `range_mask`, a read field of the element type of the first field of `L`: nonzero
//!   exactly on the forward launch's range `R` (the `[q − o ∈ R]` above).
//!
//! A name the forward already uses gets `_` appended until it is free.
//!
//! **Range.** The adjoint runs over the points `Q` whose cotangents are wanted. Over `Q = R` it
//! is the exact adjoint of the forward with every input outside `R` held fixed (a Dirichlet halo);
//! over `R` grown by the reach into `L` it is the exact adjoint with every input point a
//! variable. It reads `w̄` and the mask at `Q` shifted by the negated offsets, and the fixed fields
//! at those points plus their forward offsets.
//!
//! **Linearity.** A term that is nonlinear in a field of `L` is an [`AdjointError`] naming it: a
//! product of two such terms, a division by one, a math function of one (other than
//! `mul_add`'s linear uses), a comparison or branch condition that depends on one, a conversion,
//! or a coefficient that reads a written field. Column sweeps and reductions have no adjoint yet.

use super::symbolic::{State, StateMut, Symbolic, Term};
use crate::ir::{
    BinOp, Expr, ExprKind, FieldParam, Literal, Local, MathFn, Param, ParamId, ParamKind, PointFn, ScalarType,
    StencilIr, Stmt, UnOp,
};
use std::fmt;

/// The suffix of the adjoint's name (`wave` → `wave_adjoint`, functor `WaveAdjoint`) and of its
/// functor type.
pub const ADJOINT_SUFFIX: &str = "_adjoint";
/// The suffix of a cotangent's name (`u` → `u_bar`).
pub const BAR_SUFFIX: &str = "_bar";
/// The name of the adjoint's last parameter, the forward range's mask.
pub const MASK_NAME: &str = "range_mask";

/// What an adjoint parameter stands for, by the forward parameter in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdjointRole {
    /// A scalar of the forward, unchanged.
    Scalar,
    /// A read field the forward is not linear in: held fixed, unchanged.
    Fixed,
    /// The cotangent of a field of `L` (written: accumulated into).
    Gradient,
    /// The cotangent of a written field of the forward (read).
    Cotangent,
    /// The forward range's mask (the last parameter).
    Mask,
    /// An adjoint step's cotangent of the written field this many steps later (read).
    Later {
        /// Steps after the one the adjoint step undoes (2 for the level before the newest).
        steps: u32,
    },
    /// The factor `ρ` that turns a scaled cotangent into the cotangent (`λ = ρ μ`): written by
    /// the scale stencil, read by a scaled gradient.
    CotangentScale,
}

/// An adjoint stencil: its IR, and per parameter what it stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct Adjoint {
    /// The adjoint stencil (parameter `i < n` in place of the forward's parameter `i`, the mask
    /// last).
    pub ir: StencilIr,
    /// The role of each of its parameters.
    pub roles: Vec<AdjointRole>,
}

pub use super::symbolic::Site;

/// Why a stencil has no adjoint with respect to the fields asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdjointErrorKind {
    /// A product of two terms that both depend on fields of `L`.
    Product {
        /// The product, as written (roughly).
        term: String,
        /// The fields each side depends on.
        fields: String,
    },
    /// A division by a term that depends on a field of `L`.
    Division {
        /// The quotient.
        term: String,
        /// The field.
        fields: String,
    },
    /// A math function of a term that depends on a field of `L`.
    Call {
        /// The call.
        term: String,
        /// The function.
        func: &'static str,
        /// The field.
        fields: String,
    },
    /// An operator other than `+ - * /` and negation applied to such a term.
    Operator {
        /// The operation.
        term: String,
        /// The operator.
        op: &'static str,
        /// The field.
        fields: String,
    },
    /// A comparison or a branch condition that depends on a field of `L`.
    Condition {
        /// The condition.
        term: String,
        /// The field.
        fields: String,
    },
    /// A conversion (`as`) of such a term to another type.
    Cast {
        /// The conversion.
        term: String,
        /// The field.
        fields: String,
    },
    /// A coefficient of a field of `L` reads a field the forward writes.
    CoefficientReadsOutput {
        /// The written field.
        field: String,
    },
    /// A field of `L` the stencil writes.
    Written {
        /// The field.
        field: String,
    },
    /// A field of `L` the stencil never reads.
    NotRead {
        /// The field.
        field: String,
    },
    /// A name in `adjoint(..)` that is no parameter of the stencil.
    Unknown {
        /// The name.
        name: String,
    },
    /// A parameter of `L` that is no field.
    NotAField {
        /// The parameter.
        name: String,
    },
    /// A column sweep (its adjoint sweeps the other way; not built).
    Sweep,
    /// A stencil with a reduction parameter.
    Reduction {
        /// The reduction.
        name: String,
    },
    /// A gradient: a function without a derivative rule applied to a term that depends on a
    /// parameter field.
    NoDerivative {
        /// The call.
        term: String,
        /// The function.
        func: &'static str,
        /// The field.
        fields: String,
    },
    /// An adjoint step of a stencil that writes other than one field.
    StepWrites {
        /// The written fields.
        fields: Vec<String>,
    },
    /// A time level of an adjoint step that cannot be one.
    StepLevel {
        /// The field.
        name: String,
        /// Why not (`is named twice`, ...).
        reason: &'static str,
    },
    /// A gradient: a name in `gradient(..)` that is no read field of the stencil.
    GradientParam {
        /// The name.
        name: String,
        /// Why not (`is not a parameter of this stencil`, ...).
        reason: &'static str,
    },
    /// A scaled adjoint step: two taps at neighbours whose coefficients have different point
    /// parts (the factors that read fields).
    ScaledStep {
        /// The point part of the first tap at a neighbour.
        first: String,
        /// Another one.
        other: String,
        /// The offset of the tap that has `other`.
        offset: [i32; 3],
    },
}

/// A stencil that has no adjoint with respect to the fields asked for: why, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdjointError {
    /// Why.
    pub kind: AdjointErrorKind,
    /// Where in the forward body.
    pub site: Site,
}

impl fmt::Display for AdjointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AdjointErrorKind::*;
        let linear = "an adjoint needs every written value to be linear in the fields it is taken with respect to";
        match &self.kind {
            Product { term, fields } => write!(
                f,
                "`{term}` is a product of two terms that depend on {fields}: {linear}; take the adjoint with respect to fewer fields, or hold one factor fixed by passing it as another field"
            ),
            Division { term, fields } => {
                write!(f, "`{term}` divides by a term that depends on {fields}: {linear} (dividing by a fixed field or scalar is fine)")
            }
            Call { term, func, fields } => {
                write!(f, "`{term}` applies `{func}` to a term that depends on {fields}: {linear}")
            }
            Operator { term, op, fields } => {
                write!(f, "`{term}` applies `{op}` to a term that depends on {fields}: {linear} (only `+`, `-`, and `*` or `/` by fixed values are)")
            }
            Condition { term, fields } => write!(
                f,
                "`{term}` depends on {fields} and decides a branch or compares: {linear}; conditions may use only fixed fields and scalars"
            ),
            Cast { term, fields } => {
                write!(f, "`{term}` converts a term that depends on {fields} to another type: keep the linear terms in the fields' element type")
            }
            CoefficientReadsOutput { field } => write!(
                f,
                "a coefficient of a linear term reads `{field}`, which the stencil writes: the adjoint takes `{field}`'s place with its cotangent `{field}{BAR_SUFFIX}`; pass the value as a separate read field"
            ),
            Written { field } => write!(
                f,
                "`{field}` is written by the stencil: an adjoint is taken with respect to read fields (`&Field`); the written fields' cotangents are its inputs"
            ),
            NotRead { field } => {
                write!(f, "`{field}` is never read by the stencil, so it has no adjoint with respect to it: name only fields the stencil reads")
            }
            Unknown { name } => write!(f, "`{name}` is not a parameter of this stencil: `adjoint(..)` names the read fields the written ones are linear in"),
            NotAField { name } => {
                write!(f, "`{name}` is not a field: an adjoint is taken with respect to read fields (`&Field`); scalars are held fixed")
            }
            Sweep => write!(f, "a column sweep has no adjoint yet: write the update as a point stencil"),
            Reduction { name } => {
                write!(f, "a stencil with a reduction (`{name}`) has no adjoint yet: fold in a separate stencil")
            }
            NoDerivative { term, func, fields } => write!(
                f,
                "`{term}` applies `{func}` to a term that depends on {fields}, and a gradient has no derivative rule for `{func}`: the rules cover `+`, `-`, `*`, `/`, `mul_add`, `sqrt`, `recip`, `powi`, `powf` (fixed exponent), `exp`, `ln`, `sin`, `cos`, `tanh`, `abs`, `min` and `max`"
            ),
            StepWrites { fields } => write!(
                f,
                "an adjoint step needs a stencil that writes exactly one field (the new time level); this one writes {}: use `adjoint(..)`, which accumulates into each cotangent",
                if fields.is_empty() { "none".to_string() } else { fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ") }
            ),
            StepLevel { name, reason } => write!(
                f,
                "`{name}` {reason}: `adjoint_step(..)` names the time levels the update reads, newest first, each once, of the written field's element type"
            ),
            GradientParam { name, reason } => write!(
                f,
                "`{name}` {reason}: `gradient(..)` names the read fields (`&Field`) the derivative of the update is taken with respect to"
            ),
            ScaledStep { first, other, offset } => write!(
                f,
                "the taps at neighbours scale their cotangents by `{first}` and (at offset {offset:?}) by `{other}`: a scaled reverse step carries one scale for every tap at a neighbour; use `adjoint_step(..)`, which gathers each tap's own"
            ),
        }
    }
}

impl std::error::Error for AdjointError {}

/// The symbolic value of an expression at the forward point: fixed (no field of `L` in it), or
/// linear in `L` (its derivative; the part that does not depend on `L` is dropped).
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Fixed(Expr),
    Lin(Vec<Term>),
}

struct Eval<'a> {
    ir: &'a StencilIr,
    linear: &'a [bool],
    locals: Vec<Option<Val>>,
    stored: Vec<Option<Val>>,
    site: Site,
}

/// A stencil's linear part: the stencil with its point functions inlined, which parameters are
/// in `L`, and the taps `(field of L, written field, offset, coefficient)` in first-seen order.
pub(super) struct Linear {
    pub flat: StencilIr,
    pub linear: Vec<bool>,
    pub taps: Vec<(ParamId, ParamId, [i32; 3], Expr)>,
}

/// The linear part of `ir` in the fields `wrt`, checked: no sweep or reduction, each field of
/// `wrt` a read field that the body reads, every written value linear in them with coefficients
/// that read no written field.
pub(super) fn linear_taps(ir: &StencilIr, wrt: &[ParamId]) -> Result<Linear, AdjointError> {
    let fail = |kind| Err(AdjointError { kind, site: Site::Stencil });
    if ir.sweep.is_some() {
        return fail(AdjointErrorKind::Sweep);
    }
    if let Some((r, _)) = ir.reductions().next() {
        return fail(AdjointErrorKind::Reduction { name: ir.params[r].name.clone() });
    }
    let flat = super::inline_point_fns(ir);
    let mut linear = vec![false; ir.params.len()];
    for &id in wrt {
        let name = ir.params[id].name.clone();
        match ir.field(id) {
            None => return fail(AdjointErrorKind::NotAField { name }),
            Some(f) if f.writable => return fail(AdjointErrorKind::Written { field: name }),
            Some(_) => {}
        }
        let mut read = false;
        crate::ir::visit_exprs(&flat.body, &mut |e| {
            read |= matches!(e.kind, ExprKind::Load { field, .. } if field == id)
        });
        if !read {
            return fail(AdjointErrorKind::NotRead { field: name });
        }
        linear[id] = true;
    }
    let mut eval = Eval {
        ir: &flat,
        linear: &linear,
        locals: vec![None; flat.locals.len()],
        stored: vec![None; flat.params.len()],
        site: Site::Stencil,
    };
    eval.block(&flat.body)?;

    let mut taps: Vec<(ParamId, ParamId, [i32; 3], Expr)> = Vec::new();
    for w in 0..flat.params.len() {
        let Some(Val::Lin(terms)) = eval.stored[w].take() else { continue };
        for t in terms {
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
            taps.push((t.field, w, t.offset, t.coef));
        }
    }
    Ok(Linear { flat, linear, taps })
}

/// A name none of `flat`'s parameters has: `base`, with `_` appended until it is free.
pub(super) fn fresh_name(flat: &StencilIr, base: String) -> String {
    let mut name = base;
    while flat.params.iter().any(|p| p.name == name) {
        name.push('_');
    }
    name
}

/// The adjoint of `ir` with respect to the fields `wrt` (parameter indices). See the module
/// documentation for its parameters, its body and how to run it.
pub fn adjoint(ir: &StencilIr, wrt: &[ParamId]) -> Result<Adjoint, AdjointError> {
    let Linear { flat, linear, taps } = linear_taps(ir, wrt)?;
    let fresh = |base: String| fresh_name(&flat, base);

    // The parameters: the forward's, roles swapped, then the mask.
    let mut params = Vec::with_capacity(flat.params.len() + 1);
    let mut roles = Vec::with_capacity(flat.params.len() + 1);
    for (i, p) in flat.params.iter().enumerate() {
        let (param, role) = match p.kind {
            ParamKind::Scalar(_) | ParamKind::Held(_) => (p.clone(), AdjointRole::Scalar),
            ParamKind::Field(f) if linear[i] => (
                Param {
                    name: fresh(format!("{}{BAR_SUFFIX}", p.name)),
                    kind: ParamKind::Field(FieldParam { writable: true, ..f }),
                },
                AdjointRole::Gradient,
            ),
            ParamKind::Field(f) if f.writable => (
                Param {
                    name: fresh(format!("{}{BAR_SUFFIX}", p.name)),
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
    let first = *wrt.first().expect("an adjoint is taken with respect to at least one field");
    let mask_elem = flat.field(first).expect("checked above").elem;
    let mask = params.len();
    params.push(Param {
        name: fresh(MASK_NAME.to_string()),
        kind: ParamKind::Field(FieldParam { elem: mask_elem, writable: false }),
    });
    roles.push(AdjointRole::Mask);

    let (body, locals, point_fns) = gather(&flat, &linear, &taps, (mask, mask_elem), &fresh);
    let ir = StencilIr {
        name: format!("{}{ADJOINT_SUFFIX}", flat.name),
        dim: flat.dim,
        index_name: flat.index_name.clone(),
        params,
        locals,
        body,
        sweep: None,
        point_fns,
    };
    Ok(Adjoint { ir, roles })
}

/// The adjoint's body: one point function per written field `w` and distinct point part `g` of
/// the taps' coefficients (the scaled cotangent `[p ∈ R] · w̄[p] · g(p)`), and one accumulating
/// store per field of `L` gathering them with the constant factors. `mask` is the mask
/// parameter and its element type; `fresh` makes a name no parameter has.
#[allow(clippy::type_complexity)]
fn gather(
    flat: &StencilIr,
    linear: &[bool],
    taps: &[(ParamId, ParamId, [i32; 3], Expr)],
    mask: (ParamId, ScalarType),
    fresh: &dyn Fn(String) -> String,
) -> (Vec<Stmt>, Vec<Local>, Vec<PointFn>) {
    let mut scaled = ScaledCotangents::new(mask, fresh);
    let weights: Vec<_> = taps
        .iter()
        .map(|(_, w, _, coef)| {
            let ty = flat.field(*w).expect("a field").elem;
            scaled.tap(*w, ty, &format!("{}{BAR_SUFFIX}", flat.params[*w].name), coef)
        })
        .collect();

    // The body: one accumulating store per field of L, `l̄[q] += Σ k · z(q − o)`.
    let mut body = Vec::new();
    for l in (0..flat.params.len()).filter(|&l| linear[l]) {
        let ty = flat.field(l).expect("a field").elem;
        let mut value = load(ty, l, [0; 3]);
        for ((_, _, o, _), (func, k)) in taps.iter().zip(&weights).filter(|(t, _)| t.0 == l) {
            value = add(value, scaled.gathered(ty, *func, k, *o));
        }
        body.push(Stmt::Store { field: l, value });
    }
    (body, scaled.locals, scaled.point_fns)
}

/// The scaled cotangents of an adjoint's taps: one point function per cotangent field and
/// distinct point part `g` of the coefficients, `z(p) = [p ∈ R] · w̄[p] · g(p)`, computed once
/// per point.
pub(super) struct ScaledCotangents<'a> {
    mask: (ParamId, ScalarType),
    fresh: &'a dyn Fn(String) -> String,
    keys: Vec<(ParamId, Factored)>,
    pub locals: Vec<Local>,
    pub point_fns: Vec<PointFn>,
}

impl<'a> ScaledCotangents<'a> {
    pub fn new(mask: (ParamId, ScalarType), fresh: &'a dyn Fn(String) -> String) -> Self {
        ScaledCotangents { mask, fresh, keys: Vec::new(), locals: Vec::new(), point_fns: Vec::new() }
    }

    /// The point function of the tap with coefficient `coef` whose cotangent is the field `w`
    /// (element type `ty`; the function named `{prefix}_scaledN`), made on first use, and the
    /// tap's constant factor.
    pub fn tap(&mut self, w: ParamId, ty: ScalarType, prefix: &str, coef: &Expr) -> (usize, Option<Expr>) {
        let f = factor(coef);
        let key = (w, Factored { k: None, ..f.clone() });
        let func = self.keys.iter().position(|s| *s == key).unwrap_or_else(|| {
            let (mask, mask_elem) = self.mask;
            let mut value = load(ty, w, [0; 3]);
            value = f.num.iter().fold(value, |v, n| mul(v, n.clone()));
            value = f.den.iter().fold(value, |v, d| div(v, d.clone()));
            let inside = Expr {
                ty: ScalarType::Bool,
                kind: ExprKind::Binary(BinOp::Ne, Box::new(load(mask_elem, mask, [0; 3])), Box::new(zero(mask_elem))),
            };
            let name = (self.fresh)(format!("{prefix}_scaled{}", self.keys.len()));
            self.locals.push(Local { name: format!("{name}_value"), ty });
            let local = self.locals.len() - 1;
            self.point_fns.push(PointFn {
                name,
                body: vec![Stmt::Let { local, init: Some(select(&inside, value, zero(ty))) }],
                outputs: vec![local],
            });
            self.keys.push(key);
            self.keys.len() - 1
        });
        (func, f.k)
    }

    /// The term of a tap at forward offset `o`: `k · z(q − o)`.
    pub fn gathered(&self, ty: ScalarType, func: usize, k: &Option<Expr>, o: [i32; 3]) -> Expr {
        let z = Expr { ty, kind: ExprKind::PointValue { func, output: 0, offset: [-o[0], -o[1], -o[2]] } };
        k.clone().map_or(z.clone(), |k| mul(k, z))
    }
}

/// A coefficient as `k · Π num / Π den`: `k` reads no field (the same at every forward point),
/// `num` and `den` are the factors that do, in the order they are applied.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Factored {
    pub k: Option<Expr>,
    pub num: Vec<Expr>,
    pub den: Vec<Expr>,
}

/// Whether `e` has the same value at every point (no load, local or point value in it).
fn is_constant(e: &Expr) -> bool {
    let mut constant = true;
    e.visit(&mut |x| {
        constant &= !matches!(
            x.kind,
            ExprKind::Load { .. }
                | ExprKind::Local(_)
                | ExprKind::PointValue { .. }
                | ExprKind::Level
                | ExprKind::Levels
        )
    });
    constant
}

/// `coef` split into its constant factor and the factors that read fields, through products,
/// quotients and negations; any other form that reads a field is one factor.
pub(super) fn factor(coef: &Expr) -> Factored {
    let constant = |k| Factored { k: Some(k), num: Vec::new(), den: Vec::new() };
    if is_constant(coef) {
        return constant(coef.clone());
    }
    match &coef.kind {
        ExprKind::Binary(BinOp::Mul, a, b) => {
            let (a, b) = (factor(a), factor(b));
            let k = match (a.k, b.k) {
                (Some(x), Some(y)) => Some(mul(x, y)),
                (x, y) => x.or(y),
            };
            Factored { k, num: [a.num, b.num].concat(), den: [a.den, b.den].concat() }
        }
        ExprKind::Binary(BinOp::Div, a, b) if is_constant(b) => {
            let a = factor(a);
            Factored { k: Some(div(a.k.unwrap_or_else(|| one(coef.ty)), (**b).clone())), ..a }
        }
        ExprKind::Binary(BinOp::Div, a, b) => {
            let mut a = factor(a);
            a.den.push((**b).clone());
            a
        }
        ExprKind::Unary(UnOp::Neg, a) => {
            let a = factor(a);
            Factored { k: Some(negated(a.k.unwrap_or_else(|| one(coef.ty)))), ..a }
        }
        _ => Factored { k: None, num: vec![coef.clone()], den: Vec::new() },
    }
}

/// `-e`, folded into a literal.
fn negated(e: Expr) -> Expr {
    match e.kind {
        ExprKind::Lit(Literal::Float(a, b)) => Expr { ty: e.ty, kind: ExprKind::Lit(Literal::Float(-a, -b)) },
        _ => neg(e),
    }
}

pub(super) fn div(a: Expr, b: Expr) -> Expr {
    Expr { ty: a.ty, kind: ExprKind::Binary(BinOp::Div, Box::new(a), Box::new(b)) }
}

pub(super) fn load(ty: ScalarType, field: ParamId, offset: [i32; 3]) -> Expr {
    Expr { ty, kind: ExprKind::Load { field, offset } }
}

pub(super) fn zero(ty: ScalarType) -> Expr {
    Expr { ty, kind: ExprKind::Lit(Literal::Float(0.0, 0.0)) }
}

fn is_one(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Lit(Literal::Float(a, _)) if a == 1.0)
}

pub(super) fn add(a: Expr, b: Expr) -> Expr {
    Expr { ty: a.ty, kind: ExprKind::Binary(BinOp::Add, Box::new(a), Box::new(b)) }
}

pub(super) fn mul(a: Expr, b: Expr) -> Expr {
    if is_one(&a) {
        return b;
    }
    if is_one(&b) {
        return a;
    }
    Expr { ty: a.ty, kind: ExprKind::Binary(BinOp::Mul, Box::new(a), Box::new(b)) }
}

pub(super) fn neg(a: Expr) -> Expr {
    Expr { ty: a.ty, kind: ExprKind::Unary(UnOp::Neg, Box::new(a)) }
}

pub(super) fn select(cond: &Expr, then: Expr, otherwise: Expr) -> Expr {
    Expr { ty: then.ty, kind: ExprKind::Select(Box::new(cond.clone()), Box::new(then), Box::new(otherwise)) }
}

/// `e` with every load shifted by `by` (`e` evaluated at the point `by` away).
pub(super) fn shift(e: &Expr, by: [i32; 3]) -> Expr {
    let mut e = e.clone();
    shift_in_place(&mut e, by);
    e
}

fn shift_in_place(e: &mut Expr, by: [i32; 3]) {
    match &mut e.kind {
        ExprKind::Load { offset, .. } => *offset = [offset[0] + by[0], offset[1] + by[1], offset[2] + by[2]],
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => shift_in_place(a, by),
        ExprKind::Binary(_, a, b) => {
            shift_in_place(a, by);
            shift_in_place(b, by);
        }
        ExprKind::Call(_, args) => args.iter_mut().for_each(|a| shift_in_place(a, by)),
        ExprKind::Select(c, a, b) => {
            shift_in_place(c, by);
            shift_in_place(a, by);
            shift_in_place(b, by);
        }
        ExprKind::Lit(_) | ExprKind::Local(_) | ExprKind::Scalar(_) | ExprKind::Level | ExprKind::Levels => {}
        ExprKind::PointValue { offset, .. } => *offset = [offset[0] + by[0], offset[1] + by[1], offset[2] + by[2]],
    }
}

impl Val {
    fn scale(terms: Vec<Term>, f: impl Fn(Expr) -> Expr) -> Val {
        Val::Lin(terms.into_iter().map(|t| Term { coef: f(t.coef), ..t }).collect())
    }
}

impl Symbolic for Eval<'_> {
    type Error = AdjointError;
    type V = Val;
    const NO_FIELD: &'static str = "a requested field";

    fn ir(&self) -> &StencilIr {
        self.ir
    }

    fn followed(&self) -> &[bool] {
        self.linear
    }

    fn state(&self) -> State<'_, Val> {
        (&self.locals, &self.stored, &self.site)
    }

    fn state_mut(&mut self) -> StateMut<'_, Val> {
        (&mut self.locals, &mut self.stored, &mut self.site)
    }

    fn expr(&self, e: &Expr) -> Result<Val, AdjointError> {
        Eval::expr(self, e)
    }

    /// A condition must not depend on the fields the adjoint is taken in.
    fn condition(&self, cond: &Expr) -> Result<Expr, AdjointError> {
        match self.expr(cond)? {
            Val::Fixed(c) => Ok(c),
            Val::Lin(_) => {
                let kind = AdjointErrorKind::Condition { term: render(self.ir, cond), fields: self.fields_of(cond) };
                Err(AdjointError { kind, site: self.site.clone() })
            }
        }
    }

    fn fixed(e: Expr) -> Val {
        Val::Fixed(e)
    }

    fn merge(cond: &Expr, a: Val, b: Val) -> Val {
        merge(cond, a, b)
    }

    fn terms(v: &Val) -> &[Term] {
        match v {
            Val::Fixed(_) => &[],
            Val::Lin(terms) => terms,
        }
    }
}

impl Eval<'_> {
    fn error(&self, e: &Expr, kind: impl FnOnce(String, String) -> AdjointErrorKind) -> AdjointError {
        AdjointError { kind: kind(render(self.ir, e), self.fields_of(e)), site: self.site.clone() }
    }

    fn expr(&self, e: &Expr) -> Result<Val, AdjointError> {
        use Val::{Fixed, Lin};
        let fixed = |kind| Ok(Fixed(Expr { ty: e.ty, kind }));
        Ok(match &e.kind {
            ExprKind::Lit(_) | ExprKind::Scalar(_) | ExprKind::Level | ExprKind::Levels => Fixed(e.clone()),
            ExprKind::Local(l) => self.locals[*l].clone().expect("a local is set before it is read"),
            ExprKind::Load { field, offset } => {
                if self.linear[*field] {
                    Lin(vec![Term { field: *field, offset: *offset, coef: one(e.ty) }])
                } else if let Some(v) = self.stored[*field].as_ref().filter(|_| *offset == [0; 3]) {
                    v.clone()
                } else {
                    Fixed(e.clone())
                }
            }
            ExprKind::PointValue { .. } => unreachable!("point functions are inlined before"),
            ExprKind::Unary(op, a) => match (op, self.expr(a)?) {
                (_, Fixed(a)) => return fixed(ExprKind::Unary(*op, Box::new(a))),
                (UnOp::Neg, Lin(t)) => Val::scale(t, neg),
                (UnOp::Not, Lin(_)) => {
                    return Err(self.error(e, |term, fields| AdjointErrorKind::Operator { term, op: "!", fields }))
                }
            },
            ExprKind::Cast(a) => match self.expr(a)? {
                Fixed(a) => return fixed(ExprKind::Cast(Box::new(a))),
                Lin(t) if a.ty == e.ty => Lin(t),
                Lin(_) => return Err(self.error(e, |term, fields| AdjointErrorKind::Cast { term, fields })),
            },
            ExprKind::Binary(op, a, b) => {
                let (va, vb) = (self.expr(a)?, self.expr(b)?);
                match (op, va, vb) {
                    (_, Fixed(a), Fixed(b)) => return fixed(ExprKind::Binary(*op, Box::new(a), Box::new(b))),
                    (op, _, _) if op.is_comparison() => {
                        return Err(self.error(e, |term, fields| AdjointErrorKind::Condition { term, fields }))
                    }
                    (BinOp::Add, Lin(mut x), Lin(y)) => {
                        x.extend(y);
                        Lin(x)
                    }
                    (BinOp::Sub, Lin(mut x), Lin(y)) => {
                        let Lin(y) = Val::scale(y, neg) else { unreachable!() };
                        x.extend(y);
                        Lin(x)
                    }
                    (BinOp::Add | BinOp::Sub, Lin(x), Fixed(_)) | (BinOp::Add, Fixed(_), Lin(x)) => Lin(x),
                    (BinOp::Sub, Fixed(_), Lin(y)) => Val::scale(y, neg),
                    (BinOp::Mul, Lin(_), Lin(_)) => {
                        return Err(self.error(e, |term, fields| AdjointErrorKind::Product { term, fields }))
                    }
                    (BinOp::Mul, Lin(x), Fixed(f)) => Val::scale(x, |c| mul(c, f.clone())),
                    (BinOp::Mul, Fixed(f), Lin(y)) => Val::scale(y, |c| mul(f.clone(), c)),
                    (BinOp::Div, Lin(x), Fixed(f)) => Val::scale(x, |c| Expr {
                        ty: c.ty,
                        kind: ExprKind::Binary(BinOp::Div, Box::new(c), Box::new(f.clone())),
                    }),
                    (BinOp::Div, _, Lin(_)) => {
                        return Err(
                            self.error(b, |_, fields| AdjointErrorKind::Division { term: render(self.ir, e), fields })
                        )
                    }
                    (op, _, _) => {
                        let op = op.symbol();
                        return Err(self.error(e, |term, fields| AdjointErrorKind::Operator { term, op, fields }));
                    }
                }
            }
            ExprKind::Call(func, args) => {
                let vals = args.iter().map(|a| self.expr(a)).collect::<Result<Vec<_>, _>>()?;
                if vals.iter().all(|v| matches!(v, Fixed(_))) {
                    let args = vals.into_iter().map(|v| if let Fixed(x) = v { x } else { unreachable!() }).collect();
                    return fixed(ExprKind::Call(*func, args));
                }
                match (func, <[Val; 3]>::try_from(vals)) {
                    // a * b + c, linear when at most one factor is.
                    (MathFn::MulAdd, Ok([a, b, c])) => {
                        let product = match (a, b) {
                            (Lin(_), Lin(_)) => {
                                return Err(self.error(e, |term, fields| AdjointErrorKind::Product { term, fields }))
                            }
                            (Lin(x), Fixed(f)) => Val::scale(x, |k| mul(k, f.clone())),
                            (Fixed(f), Lin(y)) => Val::scale(y, |k| mul(f.clone(), k)),
                            (Fixed(_), Fixed(_)) => Lin(Vec::new()),
                        };
                        match (product, c) {
                            (Lin(mut x), Lin(y)) => {
                                x.extend(y);
                                Lin(x)
                            }
                            (product, Fixed(_)) => product,
                            (Fixed(_), c) => c,
                        }
                    }
                    _ => {
                        let func = func.rust_name();
                        return Err(self.error(e, |term, fields| AdjointErrorKind::Call { term, func, fields }));
                    }
                }
            }
            ExprKind::Select(c, a, b) => merge(&self.condition(c)?, self.expr(a)?, self.expr(b)?),
        })
    }
}

pub(super) fn one(ty: ScalarType) -> Expr {
    Expr { ty, kind: ExprKind::Lit(Literal::Float(1.0, 1.0)) }
}

/// The value of `if c { a } else { b }`.
fn merge(c: &Expr, a: Val, b: Val) -> Val {
    match (a, b) {
        (a, b) if a == b => a,
        (Val::Fixed(a), Val::Fixed(b)) => Val::Fixed(select(c, a, b)),
        (a, b) => {
            let terms = |v: Val| match v {
                Val::Lin(t) => t,
                Val::Fixed(_) => Vec::new(),
            };
            let mut out: Vec<Term> =
                terms(a).into_iter().map(|t| Term { coef: select(c, t.coef.clone(), zero(t.coef.ty)), ..t }).collect();
            out.extend(terms(b).into_iter().map(|t| Term { coef: select(c, zero(t.coef.ty), t.coef.clone()), ..t }));
            Val::Lin(out)
        }
    }
}

/// An expression as the user would write it (roughly: locals by their names, loads as
/// `f[idx.ix::<a, b, c>()]`), for error messages.
pub fn render(ir: &StencilIr, e: &Expr) -> String {
    let idx = &ir.index_name;
    let r = |x: &Expr| render(ir, x);
    let paren = |x: &Expr| match x.kind {
        ExprKind::Binary(..) | ExprKind::Select(..) | ExprKind::Cast(_) => format!("({})", r(x)),
        _ => r(x),
    };
    match &e.kind {
        ExprKind::Lit(Literal::Float(v, _)) => format!("{v:?}"),
        ExprKind::Lit(Literal::Int(v)) => v.to_string(),
        ExprKind::Lit(Literal::Bool(v)) => v.to_string(),
        ExprKind::Local(l) => ir.locals[*l].name.clone(),
        ExprKind::Scalar(p) => ir.params[*p].name.clone(),
        ExprKind::Load { field, offset } => {
            let name = &ir.params[*field].name;
            if *offset == [0; 3] {
                format!("{name}[{idx}]")
            } else {
                let o: Vec<String> = offset[..ir.dim].iter().map(|v| v.to_string()).collect();
                format!("{name}[{idx}.ix::<{}>()]", o.join(", "))
            }
        }
        ExprKind::Unary(op, a) => format!("{}{}", if *op == UnOp::Neg { "-" } else { "!" }, paren(a)),
        ExprKind::Binary(op, a, b) => format!("{} {} {}", paren(a), op.symbol(), paren(b)),
        ExprKind::Cast(a) => format!("{} as {}", paren(a), e.ty),
        ExprKind::Call(f, args) => {
            let rest: Vec<String> = args[1..].iter().map(r).collect();
            format!("{}.{}({})", paren(&args[0]), f.rust_name(), rest.join(", "))
        }
        ExprKind::Select(c, a, b) => format!("if {} {{ {} }} else {{ {} }}", r(c), r(a), r(b)),
        ExprKind::Level => format!("{idx}.level()"),
        ExprKind::Levels => format!("{idx}.levels()"),
        ExprKind::PointValue { func, output, .. } => format!("{}(..).{output}", ir.point_fns[*func].name),
    }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;

    fn lower(source: &str) -> StencilIr {
        StencilIr::from_source(source).unwrap_or_else(|e| panic!("{}", e.kind))
    }

    fn adjoint_of(source: &str, wrt: &[&str]) -> Result<Adjoint, AdjointError> {
        let ir = lower(source);
        let ids: Vec<ParamId> = wrt.iter().map(|n| ir.params.iter().position(|p| p.name == *n).expect(n)).collect();
        adjoint(&ir, &ids)
    }

    /// The taps of the store into `field`: (cotangent, offset) of every scaled cotangent it
    /// gathers, each once.
    fn taps(adj: &Adjoint, field: &str) -> Vec<(String, [i32; 3])> {
        let id = adj.ir.params.iter().position(|p| p.name == field).expect(field);
        let mut out = Vec::new();
        for stmt in &adj.ir.body {
            if let Stmt::Store { field: f, value } = stmt {
                if *f == id {
                    value.visit(&mut |e| {
                        if let ExprKind::PointValue { func, offset, .. } = e.kind {
                            for (name, at) in reads(adj, func, AdjointRole::Cotangent) {
                                out.push((name, std::array::from_fn(|i| offset[i] + at[i])));
                            }
                        }
                    });
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The fields of `role` that point function `func` reads: (name, offset).
    fn reads(adj: &Adjoint, func: usize, role: AdjointRole) -> Vec<(String, [i32; 3])> {
        let mut out = Vec::new();
        crate::ir::visit_exprs(&adj.ir.point_fns[func].body, &mut |x| {
            if let ExprKind::Load { field, offset } = x.kind {
                if adj.roles[field] == role {
                    out.push((adj.ir.params[field].name.clone(), offset));
                }
            }
        });
        out
    }

    const WAVE: &str = "fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
        let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] - 2.0 * u[idx];
        u_next[idx] = 2.0 * u[idx] - u_prev[idx] + dt2 * c[idx.ix::<0, 1, 0>()] * lap;
    }";

    #[test]
    fn the_adjoint_mirrors_the_parameters_and_gathers_at_negated_offsets() {
        let adj = adjoint_of(WAVE, &["u", "u_prev"]).expect("linear");
        let names: Vec<&str> = adj.ir.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["dt2", "c", "u_bar", "u_prev_bar", "u_next_bar", "range_mask"]);
        use AdjointRole::*;
        assert_eq!(adj.roles, [Scalar, Fixed, Gradient, Gradient, Cotangent, Mask]);
        let writable: Vec<bool> = (0..6).map(|i| adj.ir.field(i).is_some_and(|f| f.writable)).collect();
        assert_eq!(writable, [false, false, true, true, false, false]);
        assert_eq!(adj.ir.name, "wave_adjoint");
        // u is read at +1, -1 and 0 (twice, merged): the adjoint reads u_next_bar at -1, +1, 0.
        let bar = "u_next_bar".to_string();
        assert_eq!(
            taps(&adj, "u_bar"),
            [(bar.clone(), [-1, 0, 0]), (bar.clone(), [0, 0, 0]), (bar.clone(), [1, 0, 0])]
        );
        assert_eq!(taps(&adj, "u_prev_bar"), [(bar, [0, 0, 0])]);
        // The coefficient c[+j] of the tap at forward offset +i is read at (-1, +1, 0): in the
        // scaled cotangent, evaluated at the negated tap offsets.
        let mut c_reads = Vec::new();
        crate::ir::visit_exprs(&adj.ir.body, &mut |e| {
            if let ExprKind::PointValue { func, offset, .. } = e.kind {
                for (_, at) in reads(&adj, func, Fixed) {
                    c_reads.push(std::array::from_fn::<i32, 3, _>(|i| offset[i] + at[i]));
                }
            }
        });
        c_reads.sort();
        c_reads.dedup();
        assert_eq!(c_reads, [[-1, 1, 0], [0, 1, 0], [1, 1, 0]]);
        // Two point parts: `w̄` alone (the `2 u` term) and `w̄ c[+j]` (the Laplacian's), so the
        // coefficient's field is read once per point, not once per tap.
        assert_eq!(adj.ir.point_fns.len(), 2);
    }

    #[test]
    fn every_output_contributes() {
        let source = "fn two(idx: Idx1, u: &Field1<f64>, v: &Field1<f64>, a: &mut Field1<f64>, b: &mut Field1<f64>) {
            a[idx] = u[idx.ix::<1>()] + v[idx];
            b[idx] = 2.0 * u[idx.ix::<-1>()] * v[idx];
            a[idx] = a[idx] - u[idx];
        }";
        let adj = adjoint_of(source, &["u"]).expect("linear");
        let expected =
            [("a_bar".to_string(), [-1, 0, 0]), ("a_bar".to_string(), [0, 0, 0]), ("b_bar".to_string(), [1, 0, 0])];
        assert_eq!(taps(&adj, "u_bar"), expected);
        assert_eq!(
            adj.roles,
            [
                AdjointRole::Gradient,
                AdjointRole::Fixed,
                AdjointRole::Cotangent,
                AdjointRole::Cotangent,
                AdjointRole::Mask
            ]
        );
    }

    #[test]
    fn a_taken_name_gets_an_underscore() {
        let source =
            "fn f(idx: Idx1, u_bar: f64, u: &Field1<f64>, out: &mut Field1<f64>) { out[idx] = u_bar * u[idx]; }";
        let adj = adjoint_of(source, &["u"]).expect("linear");
        let names: Vec<&str> = adj.ir.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["u_bar", "u_bar_", "out_bar", "range_mask"]);
    }

    fn kind(source: &str, wrt: &[&str]) -> AdjointErrorKind {
        adjoint_of(source, wrt).expect_err("not linear").kind
    }

    #[test]
    fn nonlinear_terms_are_named() {
        let f = |body: &str| {
            format!("fn f(idx: Idx1, k: f64, c: &Field1<f64>, u: &Field1<f64>, v: &Field1<f64>, out: &mut Field1<f64>) {{ {body} }}")
        };
        let product = kind(&f("out[idx] = u[idx] * v[idx.ix::<1>()];"), &["u", "v"]);
        assert_eq!(
            product,
            AdjointErrorKind::Product { term: "u[idx] * v[idx.ix::<1>()]".into(), fields: "`u`, `v`".into() }
        );
        // The same product is linear in u alone (v held fixed).
        assert!(adjoint_of(&f("out[idx] = u[idx] * v[idx.ix::<1>()];"), &["u"]).is_ok());
        assert!(matches!(kind(&f("out[idx] = c[idx] / u[idx];"), &["u"]), AdjointErrorKind::Division { .. }));
        assert!(matches!(kind(&f("out[idx] = u[idx].sin();"), &["u"]), AdjointErrorKind::Call { func: "sin", .. }));
        assert!(matches!(
            kind(&f("out[idx] = if u[idx] > k { c[idx] } else { 0.0 };"), &["u"]),
            AdjointErrorKind::Condition { .. }
        ));
        assert!(matches!(kind(&f("out[idx] = (u[idx] as f32) as f64;"), &["u"]), AdjointErrorKind::Cast { .. }));
        let err = adjoint_of(&f("let s = u[idx] * u[idx]; out[idx] = s;"), &["u"]).expect_err("nonlinear");
        assert_eq!(err.site, Site::Local("s".into()));
        // The old value of an output as a coefficient; once stored, the stored value is read.
        let err = adjoint_of(&f("out[idx] = out[idx] * u[idx];"), &["u"]).expect_err("reads out");
        assert_eq!(err.kind, AdjointErrorKind::CoefficientReadsOutput { field: "out".into() });
        assert!(adjoint_of(&f("out[idx] = c[idx]; out[idx] = out[idx] * u[idx];"), &["u"]).is_ok());
    }

    #[test]
    fn linear_forms_pass() {
        let f = |body: &str| {
            format!("fn f(idx: Idx1, k: f64, c: &Field1<f64>, u: &Field1<f64>, out: &mut Field1<f64>) {{ {body} }}")
        };
        for body in [
            "out[idx] += k * u[idx.ix::<-1>()];",
            "out[idx] = -(u[idx] - c[idx]) / (k * c[idx]);",
            "out[idx] = u[idx].mul_add(c[idx], u[idx.ix::<1>()]);",
            "let mut a = u[idx]; if c[idx] > 0.0 { a = 2.0 * a; } out[idx] = a;",
            "out[idx] = if c[idx] > k { u[idx] } else { c[idx] };",
            "out[idx] = c[idx].sqrt() * u[idx] + c[idx].max(k);",
        ] {
            assert!(adjoint_of(&f(body), &["u"]).is_ok(), "{body}");
        }
    }

    #[test]
    fn fields_must_be_read_and_not_written() {
        let source = "fn f(idx: Idx1, u: &Field1<f64>, v: &Field1<f64>, out: &mut Field1<f64>) { out[idx] = u[idx]; }";
        assert_eq!(kind(source, &["v"]), AdjointErrorKind::NotRead { field: "v".into() });
        assert_eq!(kind(source, &["out"]), AdjointErrorKind::Written { field: "out".into() });
        let sweep = "#[stencil(sweep = forward)] fn s(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) { out[idx] = u[idx]; }";
        assert_eq!(kind(sweep, &["u"]), AdjointErrorKind::Sweep);
    }
}
