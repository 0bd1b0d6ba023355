//! Random valid stencils for the differential fuzz tests: offsets up to 2 on every axis, several
//! input fields (`f64`, and `f32` read through `as f64`), scalars, locals, `if`/`else` both as a
//! statement and as a value, math calls, and point functions (`let pf0 = |p: Idx3| ...;`, read
//! within one point of `p` and called within one point of `idx`; a later one may call an earlier
//! one at `p`, so every read stays within the halo of 2). Each [`Generated`] stencil prints its Rust source
//! ([`Generated::source`]) and evaluates itself directly ([`Generated::eval`]), independently of
//! the macro's lowering, IR and printers.
//!
//! The file stands alone (no imports from the crate): the build script of `stencil-tests`
//! includes it to write the stencils that the fuzz test compiles through `#[stencil]`.

#![allow(dead_code, clippy::large_enum_variant)]

/// SplitMix64, self-contained so that the build script can use it.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }
}

/// Comparison operators of conditions.
pub const COMPARISONS: [&str; 4] = ["<", "<=", ">", ">="];

/// Math calls the generator uses, as method names with their arity (the receiver counted).
pub const CALLS: [(&str, usize); 13] = [
    ("abs", 1),
    ("sqrt_abs", 1),
    ("sin", 1),
    ("cos", 1),
    ("tanh", 1),
    ("floor", 1),
    ("exp", 1),
    ("min", 2),
    ("max", 2),
    ("hypot", 2),
    ("atan2", 2),
    ("powi", 1),
    ("mul_add", 3),
];

/// An expression of a generated stencil; every value is `f64`.
#[derive(Clone, Debug)]
pub enum GExpr {
    /// A constant `k / 8`: exact in `f32` and `f64`.
    Lit(f64),
    /// Input field `field` at a constant offset.
    Load { field: usize, offset: [i32; 3] },
    /// Scalar parameter `s{n}`.
    Scalar(usize),
    /// Local `t{n}`.
    Local(usize),
    /// `-x`
    Neg(Box<GExpr>),
    /// `a op b` for `+ - * /`.
    Bin(char, Box<GExpr>, Box<GExpr>),
    /// A math call from [`CALLS`] (`powi` takes a literal exponent, kept in `exponent`).
    Call { name: &'static str, args: Vec<GExpr>, exponent: i32 },
    /// `if a cmp b { x } else { y }`.
    Select { cmp: &'static str, a: Box<GExpr>, b: Box<GExpr>, then: Box<GExpr>, other: Box<GExpr> },
    /// A column sweep's carried local `c{n}`.
    Carried(usize),
    /// A column sweep's level, `(idx.level() as f64)`.
    Level,
    /// A column sweep's output `o{out}` at a level `distance` levels before this one.
    Passed { out: usize, distance: i32 },
    /// Point function `pf{f}` at a constant offset from the point (`idx`, or `p` inside a point
    /// function).
    PointCall { f: usize, offset: [i32; 3] },
}

/// A statement of a generated stencil.
#[derive(Clone, Debug)]
pub enum GStmt {
    /// `let t{local} = value;`
    Let { local: usize, value: GExpr },
    /// `let mut t{local} = init; if a cmp b { t = then; } else { t = other; }`
    Branch { local: usize, init: GExpr, cmp: &'static str, a: GExpr, b: GExpr, then: GExpr, other: GExpr },
    /// `o{out}[idx] = value;`
    Store { out: usize, value: GExpr },
    /// `r{reduction}.fold(value);`
    Fold { reduction: usize, value: GExpr },
    /// `c{carried} = value;` in a column sweep.
    Carry { carried: usize, value: GExpr },
}

/// A generated stencil: `fn name(idx: Idx3, s0: f64, .., a0: &Field3<f64 or f32>, .., o0: &mut
/// Field3<f64>, ..)`.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The function's name (`fuzz_{seed}`).
    pub name: String,
    /// Per input field: whether it holds `f32` (read as `a[..] as f64`).
    pub inputs_f32: Vec<bool>,
    /// The number of `f64` scalar parameters.
    pub scalars: usize,
    /// The number of written `f64` fields.
    pub outputs: usize,
    /// Per reduction parameter (`&mut Max<f64>` or `&mut Min<f64>`): its type's name.
    pub reductions: Vec<&'static str>,
    /// The body.
    pub body: Vec<GStmt>,
    /// A column sweep's order (`forward` or `backward`), `None` for a point stencil.
    pub sweep: Option<&'static str>,
    /// A column sweep's carried locals' initial values (literals and scalars).
    pub carried: Vec<GExpr>,
    /// The point functions' bodies (`pf{n}`), before the body; reads relative to `p`.
    pub point_fns: Vec<GExpr>,
    /// Compiled with `#[stencil(fma)]` (every third stencil and sweep): its products fused.
    pub fma: bool,
}

struct Builder<'a> {
    rng: &'a mut Rng,
    inputs: usize,
    scalars: usize,
    locals: usize,
    /// In a column sweep: carried locals, and outputs readable at passed levels.
    carried: usize,
    outputs: usize,
    sweep: bool,
    /// Point functions callable here (`pf0 ..`).
    point_fns: usize,
    /// Inside a point function: reads within one point, calls of earlier ones at `p` only.
    in_point_fn: bool,
}

impl<'a> Builder<'a> {
    /// A builder of a point stencil's expressions: no locals, carried values or point functions
    /// yet.
    fn new(rng: &'a mut Rng, inputs: usize, scalars: usize, outputs: usize) -> Self {
        Builder { rng, inputs, scalars, locals: 0, carried: 0, outputs, sweep: false, point_fns: 0, in_point_fn: false }
    }

    fn expr(&mut self, depth: u32) -> GExpr {
        let leaf = depth == 0 || self.rng.below(4) == 0;
        if leaf && self.sweep && self.rng.below(3) == 0 {
            return match self.rng.below(3) {
                0 if self.carried > 0 => GExpr::Carried(self.rng.below(self.carried)),
                1 => GExpr::Level,
                _ => GExpr::Passed { out: self.rng.below(self.outputs), distance: 1 + self.rng.below(2) as i32 },
            };
        }
        if leaf && self.point_fns > 0 && self.rng.below(3) == 0 {
            let offset = if self.in_point_fn { [0; 3] } else { [0; 3].map(|_| self.rng.between(-1, 1) as i32) };
            return GExpr::PointCall { f: self.rng.below(self.point_fns), offset };
        }
        if leaf {
            let reach = if self.in_point_fn { 1 } else { 2 };
            return match self.rng.below(6) {
                0 => GExpr::Lit(self.rng.between(-24, 24) as f64 / 8.0),
                1 if self.scalars > 0 => GExpr::Scalar(self.rng.below(self.scalars)),
                2 if self.locals > 0 => GExpr::Local(self.rng.below(self.locals)),
                _ => GExpr::Load {
                    field: self.rng.below(self.inputs),
                    offset: [0; 3].map(|_| self.rng.between(-reach, reach) as i32),
                },
            };
        }
        let sub = |b: &mut Self| Box::new(b.expr(depth - 1));
        match self.rng.below(10) {
            0 => GExpr::Neg(sub(self)),
            1..=4 => {
                let op = ['+', '-', '*', '/'][self.rng.below(4)];
                GExpr::Bin(op, sub(self), sub(self))
            }
            5..=7 => {
                let (name, arity) = CALLS[self.rng.below(CALLS.len())];
                let args = (0..arity).map(|_| *sub(self)).collect();
                GExpr::Call { name, args, exponent: self.rng.between(-2, 3) as i32 }
            }
            _ => {
                let cmp = COMPARISONS[self.rng.below(COMPARISONS.len())];
                GExpr::Select { cmp, a: sub(self), b: sub(self), then: sub(self), other: sub(self) }
            }
        }
    }
}

impl Generated {
    /// The stencil of `seed`: the same for every call.
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let inputs_f32: Vec<bool> = (0..1 + rng.below(3)).map(|_| rng.below(3) == 0).collect();
        let scalars = rng.below(3);
        let outputs = 1 + rng.below(2);
        let mut b = Builder::new(&mut rng, inputs_f32.len(), scalars, outputs);
        b.in_point_fn = true;
        let mut point_fns = Vec::new();
        for _ in 0..[0, 0, 1, 2][b.rng.below(4)] {
            point_fns.push(b.expr(3));
            b.point_fns += 1;
        }
        b.in_point_fn = false;
        let mut body = Vec::new();
        for _ in 0..b.rng.below(4) {
            let local = b.locals;
            let stmt = if b.rng.below(3) == 0 {
                let cmp = COMPARISONS[b.rng.below(COMPARISONS.len())];
                let (init, a, bb) = (b.expr(2), b.expr(2), b.expr(2));
                let (then, other) = (b.expr(3), b.expr(3));
                GStmt::Branch { local, init, cmp, a, b: bb, then, other }
            } else {
                GStmt::Let { local, value: b.expr(3) }
            };
            body.push(stmt);
            b.locals += 1;
        }
        for out in 0..outputs {
            body.push(GStmt::Store { out, value: b.expr(4) });
        }
        let reductions: Vec<&'static str> = (0..b.rng.below(3) / 2).map(|_| ["Max", "Min"][b.rng.below(2)]).collect();
        for reduction in 0..reductions.len() {
            body.push(GStmt::Fold { reduction, value: b.expr(3) });
        }
        Generated {
            name: format!("fuzz_{seed}"),
            inputs_f32,
            scalars,
            outputs,
            reductions,
            body,
            sweep: None,
            carried: Vec::new(),
            point_fns,
            fma: seed % 3 == 2,
        }
    }

    /// The column sweep of `seed` (`sweep_fuzz_{seed}`): carried locals set from literals and
    /// scalars, reads of the outputs at the one or two levels before, the level, stores and
    /// carried updates in random order; forward or backward. No reduction (sweeps do not fold).
    pub fn sweep(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x5eeb);
        let inputs_f32: Vec<bool> = (0..1 + rng.below(2)).map(|_| rng.below(3) == 0).collect();
        let scalars = rng.below(2);
        let outputs = 1 + rng.below(2);
        let order = ["forward", "backward"][rng.below(2)];
        let carried_count = rng.below(3);
        let mut b = Builder::new(&mut rng, inputs_f32.len(), scalars, outputs);
        let carried: Vec<GExpr> = (0..carried_count)
            .map(|_| match b.rng.below(2) {
                0 if b.scalars > 0 => GExpr::Scalar(b.rng.below(b.scalars)),
                _ => GExpr::Lit(b.rng.between(-16, 16) as f64 / 8.0),
            })
            .collect();
        b.carried = carried.len();
        b.sweep = true;
        let mut body = Vec::new();
        for _ in 0..b.rng.below(3) {
            let local = b.locals;
            body.push(GStmt::Let { local, value: b.expr(3) });
            b.locals += 1;
        }
        let mut tail: Vec<GStmt> = (0..outputs).map(|out| GStmt::Store { out, value: b.expr(3) }).collect();
        tail.extend((0..b.carried).map(|carried| GStmt::Carry { carried, value: b.expr(3) }));
        for i in (1..tail.len()).rev() {
            tail.swap(i, b.rng.below(i + 1));
        }
        body.extend(tail);
        Generated {
            name: format!("sweep_fuzz_{seed}"),
            inputs_f32,
            scalars,
            outputs,
            reductions: Vec::new(),
            body,
            sweep: Some(order),
            carried,
            point_fns: Vec::new(),
            fma: seed % 3 == 1,
        }
    }

    /// The functor type `#[stencil]` makes of it (`Fuzz17`, `SweepFuzz3`).
    pub fn functor(&self) -> String {
        self.name.replacen("sweep_fuzz_", "SweepFuzz", 1).replacen("fuzz_", "Fuzz", 1)
    }

    /// The attribute to compile it with: `#[stencil]`, with `sweep = ..` and `fma` where they
    /// apply.
    pub fn attribute(&self) -> String {
        let sweep = self.sweep.map(|order| format!("sweep = {order}"));
        let args: Vec<String> = sweep.into_iter().chain(self.fma.then(|| "fma".to_string())).collect();
        if args.is_empty() {
            "#[stencil]".to_string()
        } else {
            format!("#[stencil({})]", args.join(", "))
        }
    }

    /// The parameters after the index, in order: `("s0", "f64")`, `("a1", "&Field3<f32>")`, ...
    pub fn params(&self) -> Vec<(String, String)> {
        let scalars = (0..self.scalars).map(|s| (format!("s{s}"), "f64".to_string()));
        let inputs = self
            .inputs_f32
            .iter()
            .enumerate()
            .map(|(i, &f32)| (format!("a{i}"), format!("&Field3<{}>", if f32 { "f32" } else { "f64" })));
        let outputs = (0..self.outputs).map(|o| (format!("o{o}"), "&mut Field3<f64>".to_string()));
        let reductions = self.reductions.iter().enumerate().map(|(r, ty)| (format!("r{r}"), format!("&mut {ty}<f64>")));
        scalars.chain(inputs).chain(outputs).chain(reductions).collect()
    }

    /// The Rust source of the stencil function (without the attribute).
    pub fn source(&self) -> String {
        let params: Vec<String> = self.params().iter().map(|(n, t)| format!("{n}: {t}")).collect();
        let mut s = format!("fn {}(idx: Idx3, {}) {{\n", self.name, params.join(", "));
        for (n, init) in self.carried.iter().enumerate() {
            s += &format!("    #[carry]\n    let mut c{n} = {};\n", self.print(init));
        }
        for (n, body) in self.point_fns.iter().enumerate() {
            s += &format!("    let pf{n} = |p: Idx3| {};\n", self.print_at(body, "p"));
        }
        for stmt in &self.body {
            match stmt {
                GStmt::Let { local, value } => s += &format!("    let t{local} = {};\n", self.print(value)),
                GStmt::Branch { local, init, cmp, a, b, then, other } => {
                    s += &format!("    let mut t{local} = {};\n", self.print(init));
                    s += &format!(
                        "    if {} {cmp} {} {{\n        t{local} = {};\n    }} else {{\n        t{local} = {};\n    }}\n",
                        self.print(a),
                        self.print(b),
                        self.print(then),
                        self.print(other)
                    );
                }
                GStmt::Store { out, value } => s += &format!("    o{out}[idx] = {};\n", self.print(value)),
                GStmt::Fold { reduction, value } => s += &format!("    r{reduction}.fold({});\n", self.print(value)),
                GStmt::Carry { carried, value } => s += &format!("    c{carried} = {};\n", self.print(value)),
            }
        }
        s + "}\n"
    }

    fn print(&self, e: &GExpr) -> String {
        self.print_at(e, "idx")
    }

    /// `e` with its reads and calls relative to the point `at` (`idx`, or `p` in a point function).
    fn print_at(&self, e: &GExpr, at: &str) -> String {
        let shifted = |[i, j, k]: [i32; 3]| {
            if [i, j, k] == [0; 3] {
                at.to_string()
            } else {
                format!("{at}.ix::<{i}, {j}, {k}>()")
            }
        };
        let print = |e: &GExpr| self.print_at(e, at);
        match e {
            GExpr::Lit(v) => format!("({v:?})"),
            GExpr::PointCall { f, offset } => format!("pf{f}({})", shifted(*offset)),
            GExpr::Load { field, offset } => {
                let at = shifted(*offset);
                if self.inputs_f32[*field] {
                    format!("(a{field}[{at}] as f64)")
                } else {
                    format!("a{field}[{at}]")
                }
            }
            GExpr::Scalar(s) => format!("s{s}"),
            GExpr::Local(l) => format!("t{l}"),
            GExpr::Neg(a) => format!("(-{})", print(a)),
            GExpr::Bin(op, a, b) => format!("({} {op} {})", print(a), print(b)),
            GExpr::Call { name, args, exponent } => {
                let recv = print(&args[0]);
                let rest: Vec<String> = args[1..].iter().map(&print).collect();
                match *name {
                    "sqrt_abs" => format!("{recv}.abs().sqrt()"),
                    "powi" => format!("{recv}.powi({exponent})"),
                    _ => format!("{recv}.{name}({})", rest.join(", ")),
                }
            }
            GExpr::Select { cmp, a, b, then, other } => {
                format!("(if {} {cmp} {} {{ {} }} else {{ {} }})", print(a), print(b), print(then), print(other))
            }
            GExpr::Carried(n) => format!("c{n}"),
            GExpr::Level => "(idx.level() as f64)".to_string(),
            GExpr::Passed { out, distance } => {
                let k = if self.sweep == Some("backward") { *distance } else { -distance };
                format!("o{out}[idx.ix(0, 0, {k})]")
            }
        }
    }

    /// The values the stencil stores, per output, then the values it folds, per reduction, at a
    /// point whose input `f` at `offset` is `load(f, offset)` (an `f32` field's value already
    /// widened), with scalars `scalars`: plain Rust evaluation of the generated tree.
    pub fn eval(&self, load: &dyn Fn(usize, [i32; 3]) -> f64, scalars: &[f64]) -> Vec<f64> {
        let pfs = &self.point_fns[..];
        let mut locals = Vec::new();
        let mut out = vec![f64::NAN; self.outputs + self.reductions.len()];
        for stmt in &self.body {
            match stmt {
                GStmt::Let { value, .. } => {
                    let v = eval(value, load, scalars, &locals, pfs);
                    locals.push(v);
                }
                GStmt::Branch { init, cmp, a, b, then, other, .. } => {
                    let _ = eval(init, load, scalars, &locals, pfs);
                    let taken =
                        compare(cmp, eval(a, load, scalars, &locals, pfs), eval(b, load, scalars, &locals, pfs));
                    let v = if taken {
                        eval(then, load, scalars, &locals, pfs)
                    } else {
                        eval(other, load, scalars, &locals, pfs)
                    };
                    locals.push(v);
                }
                GStmt::Store { out: o, value } => out[*o] = eval(value, load, scalars, &locals, pfs),
                GStmt::Fold { reduction, value } => {
                    out[self.outputs + reduction] = eval(value, load, scalars, &locals, pfs)
                }
                GStmt::Carry { .. } => panic!("column sweeps are checked against the IR interpreter"),
            }
        }
        out
    }
}

fn compare(cmp: &str, a: f64, b: f64) -> bool {
    match cmp {
        "<" => a < b,
        "<=" => a <= b,
        ">" => a > b,
        _ => a >= b,
    }
}

fn eval(e: &GExpr, load: &dyn Fn(usize, [i32; 3]) -> f64, scalars: &[f64], locals: &[f64], pfs: &[GExpr]) -> f64 {
    let ev = |e: &GExpr| eval(e, load, scalars, locals, pfs);
    match e {
        GExpr::PointCall { f, offset } => {
            let shifted = |field: usize, o: [i32; 3]| load(field, std::array::from_fn(|a| o[a] + offset[a]));
            eval(&pfs[*f], &shifted, scalars, &[], pfs)
        }
        GExpr::Lit(v) => *v,
        GExpr::Load { field, offset } => load(*field, *offset),
        GExpr::Scalar(s) => scalars[*s],
        GExpr::Local(l) => locals[*l],
        GExpr::Neg(a) => -ev(a),
        GExpr::Bin(op, a, b) => {
            let (a, b) = (ev(a), ev(b));
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                _ => a / b,
            }
        }
        GExpr::Call { name, args, exponent } => {
            let v: Vec<f64> = args.iter().map(ev).collect();
            match *name {
                "abs" => v[0].abs(),
                "sqrt_abs" => v[0].abs().sqrt(),
                "sin" => v[0].sin(),
                "cos" => v[0].cos(),
                "tanh" => v[0].tanh(),
                "floor" => v[0].floor(),
                "exp" => v[0].exp(),
                "min" => v[0].min(v[1]),
                "max" => v[0].max(v[1]),
                "hypot" => v[0].hypot(v[1]),
                "atan2" => v[0].atan2(v[1]),
                "powi" => v[0].powi(*exponent),
                _ => v[0].mul_add(v[1], v[2]),
            }
        }
        GExpr::Select { cmp, a, b, then, other } => {
            if compare(cmp, ev(a), ev(b)) {
                ev(then)
            } else {
                ev(other)
            }
        }
        GExpr::Carried(_) | GExpr::Level | GExpr::Passed { .. } => {
            panic!("column sweeps are checked against the IR interpreter")
        }
    }
}
