//! The reverse time step in scaled cotangents, which costs what the forward step costs
//! (`#[stencil(scaled_adjoint_step(u, u_prev))]`), and the gradient that reads them
//! (`#[stencil(scaled_gradient(m))]`).
//!
//! [`super::adjoint_step()`] gathers the scaled cotangents `z(p) = [p ∈ R] · λ[p] · g(p)` at every
//! tap, where `g` is the point part of the tap's coefficient (a wave update's `1 / m / (1 + d)`).
//! Where every tap **at a neighbour** (offset ≠ 0) has the same point part `σ`, the cotangents can
//! be carried scaled instead: with `μ = σ λ` for every level,
//!
//! ```text
//! μ⁽ⁿ⁾[q] = σ(q) · Σ_{taps with point part σ} k · μ⁽ⁿ⁺ʲ⁾[q − o]  +  Σ_{other taps (at q)} k · g(q) · μ⁽ⁿ⁺ʲ⁾[q]
//! ```
//!
//! (multiply the step's sum by `σ(q)`; a tap at `q` itself with another point part `g` has
//! `g(q) λ[q] σ(q) = g(q) μ[q]`). This is a plain stencil: it reads each later cotangent at the
//! taps and the fixed fields at the point, with no value computed at a neighbour, so it runs as
//! fast as the forward update. It is written with as few divisions as the forward: the
//! denominators that every point part shares (a damping's `1 + d`) divide the whole sum once, and
//! consecutive taps with the same constant factor share one product (`k (μ[a] + μ[b])`). For a wave update `u⁺ = (2u − (1 − d) u⁻ + Δt² ∇²u / m) / (1 + d)`
//! it is the forward update itself applied to `μ` (the scheme is self-adjoint in the inner
//! product weighted by `m (1 + d)`).
//!
//! **No mask.** The step does not read the range mask: `[p ∈ R]` is carried by `μ` itself, which
//! must be zero outside the forward range `R`. Fields that start zeroed and are written only by
//! steps run over `R` (or parts of it) keep that; a field with other values in its halo, or a step
//! run beyond `R`, gives a wrong cotangent near the boundary.
//!
//! **Converting.** `λ = ρ μ` with `ρ = 1 / σ`. The companion scale stencil
//! (`{name}_cotangent_scale`) writes `ρ` (as `Π den / Π num` of `σ`'s factors: no division by a
//! product) into a field: a cotangent injected into `λ` (a receiver's residual `r`) goes into `μ`
//! as `r / ρ`, and a gradient reads `λ` as `ρ μ` ([`scaled_gradient`]). `σ` must be nonzero on
//! `R` (else `λ` is lost where it vanishes).
//!
//! **Refused** (an [`AdjointError`] naming both): taps at neighbours with different point parts,
//! say a variable-coefficient Laplacian whose face coefficients differ per tap; its
//! `adjoint_step(..)` still exists. A stencil without taps at neighbours has `σ = 1` (`μ = λ`).
//!
//! **Parameters.** The step: those of [`super::adjoint_step()`] without the mask (the cotangent
//! parameters hold `μ`). The scale: the forward's scalars and read fields other than the levels,
//! in their order, then `cotangent_scale: &mut`. The scaled gradient: those of
//! [`super::gradient()`] with `cotangent_scale: &` (read at the point) before the mask.

use super::adjoint::{
    add, div, factor, fresh_name, load, mul, render, Adjoint, AdjointError, AdjointErrorKind, AdjointRole, Factored,
    Site, ADJOINT_SUFFIX,
};
use super::adjoint_step::{step_signature, StepSignature, STEP_SUFFIX};
use super::gradient::gradient;
use crate::ir::{Expr, ExprKind, FieldParam, Literal, Param, ParamId, ParamKind, ScalarType, StencilIr, Stmt};

/// The prefix of the scaled step's and scaled gradient's names (`wave` →
/// `wave_scaled_adjoint_step`, functor `WaveScaledAdjointStep`).
pub const SCALED_PREFIX: &str = "_scaled";
/// The suffix of the scale stencil's name (`wave` → `wave_cotangent_scale`, functor
/// `WaveCotangentScale`) and the name of its written field.
pub const SCALE_NAME: &str = "cotangent_scale";

/// The reverse time step in scaled cotangents and the stencil that writes their scale.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaledStep {
    /// The step (see the module documentation).
    pub step: Adjoint,
    /// The scale `ρ = 1 / σ` (`λ = ρ μ`): the forward's scalars and fixed fields, then the
    /// written `cotangent_scale`.
    pub scale: Adjoint,
}

/// The reverse time step of `ir` in scaled cotangents, whose time levels are the fields `levels`
/// (newest first), and its scale stencil. See the module documentation.
pub fn scaled_adjoint_step(ir: &StencilIr, levels: &[ParamId]) -> Result<ScaledStep, AdjointError> {
    let StepSignature { flat, taps, w, ty, params, roles } = step_signature(ir, levels)?;
    let scale = common_scale(&flat, &taps)?;

    // μ⁽ⁿ⁾ = (σ' · (the taps of σ) + (the other taps at the point, each k g' μ)) / Π D, oldest level
    // first, where D are the denominators every tap's point part shares (a damping's 1 + d) and
    // σ', g' the point parts without them: as many divisions as the forward has. Consecutive
    // taps of σ with the same constant factor share one product, k (μ[a] + μ[b]).
    let mut parts: Vec<(ParamId, [i32; 3], Factored)> = Vec::new();
    for (j, &level) in levels.iter().enumerate().rev() {
        let cotangent = if j == 0 { w } else { level };
        for (_, _, o, coef) in taps.iter().filter(|t| t.0 == level) {
            parts.push((cotangent, *o, factor(coef)));
        }
    }
    let on_scale = |f: &Factored| f.num == scale.num && f.den == scale.den;
    let shared =
        shared_denominators(std::iter::once(&scale).chain(parts.iter().map(|p| &p.2).filter(|f| !on_scale(f))));
    let without = |f: &Factored| Factored { den: remove_each(&f.den, &shared), ..f.clone() };
    let (mut scaled, mut other): (Option<Expr>, Option<Expr>) = (None, None);
    let push = |sum: &mut Option<Expr>, term: Expr| *sum = Some(sum.take().map_or(term.clone(), |s| add(s, term)));
    let mut group: Option<(Option<Expr>, Expr)> = None;
    let times = |k: Option<Expr>, e: Expr| k.map_or(e.clone(), |k| mul(k, e));
    for (cotangent, o, f) in &parts {
        if on_scale(f) {
            let mu = load(ty, *cotangent, [-o[0], -o[1], -o[2]]);
            group = match group.take() {
                Some((k, sum)) if k == f.k => Some((k, add(sum, mu))),
                Some((k, sum)) => {
                    push(&mut scaled, times(k, sum));
                    Some((f.k.clone(), mu))
                }
                None => Some((f.k.clone(), mu)),
            };
        } else {
            debug_assert_eq!(*o, [0; 3], "taps at neighbours share the scale (common_scale)");
            let g = without(f);
            push(&mut other, times(f.k.clone(), applied(&g, load(ty, *cotangent, [0; 3]))));
        }
    }
    if let Some((k, sum)) = group {
        push(&mut scaled, times(k, sum));
    }
    let value = match (scaled.map(|s| applied(&without(&scale), s)), other) {
        (Some(a), Some(b)) => add(a, b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => unreachable!("linear_taps found a read of the first level"),
    };
    let value = shared.iter().fold(value, |v, d| div(v, d.clone()));
    let step = StencilIr {
        name: format!("{}{SCALED_PREFIX}{ADJOINT_SUFFIX}{STEP_SUFFIX}", flat.name),
        dim: flat.dim,
        index_name: flat.index_name.clone(),
        params,
        locals: Vec::new(),
        body: vec![Stmt::Store { field: levels[0], value }],
        sweep: None,
        point_fns: Vec::new(),
    };

    // ρ = Π den / Π num, over the forward's scalars and fixed fields (renumbered).
    let mut keep = vec![None; flat.params.len()];
    let (mut scale_params, mut scale_roles) = (Vec::new(), Vec::new());
    for (i, (p, role)) in flat.params.iter().zip(&roles).enumerate() {
        if matches!(role, AdjointRole::Scalar | AdjointRole::Fixed) {
            keep[i] = Some(scale_params.len());
            scale_params.push(p.clone());
            scale_roles.push(*role);
        }
    }
    let out = scale_params.len();
    scale_params.push(Param {
        name: fresh_name(&flat, SCALE_NAME.to_string()),
        kind: ParamKind::Field(FieldParam { elem: ty, writable: true }),
    });
    scale_roles.push(AdjointRole::CotangentScale);
    let mut rho = inverse(&scale, ty);
    renumber(&mut rho, &keep);
    let scale = StencilIr {
        name: format!("{}_{SCALE_NAME}", flat.name),
        dim: flat.dim,
        index_name: flat.index_name.clone(),
        params: scale_params,
        locals: Vec::new(),
        body: vec![Stmt::Store { field: out, value: rho }],
        sweep: None,
        point_fns: Vec::new(),
    };
    Ok(ScaledStep { step: Adjoint { ir: step, roles }, scale: Adjoint { ir: scale, roles: scale_roles } })
}

/// The gradient of `ir` with respect to the fields `wrt` ([`gradient()`]) reading scaled
/// cotangents: each load of the written field's cotangent `μ` becomes `μ · ρ` with `ρ` the
/// parameter `cotangent_scale` (before the mask), read where `μ` is. `ir` writes one field.
pub fn scaled_gradient(ir: &StencilIr, wrt: &[ParamId]) -> Result<Adjoint, AdjointError> {
    let written: Vec<ParamId> = (0..ir.params.len()).filter(|&i| ir.field(i).is_some_and(|f| f.writable)).collect();
    let [w] = written[..] else {
        let fields = written.iter().map(|&i| ir.params[i].name.clone()).collect();
        return Err(AdjointError { kind: AdjointErrorKind::StepWrites { fields }, site: Site::Stencil });
    };
    let Adjoint { ir: mut grad, mut roles } = gradient(ir, wrt)?;
    let ty = grad.field(w).expect("the cotangent of the written field").elem;
    let mask = grad.params.len() - 1;
    let scale = mask;
    let name = {
        let mut name = SCALE_NAME.to_string();
        while grad.params.iter().any(|p| p.name == name) {
            name.push('_');
        }
        name
    };
    grad.params.insert(scale, Param { name, kind: ParamKind::Field(FieldParam { elem: ty, writable: false }) });
    roles.insert(scale, AdjointRole::CotangentScale);
    let moved: Vec<Option<usize>> = (0..=mask).map(|i| Some(if i == mask { mask + 1 } else { i })).collect();
    for stmt in &mut grad.body {
        if let Stmt::Store { value, .. } = stmt {
            renumber(value, &moved);
            *value = times_scale(value, w, scale, ty);
        }
    }
    grad.name = format!("{}{SCALED_PREFIX}{}", ir.name, &grad.name[ir.name.len()..]);
    Ok(Adjoint { ir: grad, roles })
}

/// The point part shared by every tap at a neighbour (none: `1`), or the error naming two that
/// differ.
fn common_scale(flat: &StencilIr, taps: &[(ParamId, ParamId, [i32; 3], Expr)]) -> Result<Factored, AdjointError> {
    let mut found: Option<Factored> = None;
    for (_, _, o, coef) in taps.iter().filter(|t| t.2 != [0; 3]) {
        let f = Factored { k: None, ..factor(coef) };
        match &found {
            None => found = Some(f),
            Some(s) if *s == f => {}
            Some(s) => {
                let ty = coef.ty;
                let (first, other) = (render(flat, &point_part(s, ty)), render(flat, &point_part(&f, ty)));
                let kind = AdjointErrorKind::ScaledStep { first, other, offset: *o };
                return Err(AdjointError { kind, site: Site::Stencil });
            }
        }
    }
    Ok(found.unwrap_or(Factored { k: None, num: Vec::new(), den: Vec::new() }))
}

/// `e · Π num / Π den`.
fn applied(f: &Factored, e: Expr) -> Expr {
    let e = f.num.iter().fold(e, |v, n| mul(v, n.clone()));
    f.den.iter().fold(e, |v, d| div(v, d.clone()))
}

/// The denominators every one of `parts` has (as many times as each has them), in the first's
/// order.
fn shared_denominators<'a>(mut parts: impl Iterator<Item = &'a Factored>) -> Vec<Expr> {
    let Some(first) = parts.next() else { return Vec::new() };
    let mut shared = first.den.clone();
    for f in parts {
        let mut left = f.den.clone();
        shared.retain(|d| match left.iter().position(|x| x == d) {
            Some(i) => {
                left.remove(i);
                true
            }
            None => false,
        });
    }
    shared
}

/// `from` without one occurrence of each of `these`.
fn remove_each(from: &[Expr], these: &[Expr]) -> Vec<Expr> {
    let mut out = from.to_vec();
    for d in these {
        if let Some(i) = out.iter().position(|x| x == d) {
            out.remove(i);
        }
    }
    out
}

/// `Π num / Π den` (`1` for none).
fn point_part(f: &Factored, ty: ScalarType) -> Expr {
    let mut value: Option<Expr> = None;
    for n in &f.num {
        value = Some(value.map_or(n.clone(), |v| mul(v, n.clone())));
    }
    let mut value = value.unwrap_or_else(|| one(ty));
    for d in &f.den {
        value = div(value, d.clone());
    }
    value
}

/// `Π den / Π num` (`1` for none).
fn inverse(f: &Factored, ty: ScalarType) -> Expr {
    point_part(&Factored { k: None, num: f.den.clone(), den: f.num.clone() }, ty)
}

fn one(ty: ScalarType) -> Expr {
    Expr { ty, kind: ExprKind::Lit(Literal::Float(1.0, 1.0)) }
}

/// Every parameter `i` in `e` replaced by `map[i]` (each one read is kept).
fn renumber(e: &mut Expr, map: &[Option<usize>]) {
    e.visit_mut(&mut |x| match &mut x.kind {
        ExprKind::Load { field: p, .. } | ExprKind::Scalar(p) => *p = map[*p].expect("a kept parameter"),
        _ => {}
    });
}

/// `e` with every load of `cotangent` at `o` replaced by `cotangent[o] · scale[o]`.
fn times_scale(e: &Expr, cotangent: ParamId, scale: ParamId, ty: ScalarType) -> Expr {
    let kind = match &e.kind {
        ExprKind::Load { field, offset } if *field == cotangent => {
            return mul(e.clone(), load(ty, scale, *offset));
        }
        ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(times_scale(a, cotangent, scale, ty))),
        ExprKind::Cast(a) => ExprKind::Cast(Box::new(times_scale(a, cotangent, scale, ty))),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(
            *op,
            Box::new(times_scale(a, cotangent, scale, ty)),
            Box::new(times_scale(b, cotangent, scale, ty)),
        ),
        ExprKind::Call(f, args) => {
            ExprKind::Call(*f, args.iter().map(|a| times_scale(a, cotangent, scale, ty)).collect())
        }
        ExprKind::Select(c, a, b) => ExprKind::Select(
            Box::new(times_scale(c, cotangent, scale, ty)),
            Box::new(times_scale(a, cotangent, scale, ty)),
            Box::new(times_scale(b, cotangent, scale, ty)),
        ),
        _ => return e.clone(),
    };
    Expr { ty: e.ty, kind }
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;

    fn ids(ir: &StencilIr, names: &[&str]) -> Vec<ParamId> {
        names.iter().map(|n| ir.params.iter().position(|p| p.name == *n).expect(n)).collect()
    }

    fn lower(source: &str) -> StencilIr {
        StencilIr::from_source(source).unwrap_or_else(|e| panic!("{}", e.kind))
    }

    fn names(ir: &StencilIr) -> Vec<&str> {
        ir.params.iter().map(|p| p.name.as_str()).collect()
    }

    /// The loads of `ir`'s body as (parameter name, offset), in order.
    fn loads(ir: &StencilIr) -> Vec<(String, [i32; 3])> {
        let mut out = Vec::new();
        crate::ir::visit_exprs(&ir.body, &mut |e| {
            if let ExprKind::Load { field, offset } = e.kind {
                out.push((ir.params[field].name.clone(), offset));
            }
        });
        out
    }

    const WAVE: &str = "fn wave(idx: Idx3, dt2: f64, m: &Field3<f64>, d: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
        let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] - 2.0 * u[idx];
        u_next[idx] = (2.0 * u[idx] - (1.0 - d[idx]) * u_prev[idx] + dt2 * lap / m[idx]) / (1.0 + d[idx]);
    }";

    #[test]
    fn the_scaled_step_of_a_damped_wave_reads_the_cotangents_at_the_taps_and_the_fields_at_the_point() {
        let ir = lower(WAVE);
        let scaled = scaled_adjoint_step(&ir, &ids(&ir, &["u", "u_prev"])).expect("one scale");
        let step = &scaled.step;
        assert_eq!(names(&step.ir), ["dt2", "m", "d", "u_bar", "u_next_bar_2", "u_next_bar"]);
        use AdjointRole::*;
        assert_eq!(step.roles, [Scalar, Fixed, Fixed, Gradient, Later { steps: 2 }, Cotangent]);
        assert_eq!(step.ir.name, "wave_scaled_adjoint_step");
        assert!(step.ir.point_fns.is_empty(), "a plain stencil");
        let read = loads(&step.ir);
        // The fixed fields only at the point; the cotangent one step later at the three taps, the
        // one two steps later at the point; the written level never.
        for (name, o) in &read {
            match name.as_str() {
                "m" | "d" | "u_next_bar_2" => assert_eq!(*o, [0; 3], "{name}"),
                "u_next_bar" => assert!(o[1] == 0 && o[2] == 0 && o[0].abs() <= 1, "{o:?}"),
                other => panic!("reads {other}"),
            }
        }
        let mut taps: Vec<i32> = read.iter().filter(|(n, _)| n == "u_next_bar").map(|(_, o)| o[0]).collect();
        taps.sort();
        taps.dedup();
        assert_eq!(taps, [-1, 0, 1]);

        // The scale: the forward's scalars and fixed fields, then the written scale, m (1 + d).
        let scale = &scaled.scale;
        assert_eq!(names(&scale.ir), ["dt2", "m", "d", SCALE_NAME]);
        assert_eq!(scale.roles, [Scalar, Fixed, Fixed, CotangentScale]);
        assert!(scale.ir.field(3).is_some_and(|f| f.writable));
        let Stmt::Store { field: 3, value } = &scale.ir.body[0] else { panic!("one store into the scale") };
        assert_eq!(render(&scale.ir, value), "m[idx] * (1.0 + d[idx])");
    }

    #[test]
    fn taps_at_neighbours_with_different_point_parts_are_refused() {
        // A variable coefficient on the faces: k[i + 1] on one side, k[i] on the other.
        let ir = lower(
            "fn heat(idx: Idx1, k: &Field1<f64>, u: &Field1<f64>, u_next: &mut Field1<f64>) {
                u_next[idx] = u[idx] + k[idx.ix::<1>()] * (u[idx.ix::<1>()] - u[idx]) - k[idx] * (u[idx] - u[idx.ix::<-1>()]);
            }",
        );
        let e = scaled_adjoint_step(&ir, &ids(&ir, &["u"])).expect_err("two scales");
        assert!(matches!(e.kind, AdjointErrorKind::ScaledStep { .. }), "{e}");
        assert!(e.to_string().contains("adjoint_step(..)"), "{e}");
        // Its plain step exists.
        assert!(super::super::adjoint_step(&ir, &ids(&ir, &["u"])).is_ok());
    }

    #[test]
    fn without_taps_at_neighbours_the_scale_is_one() {
        let ir = lower(
            "fn decay(idx: Idx1, a: &Field1<f64>, u: &Field1<f64>, u_next: &mut Field1<f64>) {
                u_next[idx] = a[idx] * u[idx];
            }",
        );
        let scaled = scaled_adjoint_step(&ir, &ids(&ir, &["u"])).expect("a point update");
        let Stmt::Store { value, .. } = &scaled.scale.ir.body[0] else { panic!("a store") };
        assert_eq!(render(&scaled.scale.ir, value), "1.0");
        let Stmt::Store { value, .. } = &scaled.step.ir.body[0] else { panic!("a store") };
        assert_eq!(render(&scaled.step.ir, value), "u_next_bar[idx] * a[idx]");
    }

    #[test]
    fn the_scaled_gradient_reads_each_cotangent_times_its_scale() {
        let ir = lower(WAVE);
        let plain = gradient(&ir, &ids(&ir, &["m"])).expect("a gradient");
        let scaled = scaled_gradient(&ir, &ids(&ir, &["m"])).expect("a gradient");
        assert_eq!(
            names(&scaled.ir),
            ["dt2", "m", "d", "u", "u_prev", "u_next_bar", "m_bar", SCALE_NAME, "range_mask"]
        );
        assert_eq!(scaled.roles[7], AdjointRole::CotangentScale);
        assert_eq!(scaled.ir.name, "wave_scaled_gradient");
        // Every load of the cotangent is followed by one of the scale at the same offset, and
        // the rest is the plain gradient's (the mask renumbered).
        let read = loads(&scaled.ir);
        let pairs: Vec<_> = read.windows(2).filter(|w| w[0].0 == "u_next_bar").collect();
        assert!(!pairs.is_empty());
        assert!(pairs.iter().all(|w| w[1].0 == SCALE_NAME && w[1].1 == w[0].1), "{read:?}");
        let without: Vec<_> = read.into_iter().filter(|(n, _)| n != SCALE_NAME).collect();
        assert_eq!(without, loads(&plain.ir));
    }
}
