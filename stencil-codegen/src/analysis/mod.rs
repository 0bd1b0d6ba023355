//! Analyses over the IR: what the launcher checks, what the printers specialise on and what
//! benchmarks count. [`Analysis::of`] computes them once per stencil; the printers take the
//! result instead of walking the IR again.

mod access;
mod cost;

pub use access::{field_accesses, FieldAccess};
pub use cost::{flops_per_point, min_bytes_per_point, stmts_flops};

use crate::ir::{ParamId, StencilIr};

/// Everything the analyses know about one stencil.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    /// The access summary of every field parameter, in parameter order.
    pub fields: Vec<FieldAccess>,
    /// Floating-point operations per point ([`flops_per_point`]).
    pub flops: usize,
    /// Fewest bytes a point moves through memory ([`min_bytes_per_point`]).
    pub min_bytes: usize,
}

impl Analysis {
    /// Analyses `ir` as given: the reads of its point functions count where they are inlined
    /// (`passes::inline_point_fns`), as the functors' facts are computed; on the IR with point
    /// functions only the body's own reads count (what the CPU nest reads rows of).
    pub fn of(ir: &StencilIr) -> Analysis {
        let fields = field_accesses(ir);
        let min_bytes = cost::min_bytes(&fields);
        Analysis { fields, flops: flops_per_point(ir), min_bytes }
    }

    /// The access summary of field parameter `param`.
    ///
    /// # Panics
    /// If `param` is not a field parameter.
    pub fn field(&self, param: ParamId) -> &FieldAccess {
        self.fields.iter().find(|f| f.param == param).expect("a field parameter")
    }

    /// Read-only fields that some statement reads.
    pub fn inputs(&self) -> impl Iterator<Item = &FieldAccess> {
        self.fields.iter().filter(|f| !f.writable && f.is_read())
    }

    /// Fields that some statement stores.
    pub fn outputs(&self) -> impl Iterator<Item = &FieldAccess> {
        self.fields.iter().filter(|f| f.written)
    }

    /// Whether any field is read at a non-zero offset.
    pub fn has_neighbours(&self) -> bool {
        self.fields.iter().any(|f| f.offsets.iter().any(|o| *o != [0; 3]))
    }

    /// The largest element size of any field, in bytes (4 when there is no field).
    pub fn max_elem_bytes(&self) -> usize {
        self.fields.iter().map(|f| f.elem.size_bytes()).max().unwrap_or(4)
    }
}
