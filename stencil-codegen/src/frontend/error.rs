//! Every way a `#[stencil]` function can be rejected, each with a sentence saying what to write
//! instead. The macro turns these into `compile_error!` at the offending span.

use crate::limits::{MAX_ARRAY_LEN, MAX_OUTPUTS, MAX_UNROLL};
use proc_macro2::Span;
use std::fmt;

/// A rejected stencil: where and why.
#[derive(Clone, Debug)]
pub struct Error {
    /// The first offending token.
    pub span: Span,
    /// The last offending token (the same as `span` for one token).
    pub end: Span,
    /// What is wrong.
    pub kind: ErrorKind,
}

impl Error {
    /// An error at one token.
    pub fn new(span: Span, kind: ErrorKind) -> Self {
        Error { span, end: span, kind }
    }

    /// An error underlining all of `tokens` (first to last token, also on stable Rust, where
    /// a joined span is not available).
    pub fn spanned(tokens: &impl quote::ToTokens, kind: ErrorKind) -> Self {
        let mut iter = tokens.to_token_stream().into_iter();
        let first = iter.next().map_or_else(Span::call_site, |t| t.span());
        let end = iter.last().map_or(first, |t| t.span());
        Error { span: first, end, kind }
    }

    /// As a `syn::Error` (for `to_compile_error`).
    pub fn to_syn(&self) -> syn::Error {
        let ends: proc_macro2::TokenStream =
            [proc_macro2::Ident::new("start", self.span), proc_macro2::Ident::new("end", self.end)]
                .into_iter()
                .map(proc_macro2::TokenTree::from)
                .collect();
        syn::Error::new_spanned(ends, self.kind.to_string())
    }
}

/// The reasons a stencil is rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The tokens do not parse as a function.
    Syntax {
        /// syn's message.
        message: String,
    },
    /// The function declares a return type.
    ReturnType,
    /// The function ends in a value or uses `return`.
    ReturnValue,
    /// A stencil with generics other than one type parameter (its element type).
    Generics,
    /// A `#[stencil_fn]` helper with generics other than one type parameter (its element type).
    HelperGenerics,
    /// A generic helper called where no element type is known: a stencil whose fields are of
    /// several element types, or that has none.
    HelperElement {
        /// The helper.
        helper: String,
    },
    /// An attribute argument given twice.
    AttributeTwice {
        /// `stencil` or `stencil_fn`.
        attribute: &'static str,
        /// The argument (`sweep`, `crate`).
        key: &'static str,
    },
    /// An array parameter whose length is not an integer literal from 1 to the array limit.
    ParamArrayLength,
    /// A group of fields written at a point with a value of another shape than its members.
    GroupStore {
        /// The group.
        name: String,
        /// Its members.
        len: usize,
        /// The value's shape.
        found: String,
    },
    /// A group of fields used whole, as a value.
    FieldGroupAsValue {
        /// The group.
        name: String,
        /// Its members.
        len: usize,
        /// The point index's name.
        index: String,
    },
    /// Two parameters with one name (an array parameter `q` also takes `q_0`, `q_1`, ...).
    ParamNameClash {
        /// The name.
        name: String,
    },
    /// An error in one instantiation of a stencil generic over its element type.
    Instantiation {
        /// The type parameter.
        param: String,
        /// The element type it stood for.
        elem: &'static str,
        /// The error.
        error: Box<ErrorKind>,
    },
    /// `async`, `const`, `extern` or `unsafe` on the function.
    Qualifier {
        /// The qualifier.
        which: &'static str,
    },
    /// The first parameter is not `idx: Idx1/2/3`.
    MissingIndex,
    /// A parameter is not a plain name.
    ParamPattern,
    /// A parameter of a type the DSL does not know.
    UnsupportedParamType {
        /// The type as written.
        ty: String,
    },
    /// A field of another dimensionality than the index.
    FieldDimension {
        /// The field.
        field: String,
        /// Its dimensionality.
        field_dim: usize,
        /// The stencil's.
        stencil_dim: usize,
    },
    /// No `&mut` field and no reduction: the stencil would compute nothing.
    NoOutput,
    /// No field parameter at all: nothing fixes the shape a range runs over.
    NoField,
    /// A held scalar declared by reference, in an array, or of an element type it cannot hold.
    HeldParam {
        /// The parameter.
        name: String,
        /// Its type as written.
        ty: String,
    },
    /// A reduction parameter passed by shared reference.
    ReductionNotMut {
        /// The parameter.
        name: String,
        /// Its type as written (`Max < f64 >`).
        ty: String,
    },
    /// A reduction of an element type other than `f32` or `f64`.
    ReductionType {
        /// The parameter.
        name: String,
        /// `Sum`, `Min` or `Max`.
        op: &'static str,
        /// Its type as written.
        ty: String,
    },
    /// A reduction parameter used as a value (read, assigned, indexed, a method called on it).
    ReductionAsValue {
        /// The parameter.
        name: String,
    },
    /// `.fold(..)` on something that is not a reduction parameter of the stencil.
    FoldTarget {
        /// The receiver as written.
        name: String,
        /// Whether the call is inside a `#[stencil_fn]` helper.
        in_helper: bool,
    },
    /// `r.fold(x)` used as a value.
    FoldAsValue {
        /// The reduction.
        name: String,
    },
    /// A value of another type than the reduction's folded into it.
    FoldType {
        /// The reduction.
        name: String,
        /// Its element type.
        elem: String,
        /// The value's type.
        found: String,
    },
    /// `fold` with other than one argument.
    FoldArity {
        /// The reduction.
        name: String,
        /// Arguments given.
        got: usize,
    },
    /// More written fields than the CPU executor takes.
    TooManyOutputs {
        /// Written fields declared.
        got: usize,
    },
    /// An offset that is not an integer literal.
    OffsetNotLiteral,
    /// `ix` with the wrong number of offsets.
    OffsetCount {
        /// Offsets given.
        got: usize,
        /// The stencil's dimensionality.
        dim: usize,
    },
    /// A field indexed by something other than the point index.
    BadIndex {
        /// The field.
        field: String,
        /// The index parameter's name.
        index: String,
    },
    /// A written field read at a non-zero offset.
    RacyRead {
        /// The field.
        field: String,
        /// The offset read.
        offset: Vec<i32>,
    },
    /// A write at a non-zero offset.
    OffsetWrite {
        /// The field.
        field: String,
        /// The offset written.
        offset: Vec<i32>,
    },
    /// A write to a read-only field.
    ReadOnlyWrite {
        /// The field.
        field: String,
        /// Its dimensionality.
        dim: usize,
        /// Its element type.
        elem: String,
    },
    /// A field used as a value.
    FieldAsValue {
        /// The field.
        name: String,
        /// The index parameter's name.
        index: String,
    },
    /// The point index used as a value.
    IndexAsValue {
        /// The index parameter's name.
        index: String,
    },
    /// A named point (`let below = idx.ix::<0, 0, -1>();`) used as a value.
    PointAsValue {
        /// The local's name.
        name: String,
    },
    /// A name that is neither a parameter nor a local nor a known constant.
    UnknownName {
        /// The name.
        name: String,
    },
    /// A call of a function that is not a supported math function.
    UnsupportedCall {
        /// The function as written.
        name: String,
    },
    /// A math function with the wrong number of arguments.
    Arity {
        /// The function.
        name: String,
        /// Arguments expected (receiver included).
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// A loop whose trip count is not two integer literals.
    RuntimeLoop {
        /// `for`, `while` or `loop`.
        which: &'static str,
    },
    /// A constant-trip-count loop too long to unroll.
    UnrollTooLong {
        /// The trip count.
        trips: i64,
    },
    /// `sweep = ...` with a word other than `forward` or `backward`.
    SweepOrder {
        /// The word as written.
        found: String,
    },
    /// A column-sweep construct (`idx.level()`, `idx.levels()`, `#[carry]`) in a stencil that
    /// is no sweep.
    NotASweep {
        /// The construct as written.
        what: String,
    },
    /// A `#[carry]` local declared after another statement.
    CarryPlacement,
    /// A `#[carry]` local whose initial value reads a field or the level.
    CarryInit {
        /// The local.
        name: String,
    },
    /// A reduction parameter in a column sweep.
    SweepReduces {
        /// The parameter.
        name: String,
    },
    /// A written field read at an offset a column sweep has not passed.
    SweepRacyRead {
        /// The field.
        field: String,
        /// The offset read.
        offset: Vec<i32>,
        /// A read the sweep allows (`f[idx.ix(0, 0, -1)]`).
        allowed: String,
    },
    /// A closure.
    Closure,
    /// A point function (`let f = |p: Idx3| ...;`) of an unsupported form.
    PointFnForm {
        /// The point function.
        name: String,
        /// What is wrong and what to write.
        what: String,
    },
    /// A point function in a column sweep.
    PointFnInSweep {
        /// The point function.
        name: String,
    },
    /// A point function defined inside another one or inside a helper.
    PointFnNested {
        /// The point function.
        name: String,
    },
    /// A point function that uses a local of the stencil.
    PointFnCapture {
        /// The point function.
        name: String,
        /// The local.
        local: String,
    },
    /// A point function that writes a field or folds a reduction.
    PointFnWrites {
        /// The point function.
        name: String,
    },
    /// A point function that reads a written field.
    PointFnReadsWritten {
        /// The point function.
        name: String,
        /// The field.
        field: String,
    },
    /// A point function called with something other than one point, or used as a value.
    PointFnCall {
        /// The point function.
        name: String,
        /// A point near the current one, as this stencil writes it (`idx.ix::<-1, 0>()`).
        example: String,
    },
    /// An `unsafe` block.
    Unsafe,
    /// A macro invocation.
    Macro {
        /// The macro's name.
        name: String,
    },
    /// An assignment to something that is not a `let mut` local or a field point.
    BadAssignTarget,
    /// An assignment to a local declared without `mut`.
    ImmutableLocal {
        /// The local.
        name: String,
    },
    /// A local (a `let`, a `for` variable or a `const`) named like the point index, which it
    /// would hide from the neighbour accesses after it.
    ShadowsIndex {
        /// The index parameter's name.
        name: String,
    },
    /// `let x;` with no value.
    UninitialisedLocal {
        /// The local.
        name: String,
    },
    /// `if` used as a value without `else`.
    MissingElse,
    /// Two types that must agree do not.
    TypeMismatch {
        /// One type.
        expected: String,
        /// The other.
        found: String,
    },
    /// An operation on a type that does not support it.
    BadOperand {
        /// The operation.
        op: String,
        /// The type.
        ty: String,
        /// What would be accepted.
        wanted: &'static str,
    },
    /// A float literal where an integer is needed or vice versa.
    LiteralType {
        /// The literal as written.
        literal: String,
        /// The type it must have.
        ty: String,
    },
    /// A literal too large for its type.
    LiteralRange {
        /// The literal as written.
        literal: String,
        /// Its type.
        ty: String,
    },
    /// An array index that is not a compile-time integer.
    ArrayIndexNotConstant {
        /// The array as written.
        array: String,
    },
    /// A constant index past the end of an array or tuple.
    IndexOutOfBounds {
        /// The array or tuple as written.
        what: String,
        /// The index.
        index: i64,
        /// Its length.
        len: usize,
    },
    /// An array length that is not a compile-time integer from 1 to [`crate::limits::MAX_ARRAY_LEN`].
    ArrayLength {
        /// The length, if it is a constant.
        len: Option<i64>,
    },
    /// A type that a local, a helper parameter or a helper result cannot have.
    UnsupportedValueType {
        /// The type as written.
        ty: String,
    },
    /// An array or tuple where a single number is needed.
    AggregateAsScalar {
        /// `an array of 5 values`, `a tuple of 2 values`.
        what: String,
    },
    /// Two values of different shapes (scalar, array length, tuple arity) where they must agree.
    ShapeMismatch {
        /// One shape.
        expected: String,
        /// The other.
        found: String,
    },
    /// A `#[stencil_fn]` helper called with the wrong number of arguments.
    HelperArity {
        /// The helper.
        name: String,
        /// Parameters it declares.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// A field (or the point index) passed to a helper.
    FieldToHelper {
        /// The field.
        field: String,
        /// The helper.
        helper: String,
    },
    /// A `#[stencil_fn]` helper without a return type.
    HelperNoReturn,
    /// `return` in a `#[stencil_fn]` helper.
    HelperReturn,
    /// A helper that calls itself, directly or through other helpers.
    Recursion {
        /// The calls, `a -> b -> a`.
        chain: String,
    },
    /// A module constant read by a stencil that also emits an adjoint or a gradient.
    ConstantWithCompanion {
        /// The constant.
        name: String,
        /// The attribute asking for the companion (`adjoint`, `gradient`, ...).
        companion: String,
    },
    /// A helper the stencil reaches failed its own check (reported where the helper is).
    BrokenHelper {
        /// The stencil.
        stencil: String,
        /// The helper with errors.
        helper: String,
    },
    /// An argument to `#[stencil]` or `#[stencil_fn]` other than `crate = path`.
    AttributeArgument {
        /// `stencil` or `stencil_fn`.
        attribute: &'static str,
    },
    /// Any other syntax the DSL does not support.
    Unsupported {
        /// What was found.
        what: String,
    },
    /// `#[stencil(adjoint(..))]` on a stencil that has no adjoint with respect to those fields.
    Adjoint(crate::passes::adjoint::AdjointError),
    /// `#[stencil(portable_math)]` on a stencil that calls a math function with no portable form.
    NotPortable {
        /// The function (`sin`).
        func: &'static str,
    },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ErrorKind::*;
        match self {
            Syntax { message } => write!(f, "#[stencil] expects a function: {message}"),
            ReturnType => write!(f, "a stencil returns nothing: remove the return type and write results into a `&mut` field parameter"),
            ReturnValue => write!(f, "a stencil returns nothing: write the value into a `&mut` field, e.g. `out[idx] = value;`"),
            Generics => write!(f, "a stencil may have one type parameter, its element type, which it is compiled for as f32 and as f64 (`fn heat<T>(idx: Idx3, c: T, f: &Field3<T>, out: &mut Field3<T>)`, run as `Heat::<f64>::new()`): lifetimes, const parameters, where-clauses and more type parameters are not supported"),
            Instantiation { param, elem, error } => write!(f, "{error} (in the instantiation `{param} = {elem}` of this generic stencil or helper)"),
            GroupStore { name, len, found } => write!(f, "`{name}[idx] = ..` writes the {len} members of `{name}`: give an array of {len} values, not {found}"),
            FieldGroupAsValue { name, len, index } => write!(f, "`{name}` is a group of {len} fields and cannot be used as a value: index a member at a point, e.g. `{name}[0][{index}]` (members 0 to {})", len - 1),
            ParamArrayLength => write!(f, "an array parameter's length is an integer literal from 1 to {MAX_ARRAY_LEN}: `w: [f64; 9]`, `q: [&Field3<f64>; 5]`"),
            ParamNameClash { name } => write!(f, "two parameters are called `{name}` (an array parameter `q` of N elements also takes the names `q_0` to `q_N-1`): rename one"),
            AttributeTwice { attribute, key: "adjoint" } => write!(f, "`adjoint(..)` is given twice to #[{attribute}]: name every field in one `adjoint(u, v, ..)`"),
            AttributeTwice { attribute, key: "adjoint_step" } => write!(f, "`adjoint_step(..)` is given twice to #[{attribute}]: name every time level in one `adjoint_step(u, u_prev, ..)`"),
            AttributeTwice { attribute, key: "scaled_adjoint_step" } => write!(f, "`scaled_adjoint_step(..)` is given twice to #[{attribute}]: name every time level in one `scaled_adjoint_step(u, u_prev, ..)`"),
            AttributeTwice { attribute, key: "scaled_gradient" } => write!(f, "`scaled_gradient(..)` is given twice to #[{attribute}]: name every field in one `scaled_gradient(c, ..)`"),
            AttributeTwice { attribute, key: "gradient" } => write!(f, "`gradient(..)` is given twice to #[{attribute}]: name every field in one `gradient(c, ..)`"),
            AttributeTwice { attribute, key: key @ ("portable_math" | "fma") } => write!(f, "`{key}` is given twice to #[{attribute}]: keep one"),
            AttributeTwice { attribute, key } => write!(f, "`{key} = ..` is given twice to #[{attribute}]: keep one"),
            HelperGenerics => write!(f, "a #[stencil_fn] helper may have one type parameter, its element type, which it takes from the stencil that calls it (`fn twice<T>(x: T) -> T`): lifetimes, const parameters, where-clauses and more type parameters are not supported"),
            HelperElement { helper } => write!(f, "`{helper}` is generic over its element type, which it takes from the calling stencil's fields, and this stencil's fields are not all of one element type (or it has none): make the stencil generic (`fn s<T>(..)`), or call a helper written for one element type"),
            Qualifier { which } => write!(f, "a stencil cannot be `{which}`: remove the qualifier"),
            MissingIndex => write!(f, "the first parameter of a stencil must be the point index: `idx: Idx1`, `idx: Idx2` or `idx: Idx3`"),
            ParamPattern => write!(f, "stencil parameters must be plain names, e.g. `dt: f64`"),
            UnsupportedParamType { ty } => write!(f, "unsupported parameter type `{ty}`: use a scalar (f32, f64, i32, u32, bool) or a field (`&Field3<f32>` to read, `&mut Field3<f32>` to write)"),
            FieldDimension { field, field_dim, stencil_dim } => write!(f, "field `{field}` is {field_dim}D but the stencil is {stencil_dim}D: use `Field{stencil_dim}` or change the index to `Idx{field_dim}`"),
            NoOutput => write!(f, "this stencil writes no field and folds no reduction: add a `&mut FieldN<T>` parameter and assign it (`out[idx] = ...;`), or a reduction parameter (`total: &mut Sum<f64>`) and fold into it (`total.fold(u[idx]);`)"),
            NoField => write!(f, "this stencil has no field parameter: a launch runs over the points of its fields, so add the field the values come from (`u: &FieldN<T>`)"),
            HeldParam { name, ty } => write!(f, "held scalar `{name}: {}` is not supported: declare it by value as `{name}: Held<f64>` (or `f32`, `i32`, `u32`), one per parameter, and pass `&held` at the launch; the stencil reads it like a scalar, and only a reduction writes it (`reduce_into`)", ty.replace(' ', "")),
            ReductionNotMut { name, ty } => write!(f, "reduction `{name}` must be passed as `&mut {}`: the launch writes its result there", ty.replace(' ', "")),
            ReductionType { name, op, ty } => write!(f, "reduction `{name}: {}` is not supported: a reduction folds `f32` or `f64` values, e.g. `&mut {op}<f64>` (fold integers as `x as f64`)", ty.replace(' ', "")),
            ReductionAsValue { name } => write!(f, "`{name}` is a reduction: inside the stencil the only thing to do with it is `{name}.fold(value);` (the launch combines the values of every point); read its result after the launch, `{name}.get()`"),
            FoldTarget { name, in_helper: true } => write!(f, "`{name}.fold(..)` inside a #[stencil_fn] helper: helpers compute values and cannot fold; return the value and fold it in the stencil (`m.fold(helper(..));`)"),
            FoldTarget { name, in_helper: false } => write!(f, "`{name}` is not a reduction parameter: `.fold(value)` folds into a parameter declared `{name}: &mut Sum<f64>` (or `Min`, `Max`; `f32` or `f64`)"),
            FoldAsValue { name } => write!(f, "`{name}.fold(..)` is a statement and has no value: write `{name}.fold(x);` on its own"),
            FoldType { name, elem, found } => write!(f, "reduction `{name}` folds `{elem}` values, this one is `{found}`: convert it, `{name}.fold(x as {elem});`"),
            FoldArity { name, got } => write!(f, "`{name}.fold` takes one value, {got} given: `{name}.fold(x);`"),
            TooManyOutputs { got } => write!(f, "this stencil writes {got} fields; at most {MAX_OUTPUTS} are supported: split it into several stencils"),
            OffsetNotLiteral => write!(f, "stencil offsets must be integers known at compile time: literals (`idx.ix::<1, 0, -1>()`), a `const`, or the variable of a constant `for` loop (`for r in 1..=4 {{ u[idx.ix(r, 0, 0)] }}`), with `+ - *`"),
            OffsetCount { got, dim } => write!(f, "`ix` in a {dim}D stencil takes {dim} offsets, not {got}: e.g. `idx.ix::<{}>()`", vec!["0"; *dim].join(", ")),
            BadIndex { field, index } => write!(f, "index field `{field}` with the point index: `{field}[{index}]` for the centre or `{field}[{index}.ix::<..>()]` for a neighbour"),
            RacyRead { field, offset } => write!(f, "field `{field}` is written by this stencil, so it may be read only at its own point (offset 0), not at {offset:?}: points update in any order, so a neighbour may already hold its new value. Read the neighbour from a separate input field (double-buffer: `{field}_old` as `&Field`, `{field}` as `&mut Field`)"),
            OffsetWrite { field, offset } => write!(f, "each point may write only its own cell: write `{field}[idx]`, not offset {offset:?} (writing a neighbour races with that neighbour's own update)"),
            ReadOnlyWrite { field, dim, elem } => write!(f, "field `{field}` is read-only: declare it `{field}: &mut Field{dim}<{elem}>` to write it"),
            FieldAsValue { name, index } => write!(f, "`{name}` is a field and cannot be used as a value: index it at a point, e.g. `{name}[{index}]`"),
            PointAsValue { name } => write!(f, "`{name}` is a point (the index shifted), not a value: index a field with it (`u[{name}]`) or shift it further (`u[{name}.ix::<1, 0, 0>()]`)"),
            IndexAsValue { index } => write!(f, "`{index}` is the point index, not a value: use it to index a field at this point (`u[{index}]`) or a neighbour (`u[{index}.ix::<1, 0, 0>()]`); a stencil that needs its coordinates reads them from a field"),
            UnknownName { name } => write!(f, "unknown name `{name}`: a stencil sees only its parameters, its own locals and constants (`const {name}: f64 = ...;` inside the stencil), and constants in scope named in upper case (`RD`); pass other outside values as scalar parameters"),
            UnsupportedCall { name } => write!(f, "cannot call `{name}` in a stencil: only math functions ({}) are supported, as methods (`x.sqrt()`) or paths (`f64::sqrt(x)`), and `#[stencil_fn]` helpers called by their bare name (`flux(a, b)`, imported with `use`)", MATH_LIST),
            Arity { name, expected, got } => write!(f, "`{name}` takes {expected} argument(s) counting the receiver, {got} given"),
            RuntimeLoop { which } => write!(f, "`{which}` loops are not allowed in a stencil: a point update must have a fixed amount of work. Only `for i in A..B` with integer-literal bounds is accepted (it is unrolled)"),
            UnrollTooLong { trips } => write!(f, "this loop runs {trips} times; loops are unrolled, so at most {MAX_UNROLL} iterations are accepted"),
            SweepOrder { found } => write!(f, "`sweep = {found}`: a column sweep goes `forward` (from the range's first level up: `#[stencil(sweep = forward)]`) or `backward` (from its last level down)"),
            NotASweep { what } => write!(f, "`{what}` exists only in a column sweep: declare the stencil `#[stencil(sweep = forward)]` (or `backward`) to update each column level by level"),
            CarryPlacement => write!(f, "`#[carry]` locals open the body of a sweep, before any other statement: they are set once per column, before its first level, and keep their values from one level to the next"),
            CarryInit { name } => write!(f, "carried local `{name}` is set once per column, before its first level, so its initial value may use literals, scalar parameters and earlier carried locals, not a field or the level, and may write nothing: start it at a constant (`#[carry] let mut {name} = 0.0;`) and set it from fields at the first level (`if idx.level() == 0 {{ {name} = ...; }}`)"),
            SweepReduces { name } => write!(f, "`{name}` is a reduction, and a column sweep cannot fold yet: write the values into a field and reduce it with a separate stencil"),
            SweepRacyRead { field, offset, allowed } => write!(f, "field `{field}` is written by this sweep, so it may be read only at its own point or at a level the sweep has already passed in the same column (e.g. `{allowed}`), not at {offset:?}: other columns and later levels may not hold their new values yet"),
            Adjoint(e) => write!(f, "{e}"),
            NotPortable { func } => write!(
                f,
                "`{func}` has no portable form: with #[stencil(portable_math)] a stencil may call `exp`, `exp2`, `ln`, `log2`, `log10` and `powf` (computed by the stencil's own arithmetic) and the functions every backend already computes alike (`sqrt`, `abs`, `min`, `max`, `clamp`, `powi`, `floor`, `ceil`, `round`, `trunc`, `copysign`, `mul_add`, `signum`, `recip`); compute `{func}` in another stencil, or drop `portable_math`"
            ),
            Closure => write!(f, "a closure is allowed only as a point function, bound by `let` (`let flux = |p: Idx3| ...;`, then `flux(idx)` or `flux(idx.ix(..))`); for a function of values, write a `#[stencil_fn]` helper"),
            PointFnForm { name, what } => write!(f, "point function `{name}`: {what}"),
            PointFnInSweep { name } => write!(f, "point function `{name}`: a column sweep has no point functions (its levels depend on each other); compute the values in the body"),
            PointFnNested { name } => write!(f, "point function `{name}` is defined inside a point function or a helper: define it in the stencil's body"),
            PointFnCapture { name, local } => write!(f, "point function `{name}` uses `{local}`, a local of the stencil: a point function sees only the stencil's parameters and constants (its values must not depend on where it is called from); compute `{local}` inside it"),
            PointFnWrites { name } => write!(f, "point function `{name}` writes a field or folds a reduction: a point function only computes values; write them in the stencil's body"),
            PointFnReadsWritten { name, field } => write!(f, "point function `{name}` reads `{field}`, which this stencil writes: its values at neighbouring points would race with their writes; read only input fields in it"),
            PointFnCall { name, example } => write!(f, "`{name}` is a point function: call it at one point, `{name}({})` or `{name}({example})`", example.split('.').next().unwrap_or(example)),
            Unsafe => write!(f, "`unsafe` is not allowed in a stencil: field accesses are checked once per launch, no unsafe code is needed"),
            Macro { name } => write!(f, "macros such as `{name}!` are not supported in stencils: the body is compiled for the GPU too"),
            BadAssignTarget => write!(f, "only `let mut` locals and the current point of a `&mut` field (`out[idx]`) can be assigned"),
            ImmutableLocal { name } => write!(f, "cannot assign twice to `{name}`: declare it `let mut {name}`"),
            ShadowsIndex { name } => write!(f, "`{name}` is this stencil's point index: a local of the same name would hide it from the neighbour accesses that follow (`u[{name}.ix::<1>()]` always means the index); give the local another name"),
            UninitialisedLocal { name } => write!(f, "give `{name}` an initial value: `let mut {name} = 0.0;`"),
            MissingElse => write!(f, "an `if` used as a value needs an `else` branch"),
            TypeMismatch { expected, found } => write!(f, "mismatched types: `{expected}` and `{found}`; convert one with `as`"),
            BadOperand { op, ty, wanted } => write!(f, "`{op}` cannot be applied to `{ty}`: it needs {wanted}"),
            LiteralType { literal, ty } => write!(f, "literal `{literal}` used as `{ty}`: write {}", literal_hint(literal, ty)),
            LiteralRange { literal, ty } => write!(f, "literal `{literal}` is out of range for `{ty}`: use a wider type or a smaller value"),
            ArrayIndexNotConstant { array } => write!(f, "`{array}` must be indexed by a compile-time integer: a literal (`{array}[2]`), the variable of a constant `for` loop (`for i in 0..5 {{ {array}[i] }}`) or a `const N: usize` declared in the body; arrays live in registers and are unrolled"),
            IndexOutOfBounds { what, index, len } => write!(f, "index {index} is out of bounds for `{what}` of length {len}: use 0 to {}", len.saturating_sub(1)),
            ArrayLength { len: Some(len) } => write!(f, "array length {len} is not supported: arrays hold 1 to {} values (they live in registers)", MAX_ARRAY_LEN),
            ArrayLength { len: None } => write!(f, "array lengths must be compile-time integers: a literal (`[0.0; 5]`) or a `const N: usize = 5;` declared in the body"),
            UnsupportedValueType { ty } => write!(f, "unsupported type `{ty}`: locals and helper values are scalars (f32, f64, i32, u32, bool), fixed-size arrays of them (`[f64; 5]`) or tuples of those; a field cannot be passed to a helper, pass its value at a point (`u[idx]`)"),
            AggregateAsScalar { what } => write!(f, "{what} cannot be used as a number here: index it (`q[0]`, `t.0`) or pass it whole to a `#[stencil_fn]` helper"),
            ShapeMismatch { expected, found } => write!(f, "mismatched shapes: {expected} and {found}"),
            HelperArity { name, expected, got } => write!(f, "`{name}` takes {expected} argument(s), {got} given"),
            FieldToHelper { field, helper } => write!(f, "field `{field}` cannot be passed to helper `{helper}`: helpers take values, not fields; pass the values it needs, e.g. `{field}[idx]` or a neighbour `{field}[idx.ix::<..>()]`"),
            ConstantWithCompanion { name, companion } => write!(f, "`{name}` is a constant of the module, which a stencil with `{companion}` cannot read yet: pass it as a scalar parameter (`{}: f64`) or declare it inside the stencil (`const {name}: f64 = ...;`)", name.to_lowercase()),
            BrokenHelper { stencil, helper } => write!(f, "`{stencil}` calls the helper `{helper}`, which has errors (reported where `{helper}` is defined): fix those first"),
            AttributeArgument { attribute: "stencil" } => write!(f, "#[stencil] takes `sweep = forward` or `sweep = backward` (a column sweep: each column updated level by level), `adjoint(u, ..)` (also emit the adjoint stencil with respect to the read fields named), `adjoint_step(u, u_prev)` (also emit one reverse time step of the levels named, newest first), `gradient(c, ..)` (also emit the gradient stencil with respect to the parameter fields named), `scaled_adjoint_step(u, u_prev)` (also emit the reverse time step in scaled cotangents and their scale), `scaled_gradient(c, ..)` (also emit the gradient reading scaled cotangents), `portable_math` (math functions computed alike on every backend, for bit-equal results), `fma` (a product added in an expression fused into one multiply-add, `a * b + c` as `a.mul_add(b, c)`, alike on every backend) and `crate = path` (the runtime's path, for a crate that reaches stencil-runtime through another crate's re-export: `#[stencil(crate = my_models::stencil_runtime)]`), separated by a comma"),
            AttributeArgument { attribute } => write!(f, "#[{attribute}] takes no argument but `crate = path` (the runtime's path, for a crate that reaches stencil-runtime through another crate's re-export: `#[{attribute}(crate = my_models::stencil_runtime)]`)"),
            HelperNoReturn => write!(f, "a #[stencil_fn] helper computes a value: declare its return type (`-> f64`, `-> [f64; 5]`, `-> (f64, f64)`) and end the body with it"),
            HelperReturn => write!(f, "`return` is not supported in a #[stencil_fn] helper: end the body with the value (use `if`/`else` as an expression for early results)"),
            Recursion { chain } => write!(f, "helpers cannot be recursive ({chain}): every call is inlined, so the call depth must be fixed; rewrite it as a constant `for` loop"),
            Unsupported { what } => write!(f, "{what} is not supported in a stencil"),
        }
    }
}

const MATH_LIST: &str = "sqrt, cbrt, abs, min, max, clamp, powi, powf, exp, exp2, ln, log2, log10, sin, cos, tan, \
asin, acos, atan, atan2, sinh, cosh, tanh, floor, ceil, round, trunc, copysign, mul_add, hypot, signum, recip";

fn literal_hint(literal: &str, ty: &str) -> String {
    if ty.starts_with('f') {
        format!("`{literal}.0`")
    } else {
        format!("an integer, or cast: `({literal}) as {ty}`")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for Error {}
