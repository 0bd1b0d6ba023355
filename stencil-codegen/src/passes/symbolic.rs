//! The walk over a stencil body that the [`adjoint`](super::adjoint()) and
//! [`gradient`](super::gradient()) passes share: statements in order, each local and each stored
//! field held as a symbolic value of the pass, both branches of an `if` evaluated and merged under
//! its condition (a field stored in one branch only keeps its old value in the other), and the
//! names of the fields a term depends on, for errors.

use crate::ir::{Expr, ExprKind, ParamId, ScalarType, StencilIr, Stmt};

/// Where in the forward body a rejected term is, for the error's location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// The value stored into this written field.
    Store(String),
    /// The value given to this local (its name in the IR: shadowed names carry a suffix).
    Local(String),
    /// The condition of an `if`.
    Condition,
    /// The stencil as a whole.
    Stencil,
}

/// A term of a linear form, or a partial derivative: `coef` times `field[x + offset]`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Term {
    pub(super) field: ParamId,
    pub(super) offset: [i32; 3],
    pub(super) coef: Expr,
}

/// The locals, the stored fields and the statement being evaluated.
pub(super) type State<'a, V> = (&'a [Option<V>], &'a [Option<V>], &'a Site);
/// The same, to change.
pub(super) type StateMut<'a, V> = (&'a mut Vec<Option<V>>, &'a mut Vec<Option<V>>, &'a mut Site);

/// A pass's symbolic evaluation of a stencil body.
pub(super) trait Symbolic {
    /// The value of an expression.
    type V: Clone + PartialEq;
    /// Why a term has no value of the pass.
    type Error;
    /// What an error says when a term depends on none of the fields by name.
    const NO_FIELD: &'static str;

    /// The stencil.
    fn ir(&self) -> &StencilIr;
    /// Per parameter, whether the pass follows it (the fields the adjoint is taken in, or the
    /// parameter fields of a gradient).
    fn followed(&self) -> &[bool];
    /// The locals, the stored fields and the statement being evaluated.
    fn state(&self) -> State<'_, Self::V>;
    /// The same, to change.
    fn state_mut(&mut self) -> StateMut<'_, Self::V>;
    /// The value of `e`.
    fn expr(&self, e: &Expr) -> Result<Self::V, Self::Error>;
    /// The condition of an `if` as an expression of the forward state (or why it cannot be).
    fn condition(&self, cond: &Expr) -> Result<Expr, Self::Error>;
    /// A value that depends on no followed field.
    fn fixed(e: Expr) -> Self::V;
    /// `a` where `cond` holds, else `b`.
    fn merge(cond: &Expr, a: Self::V, b: Self::V) -> Self::V;
    /// The terms of a value.
    fn terms(v: &Self::V) -> &[Term];

    /// Evaluates `body` into the locals and the stored fields.
    fn block(&mut self, body: &[Stmt]) -> Result<(), Self::Error> {
        for stmt in body {
            match stmt {
                Stmt::Let { local, init } => {
                    let site = Site::Local(self.ir().locals[*local].name.clone());
                    *self.state_mut().2 = site;
                    let value = init.as_ref().map(|e| self.expr(e)).transpose()?;
                    self.state_mut().0[*local] = value;
                }
                Stmt::Assign { local, value } => {
                    let site = Site::Local(self.ir().locals[*local].name.clone());
                    *self.state_mut().2 = site;
                    let value = self.expr(value)?;
                    self.state_mut().0[*local] = Some(value);
                }
                Stmt::Store { field, value } => {
                    let site = Site::Store(self.ir().params[*field].name.clone());
                    *self.state_mut().2 = site;
                    let value = self.expr(value)?;
                    self.state_mut().1[*field] = Some(value);
                }
                Stmt::Fold { .. } => unreachable!("reductions are rejected before"),
                Stmt::If { cond, then_body, else_body } => {
                    *self.state_mut().2 = Site::Condition;
                    let c = self.condition(cond)?;
                    let (locals, stored) = {
                        let (l, s, _) = self.state();
                        (l.to_vec(), s.to_vec())
                    };
                    self.block(then_body)?;
                    let (then_locals, then_stored) = {
                        let (l, s, _) = self.state_mut();
                        (std::mem::replace(l, locals), std::mem::replace(s, stored))
                    };
                    self.block(else_body)?;
                    let fields: Vec<ScalarType> = (0..self.ir().params.len())
                        .map(|w| self.ir().field(w).map_or(ScalarType::F64, |f| f.elem))
                        .collect();
                    let (l, s, _) = self.state_mut();
                    // A local set in one branch only was declared there: it ends with it.
                    let else_locals = std::mem::take(l);
                    *l = then_locals.into_iter().zip(else_locals).map(|(a, b)| Some(Self::merge(&c, a?, b?))).collect();
                    // A field stored in one branch only keeps its old value in the other.
                    let else_stored = std::mem::take(s);
                    *s = then_stored
                        .into_iter()
                        .zip(else_stored)
                        .enumerate()
                        .map(|(w, (a, b))| {
                            let old = || {
                                Some(Self::fixed(Expr {
                                    ty: fields[w],
                                    kind: ExprKind::Load { field: w, offset: [0; 3] },
                                }))
                            };
                            match (a, b) {
                                (None, None) => None,
                                (a, b) => Some(Self::merge(&c, a.or_else(old)?, b.or_else(old)?)),
                            }
                        })
                        .collect();
                }
            }
        }
        Ok(())
    }

    /// The names of the followed fields `e` depends on (through loads and locals), for errors.
    fn fields_of(&self, e: &Expr) -> String {
        let (ir, followed, (locals, _, _)) = (self.ir(), self.followed(), self.state());
        let mut names: Vec<&str> = Vec::new();
        e.visit(&mut |x| {
            let mut note = |field: ParamId| {
                let n = ir.params[field].name.as_str();
                if !names.contains(&n) {
                    names.push(n);
                }
            };
            match x.kind {
                ExprKind::Load { field, .. } if followed[field] => note(field),
                ExprKind::Local(l) => {
                    if let Some(Some(v)) = locals.get(l) {
                        Self::terms(v).iter().for_each(|t| note(t.field));
                    }
                }
                _ => {}
            }
        });
        match names.as_slice() {
            [] => Self::NO_FIELD.into(),
            [one] => format!("`{one}`"),
            many => format!("`{}`", many.join("`, `")),
        }
    }
}
