//! A plain-Rust interpreter of the stencil IR, one point at a time: the reference the fuzz tests
//! hold the generated loop nest to. It follows Rust's semantics for every operation (wrapping
//! integer arithmetic, `as` casts, the `f32`/`f64` methods) and shares no code with the printers.

use stencil_runtime::codegen::ir::{
    BinOp, Expr, ExprKind, Literal, MathFn, ParamId, ParamKind, ScalarType, Stmt, UnOp,
};
use stencil_runtime::codegen::StencilIr;

/// A value of one of the DSL's scalar types.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `f32`
    F32(f32),
    /// `f64`
    F64(f64),
    /// `i32`
    I32(i32),
    /// `u32`
    U32(u32),
    /// `bool`
    Bool(bool),
}

impl Value {
    /// The value as `f64` (`as` semantics; `bool` as 0 or 1).
    pub fn to_f64(self) -> f64 {
        match self {
            Value::F32(v) => v as f64,
            Value::F64(v) => v,
            Value::I32(v) => v as f64,
            Value::U32(v) => v as f64,
            Value::Bool(v) => v as u8 as f64,
        }
    }

    fn to_i64(self) -> i64 {
        match self {
            Value::F32(v) => v as i64,
            Value::F64(v) => v as i64,
            Value::I32(v) => v as i64,
            Value::U32(v) => v as i64,
            Value::Bool(v) => v as i64,
        }
    }

    /// `self as ty`, as Rust converts.
    pub fn cast(self, ty: ScalarType) -> Value {
        match (self, ty) {
            (Value::F32(v), ScalarType::I32) => Value::I32(v as i32),
            (Value::F32(v), ScalarType::U32) => Value::U32(v as u32),
            (Value::F64(v), ScalarType::I32) => Value::I32(v as i32),
            (Value::F64(v), ScalarType::U32) => Value::U32(v as u32),
            (Value::F64(v), ScalarType::F32) => Value::F32(v as f32),
            (Value::I32(v), ScalarType::F32) => Value::F32(v as f32),
            (Value::U32(v), ScalarType::F32) => Value::F32(v as f32),
            (v, ScalarType::F32) => Value::F32(v.to_f64() as f32),
            (v, ScalarType::F64) => Value::F64(v.to_f64()),
            (v, ScalarType::I32) => Value::I32(v.to_i64() as i32),
            (v, ScalarType::U32) => Value::U32(v.to_i64() as u32),
            (v, ScalarType::Bool) => Value::Bool(v.to_i64() != 0),
        }
    }

    fn bool(self) -> bool {
        match self {
            Value::Bool(b) => b,
            other => panic!("a condition of type {other:?}"),
        }
    }
}

/// The loads and scalars of one point.
pub struct Point<'a> {
    /// The value of field parameter `p` at `offset` from the point.
    pub load: &'a dyn Fn(ParamId, [i32; 3]) -> Value,
    /// The value of scalar parameter `p`.
    pub scalar: &'a dyn Fn(ParamId) -> Value,
    /// In a column sweep: the point's level (its place in the sweep) and the number of levels.
    pub level: Option<(i32, i32)>,
}

/// Runs the point update of `ir` at one point: the stores and folds, in order, as (field or
/// reduction parameter, value).
pub fn run_point(ir: &StencilIr, at: &Point<'_>) -> Vec<(ParamId, Value)> {
    let mut locals: Vec<Option<Value>> = vec![None; ir.locals.len()];
    let mut stores = Vec::new();
    exec(&ir.body, at, &mut locals, &mut stores);
    stores
}

/// Runs a column sweep over one column of `levels` levels: its carried declarations once, then
/// its body at each level in sweep order, the carried locals keeping their values. `load(level,
/// p, offset)` reads field parameter `p` (the caller shows the stores of earlier levels, which
/// `store(level, p, value)` receives at the end of each level's update).
pub fn run_column(
    ir: &StencilIr,
    levels: usize,
    load: &dyn Fn(usize, ParamId, [i32; 3]) -> Value,
    scalar: &dyn Fn(ParamId) -> Value,
    store: &mut dyn FnMut(usize, ParamId, Value),
) {
    let sweep = ir.sweep.as_ref().expect("a column sweep");
    let mut locals: Vec<Option<Value>> = vec![None; ir.locals.len()];
    let no_load = |_: ParamId, _: [i32; 3]| -> Value { panic!("a carried local's initial value reads a field") };
    let start = Point { load: &no_load, scalar, level: None };
    exec(&sweep.carried, &start, &mut locals, &mut Vec::new());
    for level in 0..levels {
        let at_level = |p: ParamId, offset: [i32; 3]| load(level, p, offset);
        let at = Point { load: &at_level, scalar, level: Some((level as i32, levels as i32)) };
        let mut stores = Vec::new();
        exec(&ir.body, &at, &mut locals, &mut stores);
        for (p, v) in stores {
            store(level, p, v);
        }
    }
}

fn exec(body: &[Stmt], at: &Point<'_>, locals: &mut Vec<Option<Value>>, stores: &mut Vec<(ParamId, Value)>) {
    for stmt in body {
        match stmt {
            Stmt::Let { local, init } => locals[*local] = init.as_ref().map(|e| eval(e, at, locals)),
            Stmt::Assign { local, value } => locals[*local] = Some(eval(value, at, locals)),
            Stmt::Store { field: param, value } | Stmt::Fold { reduction: param, value } => {
                let v = eval(value, at, locals);
                stores.push((*param, v));
            }
            Stmt::If { cond, then_body, else_body } => {
                let taken = eval(cond, at, locals).bool();
                exec(if taken { then_body } else { else_body }, at, locals, stores);
            }
        }
    }
}

fn eval(e: &Expr, at: &Point<'_>, locals: &[Option<Value>]) -> Value {
    let ev = |x: &Expr| eval(x, at, locals);
    match &e.kind {
        ExprKind::Lit(l) => match (*l, e.ty) {
            (Literal::Float(_, v), ScalarType::F32) => Value::F32(v),
            (Literal::Float(v, _), _) => Value::F64(v).cast(e.ty),
            (Literal::Int(v), ScalarType::F32) => Value::F32(v as f32),
            (Literal::Int(v), ScalarType::F64) => Value::F64(v as f64),
            (Literal::Int(v), ScalarType::U32) => Value::U32(v as u32),
            (Literal::Int(v), _) => Value::I32(v as i32),
            (Literal::Bool(b), _) => Value::Bool(b),
        },
        ExprKind::Local(l) => locals[*l].expect("a local read before it is set"),
        ExprKind::Scalar(p) => (at.scalar)(*p),
        ExprKind::Load { field, offset } => (at.load)(*field, *offset),
        ExprKind::Unary(op, a) => match (op, ev(a)) {
            (UnOp::Neg, Value::F32(v)) => Value::F32(-v),
            (UnOp::Neg, Value::F64(v)) => Value::F64(-v),
            (UnOp::Neg, Value::I32(v)) => Value::I32(v.wrapping_neg()),
            (UnOp::Neg, Value::U32(v)) => Value::U32(v.wrapping_neg()),
            (UnOp::Not, Value::Bool(v)) => Value::Bool(!v),
            (UnOp::Not, Value::I32(v)) => Value::I32(!v),
            (UnOp::Not, Value::U32(v)) => Value::U32(!v),
            (op, v) => panic!("{op:?} of {v:?}"),
        },
        ExprKind::Binary(op, a, b) => binary(*op, ev(a), ev(b)),
        ExprKind::Cast(a) => ev(a).cast(e.ty),
        ExprKind::Call(f, args) => {
            let v: Vec<Value> = args.iter().map(ev).collect();
            call(*f, &v)
        }
        ExprKind::Select(c, a, b) => {
            if ev(c).bool() {
                ev(a)
            } else {
                ev(b)
            }
        }
        ExprKind::Level => Value::I32(at.level.expect("the level of a column sweep").0),
        ExprKind::Levels => Value::I32(at.level.expect("the levels of a column sweep").1),
        ExprKind::PointValue { .. } => unreachable!("the functors' IR has its point functions inlined"),
    }
}

fn binary(op: BinOp, a: Value, b: Value) -> Value {
    use BinOp::*;
    macro_rules! float {
        ($a:expr, $b:expr, $wrap:path) => {
            match op {
                Add => $wrap($a + $b),
                Sub => $wrap($a - $b),
                Mul => $wrap($a * $b),
                Div => $wrap($a / $b),
                Rem => $wrap($a % $b),
                Eq => Value::Bool($a == $b),
                Ne => Value::Bool($a != $b),
                Lt => Value::Bool($a < $b),
                Le => Value::Bool($a <= $b),
                Gt => Value::Bool($a > $b),
                Ge => Value::Bool($a >= $b),
                _ => panic!("{op:?} of floats"),
            }
        };
    }
    macro_rules! int {
        ($a:expr, $b:expr, $wrap:path) => {
            match op {
                Add => $wrap($a.wrapping_add($b)),
                Sub => $wrap($a.wrapping_sub($b)),
                Mul => $wrap($a.wrapping_mul($b)),
                Div => $wrap($a.wrapping_div($b)),
                Rem => $wrap($a.wrapping_rem($b)),
                BitAnd => $wrap($a & $b),
                BitOr => $wrap($a | $b),
                BitXor => $wrap($a ^ $b),
                Shl => $wrap($a.wrapping_shl($b as u32)),
                Shr => $wrap($a.wrapping_shr($b as u32)),
                Eq => Value::Bool($a == $b),
                Ne => Value::Bool($a != $b),
                Lt => Value::Bool($a < $b),
                Le => Value::Bool($a <= $b),
                Gt => Value::Bool($a > $b),
                Ge => Value::Bool($a >= $b),
                _ => panic!("{op:?} of integers"),
            }
        };
    }
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => float!(x, y, Value::F32),
        (Value::F64(x), Value::F64(y)) => float!(x, y, Value::F64),
        (Value::I32(x), Value::I32(y)) => int!(x, y, Value::I32),
        (Value::U32(x), Value::U32(y)) => int!(x, y, Value::U32),
        (Value::Bool(x), Value::Bool(y)) => Value::Bool(match op {
            And => x && y,
            Or => x || y,
            BitAnd => x & y,
            BitOr => x | y,
            BitXor => x ^ y,
            Eq => x == y,
            Ne => x != y,
            _ => panic!("{op:?} of bools"),
        }),
        (a, b) => panic!("{op:?} of {a:?} and {b:?}"),
    }
}

fn call(f: MathFn, v: &[Value]) -> Value {
    use MathFn::*;
    macro_rules! float {
        ($t:ty, $wrap:path, $x:expr) => {{
            let arg = |i: usize| -> $t {
                match v[i] {
                    Value::F32(a) => a as $t,
                    Value::F64(a) => a as $t,
                    Value::I32(a) => a as $t,
                    Value::U32(a) => a as $t,
                    Value::Bool(a) => a as u8 as $t,
                }
            };
            let x: $t = $x;
            $wrap(match f {
                Sqrt => x.sqrt(),
                Cbrt => x.cbrt(),
                Abs => x.abs(),
                Min => x.min(arg(1)),
                Max => x.max(arg(1)),
                Clamp => x.clamp(arg(1), arg(2)),
                Powi => x.powi(arg(1) as i32),
                Powf => x.powf(arg(1)),
                Exp => x.exp(),
                Exp2 => x.exp2(),
                Ln => x.ln(),
                Log2 => x.log2(),
                Log10 => x.log10(),
                Sin => x.sin(),
                Cos => x.cos(),
                Tan => x.tan(),
                Asin => x.asin(),
                Acos => x.acos(),
                Atan => x.atan(),
                Atan2 => x.atan2(arg(1)),
                Sinh => x.sinh(),
                Cosh => x.cosh(),
                Tanh => x.tanh(),
                Floor => x.floor(),
                Ceil => x.ceil(),
                Round => x.round(),
                Trunc => x.trunc(),
                Copysign => x.copysign(arg(1)),
                MulAdd => x.mul_add(arg(1), arg(2)),
                Hypot => x.hypot(arg(1)),
                Signum => x.signum(),
                Recip => x.recip(),
            })
        }};
    }
    macro_rules! int {
        ($t:ty, $wrap:path, $x:expr) => {{
            let arg = |i: usize| -> $t {
                match v[i] {
                    Value::I32(a) => a as $t,
                    Value::U32(a) => a as $t,
                    other => panic!("an integer call with {other:?}"),
                }
            };
            let x: $t = $x;
            $wrap(match f {
                Min => x.min(arg(1)),
                Max => x.max(arg(1)),
                Clamp => x.clamp(arg(1), arg(2)),
                Abs => x.wrapping_abs_or_self(),
                Signum => x.signum_or_self(),
                other => panic!("{other:?} of an integer"),
            })
        }};
    }
    match v[0] {
        Value::F32(x) => float!(f32, Value::F32, x),
        Value::F64(x) => float!(f64, Value::F64, x),
        Value::I32(x) => int!(i32, Value::I32, x),
        Value::U32(x) => int!(u32, Value::U32, x),
        Value::Bool(b) => panic!("{f:?} of bool {b}"),
    }
}

/// `abs` and `signum` for both integer types (`u32` is its own absolute value and sign 0/1).
trait IntSign {
    fn wrapping_abs_or_self(self) -> Self;
    fn signum_or_self(self) -> Self;
}
impl IntSign for i32 {
    fn wrapping_abs_or_self(self) -> Self {
        self.wrapping_abs()
    }
    fn signum_or_self(self) -> Self {
        self.signum()
    }
}
impl IntSign for u32 {
    fn wrapping_abs_or_self(self) -> Self {
        self
    }
    fn signum_or_self(self) -> Self {
        self.min(1)
    }
}

/// The element type of field parameter `p` of `ir`.
pub fn field_type(ir: &StencilIr, p: ParamId) -> ScalarType {
    match ir.params[p].kind {
        ParamKind::Field(f) => f.elem,
        ParamKind::Scalar(t) | ParamKind::Held(t) => t,
        ParamKind::Reduction(r) => r.elem,
    }
}
