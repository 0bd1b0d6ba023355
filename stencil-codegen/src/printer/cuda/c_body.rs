//! The point update as C: expressions and statements, with field loads and stores delegated to
//! the strategy (a register, shared memory or a global load), so every strategy prints the same
//! arithmetic as the CPU nest.

use crate::ir::{BinOp, Expr, ExprKind, Literal, MathFn, ParamKind, ReduceOp, ScalarType, StencilIr, Stmt, UnOp};
use std::fmt::Write;

/// How a strategy serves the field accesses of one point.
pub trait Access {
    /// C expression for field `field` at stencil offset `offset` (axes i, j, k).
    fn load(&self, field: usize, offset: [i32; 3]) -> String;
    /// C statement writing `value` to the current point of field `field`.
    fn store(&self, field: usize, value: &str) -> String;
    /// C expression for output `output` of point function `func` at stencil offset `offset`
    /// (only for a strategy that keeps point functions: the others print the inlined IR).
    fn point_value(&self, func: usize, output: usize, offset: [i32; 3]) -> String {
        let _ = (func, output, offset);
        unreachable!("point functions are inlined (passes::inline_point_fns) before this kernel is printed")
    }
}

/// The C name of a scalar type.
pub fn c_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
        ScalarType::I32 => "int",
        ScalarType::U32 => "unsigned int",
        ScalarType::Bool => "bool",
    }
}

/// The device function that folds a value into an accumulator of `op` (defined by the reduction
/// kernels' source).
pub fn combine_fn(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "stencil_sum",
        ReduceOp::Min => "stencil_min",
        ReduceOp::Max => "stencil_max",
    }
}

/// The C name of a kernel parameter for IR parameter `p` (prefixed: user names never clash with
/// C keywords or the kernel's own variables).
pub fn param_name(ir: &StencilIr, p: usize) -> String {
    crate::naming::param(&ir.params[p].name)
}

/// A held scalar's kernel parameter: the address of its value (`const double* __restrict__
/// p_dt_held`), which [`held_loads`] reads once at the kernel's entry into the name the body uses.
pub fn held_param(ir: &StencilIr, p: usize, t: ScalarType) -> String {
    format!("const {}* __restrict__ {}_held", c_type(t), param_name(ir, p))
}

/// The loads of every held scalar at a kernel's entry (`const double p_dt = *p_dt_held;`): the
/// body then reads it as it reads a scalar passed by value, with the same arithmetic and bits.
pub fn held_loads(ir: &StencilIr) -> String {
    let mut s = String::new();
    for (p, param) in ir.params.iter().enumerate() {
        if let ParamKind::Held(t) = param.kind {
            let name = param_name(ir, p);
            s.push_str(&format!("    const {} {name} = *{name}_held;\n", c_type(t)));
        }
    }
    s
}

/// Prints the statements of one point update, indented by `indent` spaces.
pub fn print_body(ir: &StencilIr, access: &dyn Access, indent: usize) -> String {
    print_stmts(ir, &ir.body, access, indent)
}

/// Prints `stmts` (the body, or a column sweep's carried declarations) of `ir`.
pub fn print_stmts(ir: &StencilIr, stmts: &[Stmt], access: &dyn Access, indent: usize) -> String {
    let mut out = String::new();
    let p = CPrinter { ir, access };
    p.stmts(stmts, indent, &mut out);
    out
}

struct CPrinter<'a> {
    ir: &'a StencilIr,
    access: &'a dyn Access,
}

impl CPrinter<'_> {
    fn stmts(&self, body: &[Stmt], indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        for s in body {
            match s {
                Stmt::Let { local, init } => {
                    let l = &self.ir.locals[*local];
                    match init {
                        Some(e) => writeln!(out, "{pad}{} {} = {};", c_type(l.ty), l.name, self.expr(e)),
                        None => writeln!(out, "{pad}{} {};", c_type(l.ty), l.name),
                    }
                    .expect("write to String");
                }
                Stmt::Assign { local, value } => {
                    writeln!(out, "{pad}{} = {};", self.ir.locals[*local].name, self.expr(value)).expect("write");
                }
                Stmt::Store { field, value } => {
                    writeln!(out, "{pad}{}", self.access.store(*field, &self.expr(value))).expect("write");
                }
                Stmt::Fold { reduction, value } => {
                    let ParamKind::Reduction(r) = self.ir.params[*reduction].kind else {
                        unreachable!("a fold's target is a reduction parameter")
                    };
                    let (acc, op) = (crate::naming::acc(&self.ir.params[*reduction].name), combine_fn(r.op));
                    writeln!(out, "{pad}{acc} = {op}({acc}, {});", self.expr(value)).expect("write");
                }
                Stmt::If { cond, then_body, else_body } => {
                    writeln!(out, "{pad}if ({}) {{", self.expr(cond)).expect("write");
                    self.stmts(then_body, indent + 4, out);
                    if else_body.is_empty() {
                        writeln!(out, "{pad}}}").expect("write");
                    } else {
                        writeln!(out, "{pad}}} else {{").expect("write");
                        self.stmts(else_body, indent + 4, out);
                        writeln!(out, "{pad}}}").expect("write");
                    }
                }
            }
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Lit(l) => literal(*l, e.ty),
            ExprKind::Local(id) => self.ir.locals[*id].name.clone(),
            ExprKind::Scalar(p) => {
                let name = param_name(self.ir, *p);
                if e.ty == ScalarType::Bool {
                    format!("({name} != 0)")
                } else {
                    name
                }
            }
            ExprKind::Load { field, offset } => self.access.load(*field, *offset),
            ExprKind::Unary(UnOp::Neg, a) => format!("(-{})", self.expr(a)),
            ExprKind::Unary(UnOp::Not, a) if a.ty == ScalarType::Bool => format!("(!{})", self.expr(a)),
            ExprKind::Unary(UnOp::Not, a) => format!("(~{})", self.expr(a)),
            ExprKind::Binary(BinOp::Rem, a, b) if e.ty.is_float() => {
                let f = if e.ty == ScalarType::F32 { "fmodf" } else { "fmod" };
                format!("{f}({}, {})", self.expr(a), self.expr(b))
            }
            ExprKind::Binary(op, a, b) => format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b)),
            ExprKind::Cast(a) => format!("(({}){})", c_type(e.ty), self.expr(a)),
            ExprKind::Call(f, args) => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                math_call(*f, e.ty, &args)
            }
            ExprKind::Select(c, a, b) => format!("({} ? {} : {})", self.expr(c), self.expr(a), self.expr(b)),
            ExprKind::Level => crate::naming::C_LEVEL.to_string(),
            ExprKind::Levels => crate::naming::C_LEVELS.to_string(),
            ExprKind::PointValue { func, output, offset } => self.access.point_value(*func, *output, *offset),
        }
    }
}

/// A C literal of type `ty`.
pub fn literal(l: Literal, ty: ScalarType) -> String {
    match (l, ty) {
        (Literal::Bool(b), _) => b.to_string(),
        (Literal::Float(_, v), ScalarType::F32) => float_literal(v as f64, true),
        (Literal::Float(v, _), _) => float_literal(v, false),
        (Literal::Int(v), ScalarType::I32) if v == i32::MIN as i64 => "(-2147483647 - 1)".into(),
        (Literal::Int(v), ScalarType::I32) => format!("({v})"),
        (Literal::Int(v), ScalarType::U32) => format!("{v}u"),
        (Literal::Int(v), t) => float_literal(v as f64, t == ScalarType::F32),
    }
}

fn float_literal(v: f64, single: bool) -> String {
    if v.is_infinite() {
        let inf = if single { "__int_as_float(0x7f800000)" } else { "__longlong_as_double(0x7ff0000000000000LL)" };
        return if v > 0.0 { inf.into() } else { format!("(-{inf})") };
    }
    // Rust's `{:?}` prints the shortest text that reads back to the same value.
    let text = if single { format!("{:?}", v as f32) } else { format!("{v:?}") };
    let text = if text.contains(['.', 'e', 'E']) { text } else { format!("{text}.0") };
    let text = if single { format!("{text}f") } else { text };
    if v.is_sign_negative() {
        format!("({text})")
    } else {
        text
    }
}

fn math_call(f: MathFn, ty: ScalarType, a: &[String]) -> String {
    use MathFn::*;
    if ty.is_int() {
        return match f {
            Abs => format!("abs({})", a[0]),
            Min => format!("min({}, {})", a[0], a[1]),
            Max => format!("max({}, {})", a[0], a[1]),
            Clamp => format!("min(max({}, {}), {})", a[0], a[1], a[2]),
            Signum => format!("((int)({0} > 0) - (int)({0} < 0))", a[0]),
            other => unreachable!("{other:?} on integers is rejected by lowering"),
        };
    }
    let s = if ty == ScalarType::F32 { "f" } else { "" };
    let one = if ty == ScalarType::F32 { "1.0f" } else { "1.0" };
    let c = |name: &str| format!("{name}{s}({})", a.join(", "));
    match f {
        Sqrt => c("sqrt"),
        Cbrt => c("cbrt"),
        Abs => c("fabs"),
        Min => c("fmin"),
        Max => c("fmax"),
        Clamp => format!("fmin{s}(fmax{s}({}, {}), {})", a[0], a[1], a[2]),
        Powi => format!("stencil_powi({}, {})", a[0], a[1]),
        Powf => c("pow"),
        Exp => c("exp"),
        Exp2 => c("exp2"),
        Ln => c("log"),
        Log2 => c("log2"),
        Log10 => c("log10"),
        Sin => c("sin"),
        Cos => c("cos"),
        Tan => c("tan"),
        Asin => c("asin"),
        Acos => c("acos"),
        Atan => c("atan"),
        Atan2 => c("atan2"),
        Sinh => c("sinh"),
        Cosh => c("cosh"),
        Tanh => c("tanh"),
        Floor => c("floor"),
        Ceil => c("ceil"),
        Round => c("round"),
        Trunc => c("trunc"),
        Copysign => c("copysign"),
        MulAdd => c("fma"),
        Hypot => c("hypot"),
        Signum => format!("(isnan({0}) ? {0} : copysign{s}({one}, {0}))", a[0]),
        Recip => format!("({one} / {})", a[0]),
    }
}
