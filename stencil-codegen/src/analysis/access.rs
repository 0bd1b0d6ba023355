//! Per-field access summary: read/written, the offsets read and the read extent per axis (the
//! halo a launch needs on each side).

use crate::ir::{visit_exprs, ExprKind, ParamId, ParamKind, ScalarType, StencilIr, Stmt};

/// How one field parameter is accessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldAccess {
    /// The parameter index.
    pub param: ParamId,
    /// The parameter name.
    pub name: String,
    /// Element type.
    pub elem: ScalarType,
    /// Declared `&mut`.
    pub writable: bool,
    /// Some statement stores it.
    pub written: bool,
    /// Distinct offsets read, sorted (empty if never read).
    pub offsets: Vec<[i32; 3]>,
    /// Smallest offset read per axis (0 if never read).
    pub lo: [i32; 3],
    /// Largest offset read per axis (0 if never read).
    pub hi: [i32; 3],
}

impl FieldAccess {
    /// Whether any statement reads the field.
    pub fn is_read(&self) -> bool {
        !self.offsets.is_empty()
    }
}

/// The access summary of every field parameter, in parameter order.
pub fn field_accesses(ir: &StencilIr) -> Vec<FieldAccess> {
    ir.params
        .iter()
        .enumerate()
        .filter_map(|(id, p)| match p.kind {
            ParamKind::Field(f) => Some(FieldAccess {
                param: id,
                name: p.name.clone(),
                elem: f.elem,
                writable: f.writable,
                written: stores(&ir.body, id),
                offsets: Vec::new(),
                lo: [0; 3],
                hi: [0; 3],
            }),
            ParamKind::Scalar(_) | ParamKind::Held(_) | ParamKind::Reduction(_) => None,
        })
        .map(|mut fa| {
            let mut offsets = Vec::new();
            visit_exprs(&ir.body, &mut |e| {
                if let ExprKind::Load { field, offset } = e.kind {
                    if field == fa.param {
                        offsets.push(offset);
                    }
                }
            });
            offsets.sort();
            offsets.dedup();
            for o in &offsets {
                fa.lo = std::array::from_fn(|a| fa.lo[a].min(o[a]));
                fa.hi = std::array::from_fn(|a| fa.hi[a].max(o[a]));
            }
            fa.offsets = offsets;
            fa
        })
        .collect()
}

fn stores(body: &[Stmt], field: ParamId) -> bool {
    body.iter().any(|s| match s {
        Stmt::Store { field: f, .. } => *f == field,
        Stmt::If { then_body, else_body, .. } => stores(then_body, field) || stores(else_body, field),
        _ => false,
    })
}
