//! The IR as data: a small, versioned text form that `#[stencil]` embeds in the functor as a
//! constant and the runtime decodes (once per process) without `syn` or any lowering.
//!
//! The form is an S-expression per item, whitespace-separated tokens:
//!
//! ```text
//! stencil-ir 1
//! (name diffusion3d) (dim 3) (index idx)
//! (param ce scalar f32) (param f field f32 read) (param f_new field f32 write)
//! (param cfl reduce max f64)
//! (local t f32)
//! (pointfn flux (out 1) (let 1 (f32 load 7 1 0 0)))
//! (sweep forward (let 0 (f32 float 0000000000000000 00000000)))
//! (store 8 (f32 bin add (f32 scalar 6) (f32 load 7 1 0 0)))
//! (fold 9 (f64 cast (f32 local 0)))
//! (store 8 (f32 pv 0 0 -1 0 0))
//! ```
//!
//! Floating-point literals are stored as the bit patterns of their `f64` and `f32` values, so a
//! round trip is exact. [`IR_FORMAT`] changes whenever the form does; a reader refuses another
//! version, and the macro's compile-time check (see `stencil-runtime`) turns a mismatch between
//! the macro and runtime crates into a compile error.

use super::{
    BinOp, Expr, ExprKind, FieldParam, Literal, Local, MathFn, Param, ParamKind, PointFn, ReduceOp, ReduceParam,
    ScalarType, StencilIr, Stmt, Sweep, SweepOrder, UnOp,
};
use std::fmt::{self, Write};

/// Version of the serialised form, written in its first line.
pub const IR_FORMAT: u32 = 4;

/// Why a serialised IR could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Token index where reading stopped.
    pub at: usize,
    /// What was expected or wrong.
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "serialised stencil IR, token {}: {}", self.at, self.message)
    }
}

impl std::error::Error for DecodeError {}

const BIN_OPS: [(BinOp, &str); 18] = {
    use BinOp::*;
    [
        (Add, "add"),
        (Sub, "sub"),
        (Mul, "mul"),
        (Div, "div"),
        (Rem, "rem"),
        (And, "and"),
        (Or, "or"),
        (BitAnd, "bitand"),
        (BitOr, "bitor"),
        (BitXor, "bitxor"),
        (Shl, "shl"),
        (Shr, "shr"),
        (Eq, "eq"),
        (Ne, "ne"),
        (Lt, "lt"),
        (Le, "le"),
        (Gt, "gt"),
        (Ge, "ge"),
    ]
};

const UN_OPS: [(UnOp, &str); 2] = [(UnOp::Neg, "neg"), (UnOp::Not, "not")];

fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], v: T) -> &'static str {
    table.iter().find(|(t, _)| *t == v).map(|(_, n)| *n).expect("every operator is in its table")
}

impl StencilIr {
    /// The serialised form of this IR, point functions included (see the module docs);
    /// [`StencilIr::decode`] reads it back.
    pub fn encode(&self) -> String {
        let mut out =
            format!("stencil-ir {IR_FORMAT}\n(name {}) (dim {}) (index {})\n", self.name, self.dim, self.index_name);
        for p in &self.params {
            match p.kind {
                ParamKind::Scalar(t) => writeln!(out, "(param {} scalar {t})", p.name),
                ParamKind::Held(t) => writeln!(out, "(param {} held {t})", p.name),
                ParamKind::Field(f) => {
                    writeln!(out, "(param {} field {} {})", p.name, f.elem, if f.writable { "write" } else { "read" })
                }
                ParamKind::Reduction(r) => writeln!(out, "(param {} reduce {} {})", p.name, r.op.word(), r.elem),
            }
            .expect("writing to a String");
        }
        for l in &self.locals {
            writeln!(out, "(local {} {})", l.name, l.ty).expect("writing to a String");
        }
        for f in &self.point_fns {
            write!(out, "(pointfn {} (out", f.name).expect("writing to a String");
            for o in &f.outputs {
                write!(out, " {o}").expect("writing to a String");
            }
            out.push(')');
            for s in &f.body {
                out.push(' ');
                encode_stmt(s, &mut out);
            }
            out.push_str(")\n");
        }
        if let Some(sweep) = &self.sweep {
            write!(out, "(sweep {}", sweep.order.word()).expect("writing to a String");
            for s in &sweep.carried {
                out.push(' ');
                encode_stmt(s, &mut out);
            }
            out.push_str(")\n");
        }
        for s in &self.body {
            encode_stmt(s, &mut out);
            out.push('\n');
        }
        out
    }

    /// Reads a serialised IR written by [`StencilIr::encode`] of the same [`IR_FORMAT`].
    pub fn decode(text: &str) -> Result<StencilIr, DecodeError> {
        let mut r = Reader::new(text);
        r.word("stencil-ir")?;
        let version = r.number::<u32>()?;
        if version != IR_FORMAT {
            return Err(r.error(format!(
                "format {version}, but this reader reads format {IR_FORMAT}: build the stencils with the \
                 stencil-macros release that matches stencil-runtime"
            )));
        }
        let name = r.keyed("name", |r| r.ident())?;
        let dim = r.keyed("dim", |r| r.number::<usize>())?;
        if !(1..=3).contains(&dim) {
            return Err(r.error(format!("dimension {dim} is not 1, 2 or 3")));
        }
        let index_name = r.keyed("index", |r| r.ident())?;
        let mut ir = StencilIr {
            name,
            dim,
            index_name,
            params: Vec::new(),
            locals: Vec::new(),
            body: Vec::new(),
            sweep: None,
            point_fns: Vec::new(),
        };
        while r.peek_item("param") {
            let p = r.keyed("param", |r| {
                let name = r.ident()?;
                let kind = match r.ident()?.as_str() {
                    "scalar" => ParamKind::Scalar(r.scalar_type()?),
                    "held" => ParamKind::Held(r.scalar_type()?),
                    "field" => {
                        let elem = r.scalar_type()?;
                        let writable = match r.ident()?.as_str() {
                            "read" => false,
                            "write" => true,
                            other => return Err(r.error(format!("`{other}` is not `read` or `write`"))),
                        };
                        ParamKind::Field(FieldParam { elem, writable })
                    }
                    "reduce" => {
                        let word = r.ident()?;
                        let op = ReduceOp::ALL
                            .into_iter()
                            .find(|op| op.word() == word)
                            .ok_or_else(|| r.error(format!("`{word}` is not `sum`, `min` or `max`")))?;
                        ParamKind::Reduction(ReduceParam { op, elem: r.scalar_type()? })
                    }
                    other => return Err(r.error(format!("`{other}` is not `scalar`, `held`, `field` or `reduce`"))),
                };
                Ok(Param { name, kind })
            })?;
            ir.params.push(p);
        }
        while r.peek_item("local") {
            let l = r.keyed("local", |r| Ok(Local { name: r.ident()?, ty: r.scalar_type()? }))?;
            ir.locals.push(l);
        }
        while r.peek_item("pointfn") {
            let f = r.keyed("pointfn", |r| {
                let name = r.ident()?;
                let outputs = r.keyed("out", |r| {
                    let mut outputs = Vec::new();
                    while r.tokens.get(r.pos) != Some(&")") {
                        outputs.push(r.index(ir.locals.len(), "local")?);
                    }
                    Ok(outputs)
                })?;
                let mut body = Vec::new();
                while r.tokens.get(r.pos) != Some(&")") {
                    body.push(r.stmt(&ir)?);
                }
                Ok(PointFn { name, body, outputs })
            })?;
            ir.point_fns.push(f);
        }
        if r.peek_item("sweep") {
            let sweep = r.keyed("sweep", |r| {
                let word = r.ident()?;
                let order = SweepOrder::from_word(&word)
                    .ok_or_else(|| r.error(format!("`{word}` is not `forward` or `backward`")))?;
                let mut carried = Vec::new();
                while r.tokens.get(r.pos) != Some(&")") {
                    carried.push(r.stmt(&ir)?);
                }
                Ok(Sweep { order, carried })
            })?;
            ir.sweep = Some(sweep);
        }
        while !r.at_end() {
            let s = r.stmt(&ir)?;
            ir.body.push(s);
        }
        Ok(ir)
    }
}

fn encode_stmt(s: &Stmt, out: &mut String) {
    match s {
        Stmt::Let { local, init } => {
            write!(out, "(let {local}").expect("writing to a String");
            if let Some(e) = init {
                out.push(' ');
                encode_expr(e, out);
            }
            out.push(')');
        }
        Stmt::Assign { local, value } => {
            write!(out, "(set {local} ").expect("writing to a String");
            encode_expr(value, out);
            out.push(')');
        }
        Stmt::Store { field, value } => {
            write!(out, "(store {field} ").expect("writing to a String");
            encode_expr(value, out);
            out.push(')');
        }
        Stmt::Fold { reduction, value } => {
            write!(out, "(fold {reduction} ").expect("writing to a String");
            encode_expr(value, out);
            out.push(')');
        }
        Stmt::If { cond, then_body, else_body } => {
            out.push_str("(if ");
            encode_expr(cond, out);
            for (word, body) in [("then", then_body), ("else", else_body)] {
                write!(out, " ({word}").expect("writing to a String");
                for s in body {
                    out.push(' ');
                    encode_stmt(s, out);
                }
                out.push(')');
            }
            out.push(')');
        }
    }
}

fn encode_expr(e: &Expr, out: &mut String) {
    write!(out, "({} ", e.ty).expect("writing to a String");
    let sub = |e: &Expr, out: &mut String| {
        out.push(' ');
        encode_expr(e, out);
    };
    match &e.kind {
        ExprKind::Lit(Literal::Float(d, s)) => {
            write!(out, "float {:016x} {:08x}", d.to_bits(), s.to_bits()).expect("writing to a String")
        }
        ExprKind::Lit(Literal::Int(i)) => write!(out, "int {i}").expect("writing to a String"),
        ExprKind::Lit(Literal::Bool(b)) => write!(out, "bool {b}").expect("writing to a String"),
        ExprKind::Local(l) => write!(out, "local {l}").expect("writing to a String"),
        ExprKind::Scalar(p) => write!(out, "scalar {p}").expect("writing to a String"),
        ExprKind::Load { field, offset: [i, j, k] } => {
            write!(out, "load {field} {i} {j} {k}").expect("writing to a String")
        }
        ExprKind::Unary(op, a) => {
            out.push_str(name_of(&UN_OPS, *op));
            sub(a, out);
        }
        ExprKind::Binary(op, a, b) => {
            write!(out, "bin {}", name_of(&BIN_OPS, *op)).expect("writing to a String");
            sub(a, out);
            sub(b, out);
        }
        ExprKind::Cast(a) => {
            out.push_str("cast");
            sub(a, out);
        }
        ExprKind::Call(f, args) => {
            write!(out, "call {}", f.rust_name()).expect("writing to a String");
            args.iter().for_each(|a| sub(a, out));
        }
        ExprKind::Select(c, a, b) => {
            out.push_str("select");
            sub(c, out);
            sub(a, out);
            sub(b, out);
        }
        ExprKind::Level => out.push_str("level"),
        ExprKind::Levels => out.push_str("levels"),
        ExprKind::PointValue { func, output, offset: [i, j, k] } => {
            write!(out, "pv {func} {output} {i} {j} {k}").expect("writing to a String")
        }
    }
    out.push(')');
}

/// A token reader over the serialised form.
struct Reader<'a> {
    tokens: Vec<&'a str>,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        let mut tokens = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            let delimiter = c == '(' || c == ')';
            if c.is_whitespace() || delimiter {
                if let Some(s) = start.take() {
                    tokens.push(&text[s..i]);
                }
                if delimiter {
                    tokens.push(&text[i..i + 1]);
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        if let Some(s) = start {
            tokens.push(&text[s..]);
        }
        Reader { tokens, pos: 0 }
    }

    fn error(&self, message: impl Into<String>) -> DecodeError {
        DecodeError { at: self.pos, message: message.into() }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.tokens.len()
    }

    fn next(&mut self) -> Result<&'a str, DecodeError> {
        let t = self.tokens.get(self.pos).copied().ok_or_else(|| self.error("unexpected end"))?;
        self.pos += 1;
        Ok(t)
    }

    fn word(&mut self, w: &str) -> Result<(), DecodeError> {
        let t = self.next()?;
        if t == w {
            Ok(())
        } else {
            self.pos -= 1;
            Err(self.error(format!("expected `{w}`, found `{t}`")))
        }
    }

    fn ident(&mut self) -> Result<String, DecodeError> {
        let t = self.next()?;
        if t == "(" || t == ")" {
            self.pos -= 1;
            return Err(self.error(format!("expected a name, found `{t}`")));
        }
        Ok(t.to_string())
    }

    fn number<N: std::str::FromStr>(&mut self) -> Result<N, DecodeError> {
        let t = self.next()?;
        t.parse().map_err(|_| self.error(format!("`{t}` is not a number of the expected kind")))
    }

    fn scalar_type(&mut self) -> Result<ScalarType, DecodeError> {
        let t = self.next()?;
        ScalarType::from_name(t).ok_or_else(|| self.error(format!("`{t}` is not a scalar type")))
    }

    /// Whether the next item is `(word ...`.
    fn peek_item(&self, word: &str) -> bool {
        self.tokens.get(self.pos) == Some(&"(") && self.tokens.get(self.pos + 1) == Some(&word)
    }

    /// Reads `(word <body>)`.
    fn keyed<T>(
        &mut self,
        word: &str,
        body: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        self.word("(")?;
        self.word(word)?;
        let v = body(self)?;
        self.word(")")?;
        Ok(v)
    }

    fn index(&mut self, len: usize, what: &str) -> Result<usize, DecodeError> {
        let i = self.number::<usize>()?;
        if i < len {
            Ok(i)
        } else {
            Err(self.error(format!("{what} {i} does not exist ({len} declared)")))
        }
    }

    fn stmt(&mut self, ir: &StencilIr) -> Result<Stmt, DecodeError> {
        self.word("(")?;
        let s = match self.next()? {
            "let" => {
                let local = self.index(ir.locals.len(), "local")?;
                let init = if self.tokens.get(self.pos) == Some(&"(") { Some(self.expr(ir)?) } else { None };
                Stmt::Let { local, init }
            }
            "set" => Stmt::Assign { local: self.index(ir.locals.len(), "local")?, value: self.expr(ir)? },
            "store" => Stmt::Store { field: self.index(ir.params.len(), "parameter")?, value: self.expr(ir)? },
            "fold" => Stmt::Fold { reduction: self.index(ir.params.len(), "parameter")?, value: self.expr(ir)? },
            "if" => {
                let cond = self.expr(ir)?;
                let mut bodies = [Vec::new(), Vec::new()];
                for (word, body) in ["then", "else"].into_iter().zip(&mut bodies) {
                    self.word("(")?;
                    self.word(word)?;
                    while self.tokens.get(self.pos) != Some(&")") {
                        body.push(self.stmt(ir)?);
                    }
                    self.word(")")?;
                }
                let [then_body, else_body] = bodies;
                Stmt::If { cond, then_body, else_body }
            }
            other => return Err(self.error(format!("`{other}` is not a statement"))),
        };
        self.word(")")?;
        Ok(s)
    }

    fn expr(&mut self, ir: &StencilIr) -> Result<Expr, DecodeError> {
        self.word("(")?;
        let ty = self.scalar_type()?;
        let boxed = |r: &mut Self| r.expr(ir).map(Box::new);
        let kind = match self.next()? {
            "float" => {
                let d = u64::from_str_radix(self.next()?, 16).map_err(|_| self.error("bad f64 bits"))?;
                let s = u32::from_str_radix(self.next()?, 16).map_err(|_| self.error("bad f32 bits"))?;
                ExprKind::Lit(Literal::Float(f64::from_bits(d), f32::from_bits(s)))
            }
            "int" => ExprKind::Lit(Literal::Int(self.number()?)),
            "bool" => ExprKind::Lit(Literal::Bool(self.number()?)),
            "local" => ExprKind::Local(self.index(ir.locals.len(), "local")?),
            "scalar" => ExprKind::Scalar(self.index(ir.params.len(), "parameter")?),
            "load" => {
                let field = self.index(ir.params.len(), "parameter")?;
                ExprKind::Load { field, offset: [self.number()?, self.number()?, self.number()?] }
            }
            "cast" => ExprKind::Cast(boxed(self)?),
            "bin" => {
                let t = self.next()?;
                let op = BIN_OPS
                    .iter()
                    .find(|(_, n)| *n == t)
                    .map(|(op, _)| *op)
                    .ok_or_else(|| self.error(format!("`{t}` is not a binary operator")))?;
                ExprKind::Binary(op, boxed(self)?, boxed(self)?)
            }
            "call" => {
                let t = self.next()?;
                let f = MathFn::from_rust_name(t).ok_or_else(|| self.error(format!("`{t}` is not a math function")))?;
                let args = (0..f.arity()).map(|_| self.expr(ir)).collect::<Result<_, _>>()?;
                ExprKind::Call(f, args)
            }
            "select" => ExprKind::Select(boxed(self)?, boxed(self)?, boxed(self)?),
            "level" => ExprKind::Level,
            "levels" => ExprKind::Levels,
            "pv" => {
                // Only the functions declared before: a function calls the earlier ones.
                let func = self.index(ir.point_fns.len(), "point function")?;
                let output = self.index(ir.point_fns[func].outputs.len(), "point function output")?;
                ExprKind::PointValue { func, output, offset: [self.number()?, self.number()?, self.number()?] }
            }
            t => match UN_OPS.iter().find(|(_, n)| *n == t) {
                Some((op, _)) => ExprKind::Unary(*op, boxed(self)?),
                None => return Err(self.error(format!("`{t}` is not an expression"))),
            },
        };
        self.word(")")?;
        Ok(Expr { ty, kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32e(kind: ExprKind) -> Expr {
        Expr { ty: ScalarType::F32, kind }
    }

    fn sample() -> StencilIr {
        let load = |o: [i32; 3]| f32e(ExprKind::Load { field: 1, offset: o });
        let third = ExprKind::Lit(Literal::Float(1.0 / 3.0, 1.0 / 3.0f32));
        let cond = Expr {
            ty: ScalarType::Bool,
            kind: ExprKind::Binary(BinOp::Gt, Box::new(load([-1, 0, 2])), Box::new(f32e(third.clone()))),
        };
        let sum = f32e(ExprKind::Binary(BinOp::Add, Box::new(f32e(ExprKind::Scalar(0))), Box::new(load([0, 0, 0]))));
        StencilIr {
            name: "sample".into(),
            dim: 3,
            index_name: "idx".into(),
            params: vec![
                Param { name: "c".into(), kind: ParamKind::Scalar(ScalarType::F32) },
                Param {
                    name: "u".into(),
                    kind: ParamKind::Field(FieldParam { elem: ScalarType::F32, writable: false }),
                },
                Param {
                    name: "v".into(),
                    kind: ParamKind::Field(FieldParam { elem: ScalarType::F32, writable: true }),
                },
                Param {
                    name: "m".into(),
                    kind: ParamKind::Reduction(ReduceParam { op: ReduceOp::Max, elem: ScalarType::F32 }),
                },
            ],
            locals: vec![Local { name: "t".into(), ty: ScalarType::F32 }],
            body: vec![
                Stmt::Let { local: 0, init: None },
                Stmt::If {
                    cond,
                    then_body: vec![Stmt::Assign {
                        local: 0,
                        value: f32e(ExprKind::Call(
                            MathFn::Sqrt,
                            vec![f32e(ExprKind::Unary(UnOp::Neg, Box::new(sum)))],
                        )),
                    }],
                    else_body: vec![Stmt::Assign { local: 0, value: f32e(third) }],
                },
                Stmt::Store { field: 2, value: f32e(ExprKind::Local(0)) },
                Stmt::Fold { reduction: 3, value: f32e(ExprKind::Local(0)) },
            ],
            sweep: None,
            point_fns: Vec::new(),
        }
    }

    #[test]
    fn round_trips_exactly() {
        let ir = sample();
        let text = ir.encode();
        assert!(text.starts_with(&format!("stencil-ir {IR_FORMAT}\n")), "{text}");
        assert_eq!(StencilIr::decode(&text), Ok(ir));
    }

    #[test]
    fn a_sweep_round_trips() {
        let mut ir = sample();
        ir.params.pop();
        ir.body.pop();
        let level = Expr { ty: ScalarType::I32, kind: ExprKind::Level };
        let first = Expr {
            ty: ScalarType::Bool,
            kind: ExprKind::Binary(
                BinOp::Eq,
                Box::new(level),
                Box::new(Expr { ty: ScalarType::I32, kind: ExprKind::Levels }),
            ),
        };
        ir.locals.push(Local { name: "q".into(), ty: ScalarType::F32 });
        ir.body.push(Stmt::If { cond: first, then_body: Vec::new(), else_body: Vec::new() });
        let zero = f32e(ExprKind::Lit(Literal::Float(0.0, 0.0)));
        ir.sweep = Some(Sweep { order: SweepOrder::Backward, carried: vec![Stmt::Let { local: 1, init: Some(zero) }] });
        let text = ir.encode();
        assert!(text.contains("(sweep backward (let 1"), "{text}");
        assert_eq!(StencilIr::decode(&text), Ok(ir));
    }

    #[test]
    fn point_functions_round_trip() {
        let mut ir = sample();
        ir.locals.push(Local { name: "flux".into(), ty: ScalarType::F32 });
        let load = f32e(ExprKind::Load { field: 1, offset: [1, 0, 0] });
        ir.point_fns.push(PointFn {
            name: "fx".into(),
            body: vec![Stmt::Let { local: 1, init: Some(load) }],
            outputs: vec![1],
        });
        let value = f32e(ExprKind::PointValue { func: 0, output: 0, offset: [-1, 0, 2] });
        ir.body.push(Stmt::Store { field: 2, value });
        let text = ir.encode();
        assert!(text.contains("(pointfn fx (out 1) (let 1") && text.contains("pv 0 0 -1 0 2"), "{text}");
        assert_eq!(StencilIr::decode(&text), Ok(ir));
        // A value of a function not declared (yet), or an output it lacks, is refused.
        assert!(StencilIr::decode(&text.replace("pv 0 0", "pv 1 0")).unwrap_err().message.contains("point function"));
        assert!(StencilIr::decode(&text.replace("pv 0 0", "pv 0 1")).unwrap_err().message.contains("output"));
    }

    #[test]
    fn refuses_other_versions_and_damage() {
        let text = sample().encode();
        let other = text.replacen(&format!("stencil-ir {IR_FORMAT}"), "stencil-ir 999", 1);
        let e = StencilIr::decode(&other).unwrap_err();
        assert!(e.message.contains("format 999") && e.message.contains("stencil-macros"), "{e}");
        for cut in [10, text.len() / 2, text.len() - 2] {
            assert!(StencilIr::decode(&text[..cut]).is_err(), "truncated at {cut} accepted");
        }
        assert!(StencilIr::decode(&text.replace("load 1", "load 9")).unwrap_err().message.contains("does not exist"));
        assert!(StencilIr::decode(&text.replace("sqrt", "frobnicate")).is_err());
    }
}
