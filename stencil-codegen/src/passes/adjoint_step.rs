//! The adjoint of one time step of a multi-level scheme, as one stencil that assigns rather
//! than accumulates (`#[stencil(adjoint_step(u, u_prev))]`).
//!
//! A scheme whose update writes one field `w` from the time levels `x₁, …, x_k` (newest first:
//! a leapfrog wave update reads `u` and `u_prev`) steps as `u⁽ⁿ⁺¹⁾ = F(u⁽ⁿ⁾, …, u⁽ⁿ⁻ᵏ⁺¹⁾)`, the
//! state shifting one level per step. The level `u⁽ⁿ⁾` is read by the `k` steps `n, …, n + k − 1`
//! (as `x₁` by the first, as `x_k` by the last), so its cotangent is complete once the reverse
//! loop has passed them:
//!
//! ```text
//! λ⁽ⁿ⁾[q] = Σ_{j = k..1} Σ_{taps of x_j} k · z_j(q − o),   z_j(p) = [p ∈ R] · λ⁽ⁿ⁺ʲ⁾[p] · g(p)
//! ```
//!
//! the scaled cotangents of [`super::adjoint()`] with the written field's cotangent taken `j`
//! steps later. [`super::adjoint()`] computes the same sum in `k` launches, each adding into
//! a cotangent the caller zeroes first; this stencil reads the `k` later cotangents once and
//! writes the level's, so a reverse time step moves `k + 1` cotangent fields instead of
//! `2k + 1` and needs no zeroing. The terms are added in the order the accumulating adjoint
//! adds them in a reverse loop (the `x_k` terms first, starting from zero), so both give the
//! same bits.
//!
//! **Parameters.** The forward's, in the same places, then the mask: `x₁` becomes `x₁_bar:
//! &mut` (λ⁽ⁿ⁾, written), `w` becomes `w_bar: &` (λ⁽ⁿ⁺¹⁾), each later level `x_j` becomes
//! `w_bar_j: &` (λ⁽ⁿ⁺ʲ⁾); scalars and the other fields stay. The levels share the written
//! field's element type.

use super::adjoint::{
    add, fresh_name, linear_taps, zero, Adjoint, AdjointError, AdjointErrorKind, AdjointRole, Linear, ScaledCotangents,
    Site, ADJOINT_SUFFIX, BAR_SUFFIX, MASK_NAME,
};
use crate::ir::{Expr, FieldParam, Param, ParamId, ParamKind, ScalarType, StencilIr, Stmt};

/// The suffix of the step's name (`wave` → `wave_adjoint_step`, functor `WaveAdjointStep`).
pub const STEP_SUFFIX: &str = "_step";

/// What an adjoint step and a scaled one share: the forward's linear part in its levels, its one
/// written field `w` (element type `ty`), and the step's parameters and roles before the mask
/// (the forward's in the same places, the levels and `w` as cotangents).
pub(super) struct StepSignature {
    pub flat: StencilIr,
    pub taps: Vec<(ParamId, ParamId, [i32; 3], Expr)>,
    pub w: ParamId,
    pub ty: ScalarType,
    pub params: Vec<Param>,
    pub roles: Vec<AdjointRole>,
}

/// The signature of the step of `ir` whose time levels are `levels`, checked: each level named
/// once, of the written field's element type, and exactly one written field.
pub(super) fn step_signature(ir: &StencilIr, levels: &[ParamId]) -> Result<StepSignature, AdjointError> {
    let fail = |kind| Err(AdjointError { kind, site: Site::Stencil });
    for (j, &l) in levels.iter().enumerate() {
        if levels[..j].contains(&l) {
            return fail(AdjointErrorKind::StepLevel { name: ir.params[l].name.clone(), reason: "is named twice" });
        }
    }
    let Linear { flat, taps, .. } = linear_taps(ir, levels)?;
    let written: Vec<ParamId> = (0..flat.params.len()).filter(|&i| flat.field(i).is_some_and(|f| f.writable)).collect();
    let [w] = written[..] else {
        return fail(AdjointErrorKind::StepWrites {
            fields: written.iter().map(|&i| flat.params[i].name.clone()).collect(),
        });
    };
    let ty = flat.field(w).expect("a field").elem;
    for &l in levels {
        if flat.field(l).expect("checked by linear_taps").elem != ty {
            let reason = "has another element type than the written field";
            return fail(AdjointErrorKind::StepLevel { name: flat.params[l].name.clone(), reason });
        }
    }
    let fresh = |base: String| fresh_name(&flat, base);
    let w_bar = |steps: usize| match steps {
        1 => format!("{}{BAR_SUFFIX}", flat.params[w].name),
        j => format!("{}{BAR_SUFFIX}_{j}", flat.params[w].name),
    };
    let mut params = Vec::with_capacity(flat.params.len() + 1);
    let mut roles = Vec::with_capacity(flat.params.len() + 1);
    for (i, p) in flat.params.iter().enumerate() {
        let field = |name: String, writable| match p.kind {
            ParamKind::Field(f) => Param { name: fresh(name), kind: ParamKind::Field(FieldParam { writable, ..f }) },
            _ => unreachable!("levels and the written field are fields"),
        };
        let (param, role) = match levels.iter().position(|&l| l == i) {
            Some(0) => (field(format!("{}{BAR_SUFFIX}", p.name), true), AdjointRole::Gradient),
            Some(j) => (field(w_bar(j + 1), false), AdjointRole::Later { steps: j as u32 + 1 }),
            None if i == w => (field(w_bar(1), false), AdjointRole::Cotangent),
            None => match p.kind {
                ParamKind::Scalar(_) | ParamKind::Held(_) => (p.clone(), AdjointRole::Scalar),
                ParamKind::Field(_) => (p.clone(), AdjointRole::Fixed),
                ParamKind::Reduction(_) => unreachable!("reductions are refused by linear_taps"),
            },
        };
        params.push(param);
        roles.push(role);
    }
    Ok(StepSignature { flat, taps, w, ty, params, roles })
}

/// The adjoint step of `ir`, whose time levels are the fields `levels` (parameter indices,
/// newest first). See the module documentation.
pub fn adjoint_step(ir: &StencilIr, levels: &[ParamId]) -> Result<Adjoint, AdjointError> {
    let StepSignature { flat, taps, w, ty, mut params, mut roles } = step_signature(ir, levels)?;
    let fresh = |base: String| fresh_name(&flat, base);
    let mask = params.len();
    params.push(Param {
        name: fresh(MASK_NAME.to_string()),
        kind: ParamKind::Field(FieldParam { elem: ty, writable: false }),
    });
    roles.push(AdjointRole::Mask);

    // λ⁽ⁿ⁾ = 0 + (x_k's terms, from λ⁽ⁿ⁺ᵏ⁾) + ... + (x₁'s terms, from λ⁽ⁿ⁺¹⁾).
    let mut scaled = ScaledCotangents::new((mask, ty), &fresh);
    let mut value = zero(ty);
    for (j, &level) in levels.iter().enumerate().rev() {
        let cotangent = if j == 0 { w } else { level };
        let prefix = params[cotangent].name.clone();
        for (_, _, o, coef) in taps.iter().filter(|t| t.0 == level) {
            let (func, k) = scaled.tap(cotangent, ty, &prefix, coef);
            value = add(value, scaled.gathered(ty, func, &k, *o));
        }
    }
    let body = vec![Stmt::Store { field: levels[0], value }];
    let ir = StencilIr {
        name: format!("{}{ADJOINT_SUFFIX}{STEP_SUFFIX}", flat.name),
        dim: flat.dim,
        index_name: flat.index_name.clone(),
        params,
        locals: scaled.locals,
        body,
        sweep: None,
        point_fns: scaled.point_fns,
    };
    Ok(Adjoint { ir, roles })
}

#[cfg(all(test, feature = "frontend"))]
mod tests {
    use super::*;
    use crate::ir::ExprKind;

    fn step_of(source: &str, levels: &[&str]) -> Result<Adjoint, AdjointError> {
        let ir = StencilIr::from_source(source).unwrap_or_else(|e| panic!("{}", e.kind));
        let ids: Vec<ParamId> = levels.iter().map(|n| ir.params.iter().position(|p| p.name == *n).expect(n)).collect();
        adjoint_step(&ir, &ids)
    }

    const WAVE: &str = "fn wave(idx: Idx3, dt2: f64, c: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>, u_next: &mut Field3<f64>) {
        let lap = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] - 2.0 * u[idx];
        u_next[idx] = 2.0 * u[idx] - u_prev[idx.ix::<0, 0, 1>()] + dt2 * c[idx] * lap;
    }";

    /// The cotangent each point function reads, by name.
    fn cotangents_read(step: &Adjoint) -> Vec<String> {
        step.ir
            .point_fns
            .iter()
            .map(|f| {
                let mut read = None;
                crate::ir::visit_exprs(&f.body, &mut |e| {
                    if let ExprKind::Load { field, .. } = e.kind {
                        if matches!(step.roles[field], AdjointRole::Cotangent | AdjointRole::Later { .. }) {
                            read = Some(step.ir.params[field].name.clone());
                        }
                    }
                });
                read.expect("a cotangent")
            })
            .collect()
    }

    #[test]
    fn the_step_writes_the_newest_level_from_the_later_cotangents() {
        let step = step_of(WAVE, &["u", "u_prev"]).expect("linear");
        let names: Vec<&str> = step.ir.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["dt2", "c", "u_bar", "u_next_bar_2", "u_next_bar", "range_mask"]);
        use AdjointRole::*;
        assert_eq!(step.roles, [Scalar, Fixed, Gradient, Later { steps: 2 }, Cotangent, Mask]);
        let writable: Vec<bool> = (0..6).map(|i| step.ir.field(i).is_some_and(|f| f.writable)).collect();
        assert_eq!(writable, [false, false, true, false, false, false]);
        assert_eq!(step.ir.name, "wave_adjoint_step");
        // One store, assigned: it never reads the field it writes.
        assert_eq!(step.ir.body.len(), 1);
        let mut reads_own = false;
        crate::ir::visit_exprs(&step.ir.body, &mut |e| {
            reads_own |= matches!(e.kind, ExprKind::Load { field: 2, .. });
        });
        assert!(!reads_own);
        // The older level's terms first (from two steps later), then the newest level's.
        assert_eq!(cotangents_read(&step), ["u_next_bar_2", "u_next_bar", "u_next_bar"]);
        // u_prev is read one plane up: the step gathers λ⁽ⁿ⁺²⁾ one plane down.
        let Stmt::Store { value, .. } = &step.ir.body[0] else { panic!("a store") };
        let mut offsets = Vec::new();
        value.visit(&mut |e| {
            if let ExprKind::PointValue { func: 0, offset, .. } = e.kind {
                offsets.push(offset);
            }
        });
        assert_eq!(offsets, [[0, 0, -1]]);
    }

    #[test]
    fn a_step_needs_one_written_field_and_distinct_levels_of_its_type() {
        let two = "fn two(idx: Idx1, u: &Field1<f64>, a: &mut Field1<f64>, b: &mut Field1<f64>) {
            a[idx] = u[idx]; b[idx] = 2.0 * u[idx];
        }";
        let e = step_of(two, &["u"]).expect_err("two outputs");
        assert_eq!(e.kind, AdjointErrorKind::StepWrites { fields: vec!["a".into(), "b".into()] });
        assert!(e.to_string().contains("writes `a`, `b`"), "{e}");
        let e = step_of(WAVE, &["u", "u"]).expect_err("twice");
        assert!(matches!(e.kind, AdjointErrorKind::StepLevel { reason: "is named twice", .. }), "{e}");
    }
}
