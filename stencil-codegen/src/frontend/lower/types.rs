//! Type inference for the lowering: a union-find over type variables, with Rust's literal rules
//! (an unsuffixed `1.0` takes the type of what it meets, `f64` if nothing; `1` likewise, `i32`)
//! and deferred checks that need the final types (`sqrt` of an integer, `%` of a bool, ...).

use crate::frontend::error::{Error, ErrorKind};
use crate::ir::Expr;
use crate::ir::ScalarType;
use proc_macro2::Span;

/// A type variable.
pub type Var = usize;

/// A requirement on a variable's final type, checked once every variable is resolved.
#[derive(Clone, Debug)]
pub enum Require {
    /// A floating-point type (math functions, float literals).
    Float { op: String },
    /// A number, not bool (arithmetic).
    Numeric { op: String },
    /// A signed number (negation).
    Signed { op: String },
    /// An integer or bool (bit operations, `!`).
    IntOrBool { op: String },
    /// An integer (shifts).
    Int { op: String },
    /// A float literal, which must end up a float type (and finite in it).
    FloatLiteral { text: String, finite_f32: bool },
    /// An integer literal, which must end up an integer type that holds it.
    IntLiteral { text: String, value: i64 },
}

#[derive(Default)]
pub struct Types {
    parent: Vec<Var>,
    bound: Vec<Option<ScalarType>>,
    /// Default when unbound: `Some(F64)` for float literals, `Some(I32)` for integer literals.
    default: Vec<Option<ScalarType>>,
    checks: Vec<(Var, Require, Span)>,
}

impl Types {
    /// A fresh unbound variable.
    pub fn fresh(&mut self) -> Var {
        self.parent.push(self.parent.len());
        self.bound.push(None);
        self.default.push(None);
        self.parent.len() - 1
    }

    /// A variable bound to `ty`.
    pub fn known(&mut self, ty: ScalarType) -> Var {
        let v = self.fresh();
        self.bound[v] = Some(ty);
        v
    }

    /// A variable for an unsuffixed float literal.
    pub fn float_literal(&mut self, text: String, finite_f32: bool, span: Span) -> Var {
        let v = self.fresh();
        self.default[v] = Some(ScalarType::F64);
        self.checks.push((v, Require::FloatLiteral { text, finite_f32 }, span));
        v
    }

    /// A variable for an unsuffixed integer literal.
    pub fn int_literal(&mut self, text: String, value: i64, span: Span) -> Var {
        let v = self.fresh();
        self.default[v] = Some(ScalarType::I32);
        self.checks.push((v, Require::IntLiteral { text, value }, span));
        v
    }

    fn find(&mut self, v: Var) -> Var {
        let mut r = v;
        while self.parent[r] != r {
            r = self.parent[r];
        }
        let mut c = v;
        while self.parent[c] != r {
            let next = self.parent[c];
            self.parent[c] = r;
            c = next;
        }
        r
    }

    /// Makes `a` and `b` the same type, or reports both types at `span`.
    pub fn unify(&mut self, a: Var, b: Var, span: Span) -> Result<(), Error> {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return Ok(());
        }
        match (self.bound[ra], self.bound[rb]) {
            (Some(x), Some(y)) if x != y => {
                return Err(Error::new(span, ErrorKind::TypeMismatch { expected: x.to_string(), found: y.to_string() }))
            }
            _ => {}
        }
        self.parent[ra] = rb;
        self.bound[rb] = self.bound[rb].or(self.bound[ra]);
        // An integer literal meeting a float literal stays an error later; keep the float default.
        self.default[rb] = match (self.default[ra], self.default[rb]) {
            (Some(ScalarType::F64), _) | (_, Some(ScalarType::F64)) => Some(ScalarType::F64),
            (a, b) => b.or(a),
        };
        Ok(())
    }

    /// Records a requirement checked by [`Types::finish`].
    pub fn require(&mut self, v: Var, req: Require, span: Span) {
        self.checks.push((v, req, span));
    }

    /// Resolves every variable (applying literal defaults) and runs the deferred checks.
    pub fn finish(mut self) -> Result<Resolved, Error> {
        let n = self.parent.len();
        let mut out = Vec::with_capacity(n);
        for v in 0..n {
            let r = self.find(v);
            out.push(self.bound[r].or(self.default[r]).unwrap_or(ScalarType::F64));
        }
        for (v, req, span) in &self.checks {
            let ty = out[*v];
            let bad = |op: &String, wanted: &'static str| {
                Err(Error::new(*span, ErrorKind::BadOperand { op: op.clone(), ty: ty.to_string(), wanted }))
            };
            match req {
                Require::Float { op } if !ty.is_float() => return bad(op, "a floating-point value (f32 or f64)"),
                Require::Numeric { op } if ty == ScalarType::Bool => return bad(op, "a number"),
                Require::Signed { op } if !matches!(ty, ScalarType::F32 | ScalarType::F64 | ScalarType::I32) => {
                    return bad(op, "a signed number (f32, f64 or i32)")
                }
                Require::IntOrBool { op } if ty.is_float() => return bad(op, "an integer or a bool"),
                Require::Int { op } if !ty.is_int() => return bad(op, "an integer"),
                Require::FloatLiteral { text, .. } | Require::IntLiteral { text, .. }
                    if ty.is_float() != matches!(req, Require::FloatLiteral { .. }) =>
                {
                    return Err(Error::new(*span, ErrorKind::LiteralType { literal: text.clone(), ty: ty.to_string() }))
                }
                Require::FloatLiteral { text, finite_f32: false } if ty == ScalarType::F32 => {
                    return Err(Error::new(
                        *span,
                        ErrorKind::LiteralRange { literal: text.clone(), ty: ty.to_string() },
                    ))
                }
                Require::IntLiteral { text, value } if !int_fits(*value, ty) => {
                    return Err(Error::new(
                        *span,
                        ErrorKind::LiteralRange { literal: text.clone(), ty: ty.to_string() },
                    ))
                }
                _ => {}
            }
        }
        Ok(Resolved(out))
    }
}

/// Final types of all variables.
pub struct Resolved(Vec<ScalarType>);

impl Resolved {
    /// The final type of `v`.
    pub fn get(&self, v: Var) -> ScalarType {
        self.0[v]
    }
}

/// Whether an integer literal's value fits `ty` (`-2147483648` is a negation of a literal that
/// does not fit, as in Rust's lint; write `i32::MIN`).
pub fn int_fits(value: i64, ty: ScalarType) -> bool {
    match ty {
        ScalarType::I32 => value <= i32::MAX as i64,
        ScalarType::U32 => value <= u32::MAX as i64,
        _ => true,
    }
}

/// An expression whose types are still being inferred.
pub type TExpr = Expr<Var>;
