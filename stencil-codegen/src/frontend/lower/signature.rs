//! The stencil's signature: the point index first, then scalars and fields.

use super::tokens;
use crate::frontend::error::{Error, ErrorKind};
use crate::ir::{FieldParam, Param, ParamKind, ReduceOp, ReduceParam, ScalarType, SweepOrder};
use syn::spanned::Spanned;

pub struct Signature {
    pub dim: usize,
    pub index_name: String,
    pub params: Vec<Param>,
    /// The parameters as the function declares them (an array parameter is several of
    /// `params`).
    pub groups: Vec<UserParam>,
    /// `Some` for a column sweep (`#[stencil(sweep = ..)]`).
    pub sweep: Option<SweepOrder>,
}

/// A parameter as the function declares it: one IR parameter, or, for an array of scalars or
/// of fields (`w: [f64; 9]`, `q: [&Field3<f64>; 5]`), one per element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserParam {
    /// Its name.
    pub name: String,
    /// The IR parameters it stands for (`name_0 ..` for an array).
    pub params: std::ops::Range<usize>,
    /// Whether it is an array.
    pub array: bool,
}

/// The order of a column sweep, from the attribute `#[stencil(sweep = ..)]` leaves on the item
/// ([`crate::naming::SWEEP_ATTR`]).
fn sweep_of(item: &syn::ItemFn) -> Option<SweepOrder> {
    item.attrs.iter().find(|a| a.path().is_ident(crate::naming::SWEEP_ATTR)).and_then(|a| {
        let word: syn::Ident = a.parse_args().ok()?;
        SweepOrder::from_word(&word.to_string())
    })
}

/// Rejects generics (a generic stencil arrives here instantiated, [`super::generic`]) and
/// `async`/`const`/`unsafe`/`extern` (stencils and helpers alike).
pub fn plain_signature(sig: &syn::Signature, generics: ErrorKind) -> Result<(), Error> {
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::spanned(&sig.generics, generics));
    }
    let qualifiers = [
        (sig.asyncness.map(|t| t.span()), "async"),
        (sig.constness.map(|t| t.span()), "const"),
        (sig.unsafety.map(|t| t.span()), "unsafe"),
        (sig.abi.as_ref().map(|t| t.span()), "extern"),
    ];
    if let Some((Some(span), which)) = qualifiers.into_iter().find(|(s, _)| s.is_some()) {
        return Err(Error::new(span, ErrorKind::Qualifier { which }));
    }
    Ok(())
}

pub fn lower_signature(item: &syn::ItemFn) -> Result<Signature, Error> {
    let sig = &item.sig;
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        return Err(Error::spanned(&ty, ErrorKind::ReturnType));
    }
    plain_signature(sig, ErrorKind::Generics)?;
    let mut inputs = sig.inputs.iter();
    let missing =
        || Error::new(sig.inputs.first().map(|i| i.span()).unwrap_or(sig.ident.span()), ErrorKind::MissingIndex);
    let (index_name, dim) = match inputs.next() {
        Some(syn::FnArg::Typed(pt)) => {
            let name = ident_of(&pt.pat)?;
            let dim = index_dim(&pt.ty).ok_or_else(missing)?;
            (name, dim)
        }
        _ => return Err(missing()),
    };
    let sweep = sweep_of(item);
    let mut params = Vec::new();
    let mut groups = Vec::new();
    for input in inputs {
        let syn::FnArg::Typed(pt) = input else { return Err(Error::spanned(&input, ErrorKind::ParamPattern)) };
        let name = ident_of(&pt.pat)?;
        // `[T; N]` of scalars or `[&FieldD<T>; N]` / `[&mut FieldD<T>; N]`: N parameters
        // `name_0 .. name_{N-1}` of the IR, one argument of the functor.
        let (ty, len) = match &*pt.ty {
            syn::Type::Array(a) => {
                let len = match &a.len {
                    syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(n), .. }) => n.base10_parse::<usize>().ok(),
                    _ => None,
                }
                .filter(|n| (1..=crate::limits::MAX_ARRAY_LEN).contains(n))
                .ok_or_else(|| Error::spanned(&a.len, ErrorKind::ParamArrayLength))?;
                (&*a.elem, Some(len))
            }
            ty => (ty, None),
        };
        let kind = param_kind(&name, ty, dim, sweep.is_some())?;
        if len.is_some() && matches!(kind, ParamKind::Reduction(_)) {
            return Err(Error::spanned(&pt.ty, ErrorKind::UnsupportedParamType { ty: tokens(&pt.ty) }));
        }
        if len.is_some() && matches!(kind, ParamKind::Held(_)) {
            return Err(Error::spanned(&pt.ty, ErrorKind::HeldParam { name, ty: tokens(&pt.ty) }));
        }
        let first = params.len();
        match len {
            None => params.push(Param { name: name.clone(), kind }),
            Some(n) => params.extend((0..n).map(|k| Param { name: format!("{name}_{k}"), kind })),
        }
        groups.push(UserParam { name, params: first..params.len(), array: len.is_some() });
    }
    if let Some(clash) = params
        .iter()
        .enumerate()
        .find_map(|(i, p)| params[..i].iter().any(|q| q.name == p.name).then(|| p.name.clone()))
    {
        // Point at the parameter declared with that very name.
        let at = sig
            .inputs
            .iter()
            .find(|i| matches!(i, syn::FnArg::Typed(pt) if ident_of(&pt.pat).is_ok_and(|n| n == clash)));
        let kind = ErrorKind::ParamNameClash { name: clash };
        return Err(match at {
            Some(input) => Error::spanned(input, kind),
            None => Error::spanned(&sig.inputs, kind),
        });
    }
    let outputs = params.iter().filter(|p| matches!(p.kind, ParamKind::Field(f) if f.writable)).count();
    if outputs > crate::limits::MAX_OUTPUTS {
        return Err(Error::spanned(&sig.inputs, ErrorKind::TooManyOutputs { got: outputs }));
    }
    Ok(Signature { dim, index_name, params, groups, sweep })
}

/// What one parameter of type `ty` (an array's element type for an array parameter) is.
fn param_kind(name: &str, ty: &syn::Type, dim: usize, sweep: bool) -> Result<ParamKind, Error> {
    let unsupported = || Error::spanned(ty, ErrorKind::UnsupportedParamType { ty: tokens(ty) });
    let name = name.to_string();
    let held = |ty: &syn::Type| last_segment(ty).is_some_and(|s| s.ident == "Held");
    Ok(match ty {
        syn::Type::Reference(r) if held(&r.elem) => {
            return Err(Error::spanned(ty, ErrorKind::HeldParam { name, ty: tokens(ty) }));
        }
        ty if held(ty) => {
            let elem = last_segment(ty).and_then(|s| match &s.arguments {
                syn::PathArguments::AngleBracketed(a) => match a.args.iter().collect::<Vec<_>>().as_slice() {
                    [syn::GenericArgument::Type(elem)] => scalar_type(elem),
                    _ => None,
                },
                _ => None,
            });
            match elem {
                Some(t) if t != ScalarType::Bool => ParamKind::Held(t),
                _ => return Err(Error::spanned(ty, ErrorKind::HeldParam { name, ty: tokens(ty) })),
            }
        }
        syn::Type::Reference(r) if reduction_type(&r.elem).is_some() => {
            let (op, elem) = reduction_type(&r.elem).expect("checked");
            let ty_text = tokens(&r.elem);
            if r.mutability.is_none() {
                return Err(Error::spanned(ty, ErrorKind::ReductionNotMut { name, ty: ty_text }));
            }
            if sweep {
                return Err(Error::spanned(ty, ErrorKind::SweepReduces { name }));
            }
            match elem {
                Some(elem) if elem.is_float() => ParamKind::Reduction(ReduceParam { op, elem }),
                _ => {
                    return Err(Error::spanned(
                        &r.elem,
                        ErrorKind::ReductionType { name, op: op.type_name(), ty: ty_text },
                    ))
                }
            }
        }
        syn::Type::Reference(r) => {
            let (field_dim, elem) = field_type(&r.elem).ok_or_else(unsupported)?;
            if field_dim != dim {
                return Err(Error::spanned(
                    &r.elem,
                    ErrorKind::FieldDimension { field: name, field_dim, stencil_dim: dim },
                ));
            }
            ParamKind::Field(FieldParam { elem, writable: r.mutability.is_some() })
        }
        ty => ParamKind::Scalar(scalar_type(ty).ok_or_else(unsupported)?),
    })
}

fn ident_of(pat: &syn::Pat) -> Result<String, Error> {
    match pat {
        syn::Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() && p.mutability.is_none() => {
            Ok(p.ident.to_string())
        }
        other => Err(Error::spanned(&other, ErrorKind::ParamPattern)),
    }
}

fn last_segment(ty: &syn::Type) -> Option<&syn::PathSegment> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        syn::Type::Paren(p) => last_segment(&p.elem),
        syn::Type::Group(g) => last_segment(&g.elem),
        _ => None,
    }
}

/// `f32`, `f64`, `i32`, `u32` or `bool` as a type.
pub fn scalar_type(ty: &syn::Type) -> Option<ScalarType> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => ScalarType::from_name(&p.path.get_ident()?.to_string()),
        syn::Type::Paren(p) => scalar_type(&p.elem),
        syn::Type::Group(g) => scalar_type(&g.elem),
        _ => None,
    }
}

/// `Sum<T>`, `Min<T>` or `Max<T>`: the operator, and `T` if it is a scalar type.
pub fn reduction_type(ty: &syn::Type) -> Option<(ReduceOp, Option<ScalarType>)> {
    let seg = last_segment(ty)?;
    let op = ReduceOp::from_type_name(&seg.ident.to_string())?;
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else { return None };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(elem)] => Some((op, scalar_type(elem))),
        _ => None,
    }
}

fn index_dim(ty: &syn::Type) -> Option<usize> {
    let seg = last_segment(ty)?;
    if !seg.arguments.is_none() {
        return None;
    }
    match seg.ident.to_string().as_str() {
        "Idx1" => Some(1),
        "Idx2" => Some(2),
        "Idx3" => Some(3),
        _ => None,
    }
}

/// `Field1<T>`, `Field2<T>` or `Field3<T>` with a field element type.
fn field_type(ty: &syn::Type) -> Option<(usize, ScalarType)> {
    let seg = last_segment(ty)?;
    let dim = match seg.ident.to_string().as_str() {
        "Field1" => 1,
        "Field2" => 2,
        "Field3" => 3,
        _ => return None,
    };
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else { return None };
    if args.args.len() != 1 {
        return None;
    }
    let syn::GenericArgument::Type(elem) = &args.args[0] else { return None };
    let elem = scalar_type(elem).filter(|t| *t != ScalarType::Bool)?;
    Some((dim, elem))
}
