//! `#[stencil(adjoint(u, v))]`: the companion adjoint stencil ([`crate::passes::adjoint()`]),
//! emitted next to the forward functor as a functor of its own (`WaveAdjoint` for `wave`), so
//! that it runs on every executor and strategy as any stencil does. Errors point at the
//! statement that holds the nonlinear term, or at the name in the attribute.

use super::error::{Error, ErrorKind};
use super::lower::UserParam;
use crate::ir::StencilIr;
use crate::naming;
use crate::passes::adjoint::{adjoint, Adjoint, AdjointError, AdjointErrorKind, AdjointRole, Site, BAR_SUFFIX};
use crate::passes::adjoint_step::adjoint_step;
use crate::passes::gradient::gradient;
use crate::passes::scaled_adjoint_step::{scaled_adjoint_step, scaled_gradient};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::visit::Visit;

/// A companion stencil that `#[stencil(..)]` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `adjoint(..)`: [`companion`].
    Adjoint,
    /// `adjoint_step(..)`: [`step_companion`].
    AdjointStep,
    /// `gradient(..)`: [`gradient_companion`].
    Gradient,
    /// `scaled_adjoint_step(..)`: the step of [`scaled_step_companion`].
    ScaledAdjointStep,
    /// `scaled_adjoint_step(..)` too: the scale of [`scaled_step_companion`].
    CotangentScale,
    /// `scaled_gradient(..)`: [`gradient_companion`] reading scaled cotangents.
    ScaledGradient,
}

/// One companion asked for, with the names in its attribute.
pub struct Request {
    /// Which companion.
    pub kind: Kind,
    /// The names in its attribute, with their spans.
    pub names: Vec<Ident>,
}

/// The companions the marker attributes on `func` ask for, in the order their functors are
/// emitted: adjoint, adjoint step, gradient, scaled step, its scale, scaled gradient.
pub fn requests(func: &syn::ItemFn) -> Result<Vec<Request>, Error> {
    let kinds = [
        (Kind::Adjoint, naming::ADJOINT_ATTR),
        (Kind::AdjointStep, naming::ADJOINT_STEP_ATTR),
        (Kind::Gradient, naming::GRADIENT_ATTR),
        (Kind::ScaledAdjointStep, naming::SCALED_ADJOINT_STEP_ATTR),
        (Kind::CotangentScale, naming::SCALED_ADJOINT_STEP_ATTR),
        (Kind::ScaledGradient, naming::SCALED_GRADIENT_ATTR),
    ];
    let mut out = Vec::new();
    for (kind, marker) in kinds {
        if let Some(names) = requested_by(func, marker)? {
            out.push(Request { kind, names });
        }
    }
    Ok(out)
}

impl Request {
    /// The companion of the lowered stencil `ir` (declared parameters `declared`): its IR and
    /// its declared parameters.
    pub fn build(
        &self,
        func: &syn::ItemFn,
        ir: &StencilIr,
        declared: &[UserParam],
    ) -> Result<(StencilIr, Vec<UserParam>), Error> {
        match self.kind {
            Kind::Adjoint => companion(func, ir, declared, &self.names),
            Kind::AdjointStep => step_companion(func, ir, declared, &self.names),
            Kind::Gradient => gradient_companion(func, ir, declared, &self.names, false),
            Kind::ScaledAdjointStep => scaled_step_companion(func, ir, declared, &self.names, false),
            Kind::CotangentScale => scaled_step_companion(func, ir, declared, &self.names, true),
            Kind::ScaledGradient => gradient_companion(func, ir, declared, &self.names, true),
        }
    }

    /// The `#[stencil]` argument that asks for the companion (`adjoint(..)`, `gradient(..)`, ...).
    pub fn attribute(&self) -> &'static str {
        match self.kind {
            Kind::Adjoint => "adjoint(..)",
            Kind::AdjointStep => "adjoint_step(..)",
            Kind::Gradient => "gradient(..)",
            Kind::ScaledAdjointStep | Kind::CotangentScale => "scaled_adjoint_step(..)",
            Kind::ScaledGradient => "scaled_gradient(..)",
        }
    }

    /// The companion's functor type (`Wave` → `WaveAdjoint`, `WaveAdjointStep`, `WaveGradient`),
    /// with `forward`'s span.
    pub fn functor_ident(&self, forward: &Ident) -> Ident {
        let suffix = match self.kind {
            Kind::Adjoint => "Adjoint",
            Kind::AdjointStep => "AdjointStep",
            Kind::Gradient => "Gradient",
            Kind::ScaledAdjointStep => "ScaledAdjointStep",
            Kind::CotangentScale => "CotangentScale",
            Kind::ScaledGradient => "ScaledGradient",
        };
        format_ident!("{}{}", forward, suffix, span = forward.span())
    }

    /// The doc comment of the companion's functor.
    pub fn doc(&self, forward: &str, companion: &StencilIr) -> String {
        match self.kind {
            Kind::Adjoint => doc(forward, companion),
            Kind::AdjointStep => step_doc(forward, companion),
            Kind::Gradient => gradient_doc(forward, companion),
            Kind::ScaledAdjointStep => scaled_step_doc(forward, companion),
            Kind::CotangentScale => scale_doc(forward, companion),
            Kind::ScaledGradient => scaled_gradient_doc(forward, companion),
        }
    }
}

fn requested_by(func: &syn::ItemFn, marker: &str) -> Result<Option<Vec<Ident>>, Error> {
    let Some(attr) = func.attrs.iter().find(|a| a.path().is_ident(marker)) else {
        return Ok(None);
    };
    let names = attr
        .parse_args_with(syn::punctuated::Punctuated::<Ident, syn::Token![,]>::parse_terminated)
        .map_err(|e| Error::new(e.span(), ErrorKind::Syntax { message: e.to_string() }))?;
    Ok(Some(names.into_iter().collect()))
}

/// The adjoint of the lowered stencil `ir` (declared parameters `declared`) with respect to the
/// fields `names`: its IR and its declared parameters (the forward's in the same places, renamed
/// as the IR's, then the mask).
pub fn companion(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
) -> Result<(StencilIr, Vec<UserParam>), Error> {
    let wrt = named(declared, names)?.into_iter().flat_map(|u| u.params.clone()).collect::<Vec<_>>();
    let adj = adjoint(ir, &wrt).map_err(|e| spanned_at_field(func, ir, declared, names, e))?;
    Ok(with_declared(adj, declared))
}

/// The adjoint step of the lowered stencil `ir` (declared parameters `declared`) whose time
/// levels are the fields `names`, newest first ([`adjoint_step`]): its IR and its declared
/// parameters (the forward's in the same places, renamed as the IR's, then the mask).
pub fn step_companion(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
) -> Result<(StencilIr, Vec<UserParam>), Error> {
    let levels = levels(declared, names)?;
    let adj = adjoint_step(ir, &levels).map_err(|e| spanned_at_field(func, ir, declared, names, e))?;
    Ok(with_declared(adj, declared))
}

/// The parameter indices of the time levels `names`, each a field that is no array.
fn levels(declared: &[UserParam], names: &[Ident]) -> Result<Vec<usize>, Error> {
    let mut levels = Vec::new();
    for (name, user) in names.iter().zip(named(declared, names)?) {
        if user.array {
            let reason = "is an array: each time level is one field";
            let kind = AdjointErrorKind::StepLevel { name: name.to_string(), reason };
            return Err(Error::spanned(name, ErrorKind::Adjoint(AdjointError { kind, site: Site::Stencil })));
        }
        levels.push(user.params.start);
    }
    Ok(levels)
}

/// The reverse time step in scaled cotangents of the lowered stencil `ir` whose levels are the
/// fields `names` ([`scaled_adjoint_step`]), or (`scale`) the stencil that writes their scale:
/// its IR and its declared parameters (the step: the forward's in the same places, renamed as
/// the IR's, no mask; the scale: the forward's scalars and fixed fields, then `cotangent_scale`).
pub fn scaled_step_companion(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
    scale: bool,
) -> Result<(StencilIr, Vec<UserParam>), Error> {
    let levels = levels(declared, names)?;
    let scaled = scaled_adjoint_step(ir, &levels).map_err(|e| spanned_at_field(func, ir, declared, names, e))?;
    if !scale {
        let (ir, mut users) = with_declared(scaled.step, declared);
        users.pop();
        return Ok((ir, users));
    }
    // The forward's scalars and fixed fields keep their declared names, renumbered in order.
    let mut users = Vec::new();
    let mut next = 0;
    for u in declared {
        let role = scaled.step.roles[u.params.start];
        if matches!(role, AdjointRole::Scalar | AdjointRole::Fixed) {
            let len = u.params.end - u.params.start;
            users.push(UserParam { params: next..next + len, ..u.clone() });
            next += len;
        }
    }
    users.push(UserParam { name: scaled.scale.ir.params[next].name.clone(), params: next..next + 1, array: false });
    Ok((scaled.scale.ir, users))
}

/// The declared parameters that `names` (an attribute's list) name, in order; an unknown name is
/// an error at that name.
fn named<'d>(declared: &'d [UserParam], names: &[Ident]) -> Result<Vec<&'d UserParam>, Error> {
    names
        .iter()
        .map(|name| {
            declared.iter().find(|u| *name == u.name).ok_or_else(|| {
                let kind = AdjointErrorKind::Unknown { name: name.to_string() };
                Error::spanned(name, ErrorKind::Adjoint(AdjointError { kind, site: Site::Stencil }))
            })
        })
        .collect()
}

/// An adjoint pass's error, spanned at the attribute's name of the field it is about (else at
/// the statement it names, or the attribute).
fn spanned_at_field(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
    e: AdjointError,
) -> Error {
    let field = match &e.kind {
        AdjointErrorKind::NotRead { field }
        | AdjointErrorKind::Written { field }
        | AdjointErrorKind::NotAField { name: field }
        | AdjointErrorKind::StepLevel { name: field, .. } => Some(field.clone()),
        _ => None,
    };
    spanned(func, ir, declared, names, e, field)
}

/// An adjoint's IR with its declared parameters: the forward's in the same places, renamed as
/// the IR's (an array whose role changed takes `{name}_bar`), then the mask.
fn with_declared(adj: Adjoint, declared: &[UserParam]) -> (StencilIr, Vec<UserParam>) {
    let taken = |name: &str| declared.iter().any(|u| u.name == name) || adj.ir.params.iter().any(|p| p.name == name);
    let mut users: Vec<UserParam> = declared
        .iter()
        .map(|u| {
            let renamed = !matches!(adj.roles[u.params.start], AdjointRole::Scalar | AdjointRole::Fixed);
            let name = if !u.array {
                adj.ir.params[u.params.start].name.clone()
            } else if renamed {
                let mut name = format!("{}{BAR_SUFFIX}", u.name);
                while taken(&name) {
                    name.push('_');
                }
                name
            } else {
                u.name.clone()
            };
            UserParam { name, ..u.clone() }
        })
        .collect();
    let mask = adj.ir.params.len() - 1;
    users.push(UserParam { name: adj.ir.params[mask].name.clone(), params: mask..mask + 1, array: false });
    (adj.ir, users)
}

/// The doc comment of the adjoint step's functor.
pub fn step_doc(forward: &str, step: &StencilIr) -> String {
    let params: Vec<&str> = step.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "One reverse time step of `#[stencil]` `{forward}` (from `#[stencil(adjoint_step(..))]`), in gather form; \
         arguments `({})`. Writes the cotangent of the newest time level (not accumulated) from the written \
         field's cotangents one step later (`_bar`) and `j` steps later (`_bar_j`, in the places of the older \
         levels); `range_mask` is nonzero exactly on the forward launch's range. Gives the bits of the \
         accumulating adjoint run over a zeroed field.",
        params.join(", ")
    )
}

/// The gradient stencil of the lowered stencil `ir` (declared parameters `declared`) with respect
/// to the parameter fields `names` ([`gradient`]): its IR and its declared parameters (the
/// forward's in the same places, written fields renamed as cotangents, then one `_bar` per name
/// and the mask).
pub fn gradient_companion(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
    scaled: bool,
) -> Result<(StencilIr, Vec<UserParam>), Error> {
    let mut wrt = Vec::new();
    let mut users = Vec::new();
    for name in names {
        let Some(user) = declared.iter().find(|u| *name == u.name) else {
            let kind = AdjointErrorKind::GradientParam {
                name: name.to_string(),
                reason: "is not a parameter of this stencil",
            };
            return Err(Error::spanned(name, ErrorKind::Adjoint(AdjointError { kind, site: Site::Stencil })));
        };
        wrt.extend(user.params.clone());
        users.push(user);
    }
    let derived = if scaled { scaled_gradient(ir, &wrt) } else { gradient(ir, &wrt) };
    let adj = derived.map_err(|e| {
        let field = match &e.kind {
            AdjointErrorKind::GradientParam { name, .. } => Some(name.clone()),
            _ => None,
        };
        spanned(func, ir, declared, names, e, field)
    })?;
    let n = ir.params.len();
    let taken = |name: &str| declared.iter().any(|u| u.name == name) || adj.ir.params.iter().any(|p| p.name == name);
    let bar_name = |u: &UserParam, first: usize| {
        if !u.array {
            return adj.ir.params[first].name.clone();
        }
        let mut name = format!("{}{BAR_SUFFIX}", u.name);
        while taken(&name) {
            name.push('_');
        }
        name
    };
    let mut out: Vec<UserParam> = declared
        .iter()
        .map(|u| {
            let cotangent = adj.roles[u.params.start] == AdjointRole::Cotangent;
            let name = if cotangent { bar_name(u, u.params.start) } else { u.name.clone() };
            UserParam { name, ..u.clone() }
        })
        .collect();
    let mut next = n;
    for u in users {
        let len = u.params.end - u.params.start;
        out.push(UserParam { name: bar_name(u, next), params: next..next + len, array: u.array });
        next += len;
    }
    // The scale (a scaled gradient's) and the mask.
    for last in next..adj.ir.params.len() {
        out.push(UserParam { name: adj.ir.params[last].name.clone(), params: last..last + 1, array: false });
    }
    Ok((adj.ir, out))
}

/// The doc comment of the scaled step's functor.
pub fn scaled_step_doc(forward: &str, step: &StencilIr) -> String {
    let params: Vec<&str> = step.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "One reverse time step of `#[stencil]` `{forward}` in scaled cotangents `μ = λ / cotangent_scale` (from \
         `#[stencil(scaled_adjoint_step(..))]`); arguments `({})`. Writes the newest level's `μ` from the written \
         field's one step later (`_bar`) and `j` steps later (`_bar_j`). A plain stencil, without a mask: `μ` must \
         be zero outside the forward range (fields that start zeroed, written only by steps run over that range).",
        params.join(", ")
    )
}

/// The doc comment of the scale's functor.
pub fn scale_doc(forward: &str, scale: &StencilIr) -> String {
    let params: Vec<&str> = scale.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "Writes the scale `ρ` of the scaled cotangents of `#[stencil]` `{forward}` (from \
         `#[stencil(scaled_adjoint_step(..))]`): the cotangent is `λ = ρ μ`, so a value added to `λ` is added to `μ` \
         divided by `ρ`; arguments `({})`.",
        params.join(", ")
    )
}

/// The doc comment of the scaled gradient's functor.
pub fn scaled_gradient_doc(forward: &str, gradient: &StencilIr) -> String {
    let params: Vec<&str> = gradient.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "The gradient of `#[stencil]` `{forward}` (from `#[stencil(scaled_gradient(..))]`) reading the written \
         field's scaled cotangent `μ` (`out_bar`) and its scale `cotangent_scale` (`λ = ρ μ`); arguments `({})`. \
         Otherwise as the gradient: each `_bar` parameter field accumulated into, `range_mask` nonzero exactly on \
         the forward launch's range.",
        params.join(", ")
    )
}

/// The doc comment of the gradient's functor.
pub fn gradient_doc(forward: &str, gradient: &StencilIr) -> String {
    let params: Vec<&str> = gradient.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "The gradient of `#[stencil]` `{forward}` with respect to its parameter fields (from \
         `#[stencil(gradient(..))]`), in gather form; arguments `({})`. The forward's arguments at the forward \
         step's values, each written field replaced by its cotangent (`out_bar`); each parameter's `_bar` field \
         is accumulated into (`c_bar[q] += out_bar · ∂out/∂c`); `range_mask` is nonzero exactly on the forward \
         launch's range.",
        params.join(", ")
    )
}

/// The doc comment of the adjoint's functor.
pub fn doc(forward: &str, adjoint: &StencilIr) -> String {
    let params: Vec<&str> = adjoint.params.iter().map(|p| p.name.as_str()).collect();
    format!(
        "The adjoint of `#[stencil]` `{forward}` (from `#[stencil(adjoint(..))]`), in gather form; arguments \
         `({})`. Each `_bar` field that is written is accumulated into (`u_bar[q] += ...`); `range_mask` is \
         nonzero exactly on the forward launch's range. Run it over the forward range (inputs outside it held \
         fixed) or over that range grown by the reach (every input a variable).",
        params.join(", ")
    )
}

/// The items of a generic adjoint functor `name<param>` (the forward's own boilerplate, by
/// hand: derives would ask the element type for each trait).
pub fn generic_functor(vis: &syn::Visibility, name: &Ident, param: &Ident, doc: &str) -> TokenStream {
    let text = name.to_string();
    quote! {
        #[doc = #doc]
        #vis struct #name<#param>(::core::marker::PhantomData<fn() -> #param>);
        impl<#param> #name<#param> {
            /// The functor (for the element type named by `::<f32>` or `::<f64>`).
            #vis const fn new() -> Self {
                #name(::core::marker::PhantomData)
            }
        }
        impl<#param> ::core::clone::Clone for #name<#param> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<#param> ::core::marker::Copy for #name<#param> {}
        impl<#param> ::core::default::Default for #name<#param> {
            fn default() -> Self {
                Self::new()
            }
        }
        impl<#param> ::core::fmt::Debug for #name<#param> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(#text)
            }
        }
        impl<#param> ::core::cmp::PartialEq for #name<#param> {
            fn eq(&self, _: &Self) -> bool {
                true
            }
        }
        impl<#param> ::core::cmp::Eq for #name<#param> {}
        impl<#param> ::core::hash::Hash for #name<#param> {
            fn hash<H: ::core::hash::Hasher>(&self, _: &mut H) {}
        }
    }
}

/// The tokens of the statement of `func`'s body that `site` names: `let name = ..` (a shadowed
/// local's IR name carries a suffix `_N`), `name = ..` or `out[idx] = ..` / `out[idx] += ..`,
/// or the first `if` condition.
fn locate(func: &syn::ItemFn, site: &Site) -> Option<TokenStream> {
    struct Finder<'s> {
        site: &'s Site,
        names: Vec<String>,
        found: Option<TokenStream>,
    }
    impl Finder<'_> {
        fn take(&mut self, tokens: &impl ToTokens) {
            if self.found.is_none() {
                self.found = Some(tokens.to_token_stream());
            }
        }
        fn is_target(&self, e: &syn::Expr) -> bool {
            let target = match e {
                syn::Expr::Index(i) => &*i.expr,
                other => other,
            };
            matches!(target, syn::Expr::Path(p) if p.path.get_ident().is_some_and(|i| self.names.contains(&i.to_string())))
        }
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            let mut pat = &l.pat;
            while let syn::Pat::Type(t) = pat {
                pat = &t.pat;
            }
            if let (Site::Local(_), syn::Pat::Ident(i)) = (self.site, pat) {
                if self.names.contains(&i.ident.to_string()) {
                    self.take(l);
                }
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
            if self.is_target(&a.left) && !matches!(self.site, Site::Condition) {
                self.take(a);
            }
            syn::visit::visit_expr_assign(self, a);
        }
        fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
            let compound = matches!(
                b.op,
                syn::BinOp::AddAssign(_)
                    | syn::BinOp::SubAssign(_)
                    | syn::BinOp::MulAssign(_)
                    | syn::BinOp::DivAssign(_)
            );
            if compound && self.is_target(&b.left) && !matches!(self.site, Site::Condition) {
                self.take(b);
            }
            syn::visit::visit_expr_binary(self, b);
        }
        fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
            if matches!(self.site, Site::Condition) {
                self.take(&i.cond);
            }
            syn::visit::visit_expr_if(self, i);
        }
    }
    let names = match site {
        Site::Local(name) => {
            let base = name.rsplit_once('_').filter(|(_, n)| n.parse::<u32>().is_ok()).map(|(b, _)| b.to_string());
            std::iter::once(name.clone()).chain(base).collect()
        }
        Site::Store(field) => vec![field.clone()],
        Site::Condition => Vec::new(),
        Site::Stencil => return None,
    };
    let mut finder = Finder { site, names, found: None };
    finder.visit_block(&func.block);
    finder.found
}

/// The error `e` of the adjoint or gradient pass, spanned where it is: at the statement of the
/// body it names, or for an error of the whole stencil about `field`, at that name in the
/// attribute (else at the attribute's first name).
fn spanned(
    func: &syn::ItemFn,
    ir: &StencilIr,
    declared: &[UserParam],
    names: &[Ident],
    e: AdjointError,
    field: Option<String>,
) -> Error {
    let tokens = match (&e.site, field) {
        (Site::Stencil, Some(field)) => {
            let user =
                declared.iter().find(|u| ir.params[u.params.start..u.params.end].iter().any(|p| p.name == field));
            names.iter().find(|n| user.is_some_and(|u| **n == u.name)).map(|n| n.to_token_stream())
        }
        (Site::Stencil, None) => None,
        (site, _) => locate(func, site),
    };
    let tokens = tokens.unwrap_or_else(|| names.first().map_or_else(TokenStream::new, |n| n.to_token_stream()));
    Error::spanned(&tokens, ErrorKind::Adjoint(e))
}
