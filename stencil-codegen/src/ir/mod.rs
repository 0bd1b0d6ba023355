//! The stencil IR: a typed, loop-free point update over fields and scalars.
//!
//! Built from a `syn::ItemFn` by [`crate::lower`]; every expression carries its scalar type, every
//! field access its compile-time offset. Printers (Rust nest, CUDA per strategy) read only this.

use std::fmt;

/// A scalar type of the DSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `i32`
    I32,
    /// `u32`
    U32,
    /// `bool`
    Bool,
}

impl ScalarType {
    /// Parses a Rust type name (`f32`, `f64`, `i32`, `u32`, `bool`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "f32" => ScalarType::F32,
            "f64" => ScalarType::F64,
            "i32" => ScalarType::I32,
            "u32" => ScalarType::U32,
            "bool" => ScalarType::Bool,
            _ => return None,
        })
    }

    /// The Rust spelling.
    pub fn rust_name(self) -> &'static str {
        match self {
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::Bool => "bool",
        }
    }

    /// Whether this is `f32` or `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F32 | ScalarType::F64)
    }

    /// Whether this is `i32` or `u32`.
    pub fn is_int(self) -> bool {
        matches!(self, ScalarType::I32 | ScalarType::U32)
    }

    /// Size in bytes of one element in a field.
    pub fn size_bytes(self) -> usize {
        match self {
            ScalarType::F64 => 8,
            ScalarType::Bool => 1,
            _ => 4,
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rust_name())
    }
}

/// A field parameter: element type and whether the stencil may write it (`&mut`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldParam {
    /// Element type.
    pub elem: ScalarType,
    /// `true` for `&mut FieldN<T>`: written, and readable only at offset zero.
    pub writable: bool,
}

/// How a reduction combines the values folded into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `Sum<T>`: the sum (identity 0).
    Sum,
    /// `Min<T>`: the minimum (identity +infinity; NaN operands are ignored, as `f64::min` does).
    Min,
    /// `Max<T>`: the maximum (identity -infinity; NaN operands are ignored, as `f64::max` does).
    Max,
}

impl ReduceOp {
    /// Every operator.
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max];

    /// The name of the parameter type (`Sum`, `Min`, `Max`).
    pub fn type_name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "Sum",
            ReduceOp::Min => "Min",
            ReduceOp::Max => "Max",
        }
    }

    /// Looks an operator up by its parameter type's name.
    pub fn from_type_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.type_name() == name)
    }

    /// The lower-case word of the serialised IR (`sum`, `min`, `max`).
    pub fn word(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }
}

/// A reduction parameter (`cfl: &mut Max<f64>`): values are folded into it at every point, and
/// the launch combines them over the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceParam {
    /// The operator.
    pub op: ReduceOp,
    /// The value and accumulator type (`f32` or `f64`).
    pub elem: ScalarType,
}

/// What a parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A scalar passed by value, the same for every point.
    Scalar(ScalarType),
    /// A scalar held in the executor's memory (`Held<f64>`), read once per launch through its
    /// address: a recorded step reads the value the scalar holds when it is replayed.
    Held(ScalarType),
    /// A field of the stencil's dimensionality.
    Field(FieldParam),
    /// A reduction over the range (`&mut Sum<f64>`, `&mut Min<f32>`, `&mut Max<f64>`).
    Reduction(ReduceParam),
}

impl ParamKind {
    /// The type of a value the body reads as a scalar: a scalar passed by value or a held one.
    pub fn value_type(self) -> Option<ScalarType> {
        match self {
            ParamKind::Scalar(t) | ParamKind::Held(t) => Some(t),
            ParamKind::Field(_) | ParamKind::Reduction(_) => None,
        }
    }
}

/// A parameter after the point index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The name in the user's function.
    pub name: String,
    /// Scalar or field.
    pub kind: ParamKind,
}

/// A local variable, numbered; names are made unique (shadowed names get a suffix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Local {
    /// Unique name, safe to print in Rust and C.
    pub name: String,
    /// Its type.
    pub ty: ScalarType,
}

/// Index of a local in [`StencilIr::locals`].
pub type LocalId = usize;
/// Index of a parameter in [`StencilIr::params`].
pub type ParamId = usize;

/// A statement of the point update. `T` is the type annotation of expressions: a [`ScalarType`]
/// in the finished IR, a type variable while lowering infers types.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt<T = ScalarType> {
    /// Declares a local, with an initial value or (when assigned in both branches of a later
    /// `if`) without one.
    Let {
        /// The local declared.
        local: LocalId,
        /// Its initial value.
        init: Option<Expr<T>>,
    },
    /// Assigns a local.
    Assign {
        /// The local assigned.
        local: LocalId,
        /// The new value.
        value: Expr<T>,
    },
    /// Writes the current point of a writable field.
    Store {
        /// The field parameter.
        field: ParamId,
        /// The value written.
        value: Expr<T>,
    },
    /// Folds a value into a reduction parameter (`cfl.fold(x)`).
    Fold {
        /// The reduction parameter.
        reduction: ParamId,
        /// The value folded.
        value: Expr<T>,
    },
    /// A two-way branch.
    If {
        /// Condition (`bool`).
        cond: Expr<T>,
        /// Taken when true.
        then_body: Vec<Stmt<T>>,
        /// Taken when false (may be empty).
        else_body: Vec<Stmt<T>>,
    },
}

/// A typed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr<T = ScalarType> {
    /// The value's type.
    pub ty: T,
    /// What it computes.
    pub kind: ExprKind<T>,
}

/// A constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Literal {
    /// A floating-point constant as `f64` and as `f32`, each rounded once from the source text
    /// (rounding the `f64` to `f32` could differ in the last bit); printers use the one of the
    /// expression's type.
    Float(f64, f32),
    /// An integer constant.
    Int(i64),
    /// `true` / `false`.
    Bool(bool),
}

/// The operation of an expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind<T = ScalarType> {
    /// A constant of the expression's type.
    Lit(Literal),
    /// A local's current value.
    Local(LocalId),
    /// A scalar parameter.
    Scalar(ParamId),
    /// A field value at a constant offset from the current point (unused axes are 0).
    Load {
        /// The field parameter.
        field: ParamId,
        /// Offset per axis `(i, j, k)`.
        offset: [i32; 3],
    },
    /// A unary operation.
    Unary(UnOp, Box<Expr<T>>),
    /// A binary operation.
    Binary(BinOp, Box<Expr<T>>, Box<Expr<T>>),
    /// A conversion to the expression's type (Rust `as`).
    Cast(Box<Expr<T>>),
    /// A math function.
    Call(MathFn, Vec<Expr<T>>),
    /// `if c { a } else { b }` with side-effect-free branches.
    Select(Box<Expr<T>>, Box<Expr<T>>, Box<Expr<T>>),
    /// `idx.level()` in a column sweep: the current level's place in the sweep (`i32`, 0 at the
    /// first level swept: the bottom of the range going forward, its top going backward).
    Level,
    /// `idx.levels()` in a column sweep: the number of levels the launch sweeps (`i32`).
    Levels,
    /// Output `output` of point function `func` ([`StencilIr::point_fns`]) evaluated at `offset`
    /// from the current point: the function's body with every load shifted by `offset`.
    /// [`crate::passes::inline_point_fns`] replaces it by that body; the CPU nest computes the
    /// function once per point of a block and reads its values back.
    PointValue {
        /// The point function.
        func: usize,
        /// Which of its outputs.
        output: usize,
        /// Where it is evaluated, from the current point.
        offset: [i32; 3],
    },
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `!x` (logical on bool, bitwise on integers)
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    /// The operator as written in Rust and C.
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            And => "&&",
            Or => "||",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Shl => "<<",
            Shr => ">>",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
        }
    }

    /// Whether the result is `bool` whatever the operand type.
    pub fn is_comparison(self) -> bool {
        use BinOp::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge)
    }
}

/// Math functions a stencil may call, as methods (`x.sqrt()`) or paths (`f64::sqrt(x)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum MathFn {
    Sqrt,
    Cbrt,
    Abs,
    Min,
    Max,
    Clamp,
    Powi,
    Powf,
    Exp,
    Exp2,
    Ln,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Sinh,
    Cosh,
    Tanh,
    Floor,
    Ceil,
    Round,
    Trunc,
    Copysign,
    MulAdd,
    Hypot,
    Signum,
    Recip,
}

impl MathFn {
    /// Every function, for error messages and tables.
    pub const ALL: [MathFn; 32] = {
        use MathFn::*;
        [
            Sqrt, Cbrt, Abs, Min, Max, Clamp, Powi, Powf, Exp, Exp2, Ln, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan,
            Atan2, Sinh, Cosh, Tanh, Floor, Ceil, Round, Trunc, Copysign, MulAdd, Hypot, Signum, Recip,
        ]
    };

    /// The Rust method name.
    pub fn rust_name(self) -> &'static str {
        use MathFn::*;
        match self {
            Sqrt => "sqrt",
            Cbrt => "cbrt",
            Abs => "abs",
            Min => "min",
            Max => "max",
            Clamp => "clamp",
            Powi => "powi",
            Powf => "powf",
            Exp => "exp",
            Exp2 => "exp2",
            Ln => "ln",
            Log2 => "log2",
            Log10 => "log10",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Atan2 => "atan2",
            Sinh => "sinh",
            Cosh => "cosh",
            Tanh => "tanh",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            Copysign => "copysign",
            MulAdd => "mul_add",
            Hypot => "hypot",
            Signum => "signum",
            Recip => "recip",
        }
    }

    /// Looks a function up by its Rust method name.
    pub fn from_rust_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.rust_name() == name)
    }

    /// Number of arguments, the receiver included.
    pub fn arity(self) -> usize {
        use MathFn::*;
        match self {
            Min | Max | Powi | Powf | Atan2 | Copysign | Hypot => 2,
            Clamp | MulAdd => 3,
            _ => 1,
        }
    }

    /// Whether the function also exists for integers (`i32::abs`, `u32::max`, ...).
    pub fn accepts_int(self) -> bool {
        matches!(self, MathFn::Abs | MathFn::Min | MathFn::Max | MathFn::Clamp | MathFn::Signum)
    }

    /// Floating-point operations counted for one call (a transcendental counts as one, like a
    /// division; `mul_add` counts two).
    pub fn flops(self) -> usize {
        match self {
            MathFn::MulAdd => 2,
            MathFn::Clamp => 2,
            _ => 1,
        }
    }
}

/// The order in which a column sweep visits the levels (the last axis) of each column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SweepOrder {
    /// From the range's first level up (`#[stencil(sweep = forward)]`).
    Forward,
    /// From the range's last level down (`#[stencil(sweep = backward)]`).
    Backward,
}

impl SweepOrder {
    /// The attribute's word (`forward`, `backward`), also the serialised form's.
    pub fn word(self) -> &'static str {
        match self {
            SweepOrder::Forward => "forward",
            SweepOrder::Backward => "backward",
        }
    }

    /// Looks an order up by its word.
    pub fn from_word(word: &str) -> Option<Self> {
        [SweepOrder::Forward, SweepOrder::Backward].into_iter().find(|o| o.word() == word)
    }

    /// The sign of the step from one level to the next along the column axis (+1 forward).
    pub fn step(self) -> i32 {
        match self {
            SweepOrder::Forward => 1,
            SweepOrder::Backward => -1,
        }
    }

    /// Whether `offset` of a `dim`-dimensional stencil points at a level of the same column
    /// that this sweep has already passed (the column axis is the last).
    pub fn has_passed(self, dim: usize, offset: [i32; 3]) -> bool {
        let axis = dim - 1;
        (0..3).all(|a| a == axis || offset[a] == 0) && offset[axis] * self.step() < 0
    }
}

/// A column sweep: every column (the points that share all coordinates but the last) is
/// updated one level at a time, in `order`, so a level may read what the levels before it
/// wrote; columns are independent of each other.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// Which way the levels are visited.
    pub order: SweepOrder,
    /// The carried locals' declarations (`#[carry] let mut q = 0.0;`): `Stmt::Let`s run once
    /// per column before its first level, their locals keeping their values from one level to
    /// the next. Their initial values read no field.
    pub carried: Vec<Stmt>,
}

/// A point function of a stencil (`let flux = |p: Idx3| ...;`): values defined at every point
/// from the stencil's fields and scalars alone, evaluated at points near the current one
/// ([`ExprKind::PointValue`]). Its body is written for the point itself (loads at their own
/// offsets); a value at offset `o` is the same operations on the loads shifted by `o`.
#[derive(Clone, Debug, PartialEq)]
pub struct PointFn {
    /// The closure's name in the user's function.
    pub name: String,
    /// The statements computing its outputs at one point (no store, fold or level).
    pub body: Vec<Stmt>,
    /// Its outputs: locals the body sets (one per scalar of the closure's value, flattened).
    pub outputs: Vec<LocalId>,
}

/// A stencil: its signature and its loop-free body.
#[derive(Clone, Debug, PartialEq)]
pub struct StencilIr {
    /// The function's name (`diffusion3d`).
    pub name: String,
    /// Dimensionality (1, 2 or 3), from the index parameter's type.
    pub dim: usize,
    /// The point index parameter's name.
    pub index_name: String,
    /// Parameters after the index, in order.
    pub params: Vec<Param>,
    /// Locals, referenced by [`LocalId`].
    pub locals: Vec<Local>,
    /// The statements of one point update.
    pub body: Vec<Stmt>,
    /// `Some` for a column sweep (`#[stencil(sweep = ...)]`): the body runs at every level of
    /// each column in order; `None` for a point-parallel stencil.
    pub sweep: Option<Sweep>,
    /// Point functions the body evaluates ([`ExprKind::PointValue`]); empty once inlined.
    pub point_fns: Vec<PointFn>,
}

impl StencilIr {
    /// The name of the functor type the macro emits (`diffusion3d` → `Diffusion3d`).
    pub fn functor_name(&self) -> String {
        self.name
            .split('_')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let mut c = s.chars();
                c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
            })
            .collect()
    }

    /// Indices of the field parameters, in order.
    pub fn field_ids(&self) -> impl Iterator<Item = ParamId> + '_ {
        self.params.iter().enumerate().filter(|(_, p)| matches!(p.kind, ParamKind::Field(_))).map(|(i, _)| i)
    }

    /// The field parameter `id`, if it is one.
    pub fn field(&self, id: ParamId) -> Option<FieldParam> {
        match self.params.get(id)?.kind {
            ParamKind::Field(f) => Some(f),
            ParamKind::Scalar(_) | ParamKind::Held(_) | ParamKind::Reduction(_) => None,
        }
    }

    /// The reduction parameters, in order: their indices and kinds.
    pub fn reductions(&self) -> impl Iterator<Item = (ParamId, ReduceParam)> + '_ {
        self.params.iter().enumerate().filter_map(|(i, p)| match p.kind {
            ParamKind::Reduction(r) => Some((i, r)),
            _ => None,
        })
    }

    /// Whether the stencil has a reduction parameter.
    pub fn reduces(&self) -> bool {
        self.reductions().next().is_some()
    }

    /// The axis a column sweep walks along (the last one).
    pub fn column_axis(&self) -> usize {
        self.dim - 1
    }

    /// Whether a writable field may be read at `offset`: at the point itself, or,
    /// in a column sweep, at a level the sweep has already passed in the same column.
    pub fn reads_written_at(&self, offset: [i32; 3]) -> bool {
        offset == [0; 3] || self.sweep.as_ref().is_some_and(|s| s.order.has_passed(self.dim, offset))
    }
}

impl<T> Expr<T> {
    /// Replaces every type annotation through `f` (used to resolve inferred types).
    pub fn map_types<U, E>(self, f: &mut dyn FnMut(T) -> Result<U, E>) -> Result<Expr<U>, E> {
        let boxed = |e: Box<Expr<T>>, f: &mut dyn FnMut(T) -> Result<U, E>| -> Result<Box<Expr<U>>, E> {
            Ok(Box::new(e.map_types(f)?))
        };
        let kind = match self.kind {
            ExprKind::Lit(l) => ExprKind::Lit(l),
            ExprKind::Local(l) => ExprKind::Local(l),
            ExprKind::Scalar(p) => ExprKind::Scalar(p),
            ExprKind::Load { field, offset } => ExprKind::Load { field, offset },
            ExprKind::Unary(op, a) => ExprKind::Unary(op, boxed(a, f)?),
            ExprKind::Binary(op, a, b) => ExprKind::Binary(op, boxed(a, f)?, boxed(b, f)?),
            ExprKind::Cast(a) => ExprKind::Cast(boxed(a, f)?),
            ExprKind::Call(m, args) => {
                ExprKind::Call(m, args.into_iter().map(|a| a.map_types(f)).collect::<Result<_, _>>()?)
            }
            ExprKind::Select(c, a, b) => ExprKind::Select(boxed(c, f)?, boxed(a, f)?, boxed(b, f)?),
            ExprKind::Level => ExprKind::Level,
            ExprKind::Levels => ExprKind::Levels,
            ExprKind::PointValue { func, output, offset } => ExprKind::PointValue { func, output, offset },
        };
        Ok(Expr { ty: f(self.ty)?, kind })
    }

    /// Visits this expression and every sub-expression, parents first.
    pub fn visit(&self, f: &mut impl FnMut(&Expr<T>)) {
        f(self);
        match &self.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Scalar(_)
            | ExprKind::Load { .. }
            | ExprKind::Level
            | ExprKind::Levels
            | ExprKind::PointValue { .. } => {}
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => a.visit(f),
            ExprKind::Binary(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| a.visit(f)),
            ExprKind::Select(c, a, b) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
        }
    }

    /// Visits this expression and every sub-expression mutably, parents first (a rewrite of a
    /// node's kind is then walked in its new form).
    pub fn visit_mut(&mut self, f: &mut impl FnMut(&mut Expr<T>)) {
        f(self);
        match &mut self.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Scalar(_)
            | ExprKind::Load { .. }
            | ExprKind::Level
            | ExprKind::Levels
            | ExprKind::PointValue { .. } => {}
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => a.visit_mut(f),
            ExprKind::Binary(_, a, b) => {
                a.visit_mut(f);
                b.visit_mut(f);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(|a| a.visit_mut(f)),
            ExprKind::Select(c, a, b) => {
                c.visit_mut(f);
                a.visit_mut(f);
                b.visit_mut(f);
            }
        }
    }
}

impl<T> Stmt<T> {
    /// Replaces every type annotation through `f`.
    pub fn map_types<U, E>(self, f: &mut dyn FnMut(T) -> Result<U, E>) -> Result<Stmt<U>, E> {
        let list = |v: Vec<Stmt<T>>, f: &mut dyn FnMut(T) -> Result<U, E>| -> Result<Vec<Stmt<U>>, E> {
            v.into_iter().map(|s| s.map_types(f)).collect()
        };
        Ok(match self {
            Stmt::Let { local, init } => Stmt::Let { local, init: init.map(|e| e.map_types(f)).transpose()? },
            Stmt::Assign { local, value } => Stmt::Assign { local, value: value.map_types(f)? },
            Stmt::Store { field, value } => Stmt::Store { field, value: value.map_types(f)? },
            Stmt::Fold { reduction, value } => Stmt::Fold { reduction, value: value.map_types(f)? },
            Stmt::If { cond, then_body, else_body } => {
                Stmt::If { cond: cond.map_types(f)?, then_body: list(then_body, f)?, else_body: list(else_body, f)? }
            }
        })
    }
}

/// Visits every expression of a statement list (with sub-expressions), in order.
pub fn visit_exprs<T>(body: &[Stmt<T>], f: &mut impl FnMut(&Expr<T>)) {
    for stmt in body {
        match stmt {
            Stmt::Let { init, .. } => {
                if let Some(e) = init {
                    e.visit(f)
                }
            }
            Stmt::Assign { value, .. } | Stmt::Store { value, .. } | Stmt::Fold { value, .. } => value.visit(f),
            Stmt::If { cond, then_body, else_body } => {
                cond.visit(f);
                visit_exprs(then_body, f);
                visit_exprs(else_body, f);
            }
        }
    }
}

/// Visits every expression of a statement list (with sub-expressions) mutably, in order.
pub fn visit_exprs_mut<T>(body: &mut [Stmt<T>], f: &mut impl FnMut(&mut Expr<T>)) {
    for stmt in body {
        match stmt {
            Stmt::Let { init, .. } => {
                if let Some(e) = init {
                    e.visit_mut(f)
                }
            }
            Stmt::Assign { value, .. } | Stmt::Store { value, .. } | Stmt::Fold { value, .. } => value.visit_mut(f),
            Stmt::If { cond, then_body, else_body } => {
                cond.visit_mut(f);
                visit_exprs_mut(then_body, f);
                visit_exprs_mut(else_body, f);
            }
        }
    }
}

mod serial;
pub use serial::{DecodeError, IR_FORMAT};

#[cfg(test)]
mod tests {
    use super::*;

    fn column(dim: usize, order: SweepOrder) -> StencilIr {
        StencilIr {
            name: "c".into(),
            dim,
            index_name: "idx".into(),
            params: Vec::new(),
            locals: Vec::new(),
            body: Vec::new(),
            sweep: Some(Sweep { order, carried: Vec::new() }),
            point_fns: Vec::new(),
        }
    }

    #[test]
    fn a_sweep_reads_written_fields_only_at_levels_it_has_passed() {
        let forward = column(3, SweepOrder::Forward);
        assert!(forward.reads_written_at([0, 0, 0]));
        assert!(forward.reads_written_at([0, 0, -1]) && forward.reads_written_at([0, 0, -3]));
        assert!(!forward.reads_written_at([0, 0, 1]) && !forward.reads_written_at([1, 0, -1]));
        let backward = column(3, SweepOrder::Backward);
        assert!(backward.reads_written_at([0, 0, 2]) && !backward.reads_written_at([0, 0, -1]));
        let plane = column(2, SweepOrder::Forward);
        assert!(plane.reads_written_at([0, -1, 0]) && !plane.reads_written_at([0, 0, -1]));
        let point = StencilIr { sweep: None, ..forward };
        assert!(point.reads_written_at([0; 3]) && !point.reads_written_at([0, 0, -1]));
    }
}
