//! What `#[stencil]` expands to: a unit functor type named after the function (CamelCase)
//! implementing the runtime's `Stencil<D>` trait, with the stencil's metadata, its IR as data
//! (the serialised form the runtime decodes to print CUDA) and the CPU loop nest; and what
//! `#[stencil_fn]` expands to: the helper function itself and its `macro_rules!` twin (see
//! [`super::collect`]).

use super::adjoint;
use super::error::{Error, ErrorKind};
use super::lower::generic::{element_parameter, instantiate, ELEMENT_TYPES};
use super::lower::helpers::{called_names, check_helper};
use super::lower::{declared_params, lower_with_constants, Constant, UserParam};
use crate::ir::{ParamKind, ScalarType, SweepOrder, IR_FORMAT};
use crate::pipeline::{self, prepare};
use crate::printer::rust_nest::{param_type, print_run_host};
use crate::{naming, VERSION};
use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// What the collected helpers are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A `#[stencil]` function: expanded to its functor once every helper is collected.
    Stencil,
    /// A `#[stencil_fn]` helper: checked once every helper it calls is collected.
    Helper,
}

impl Target {
    fn keyword(self) -> &'static str {
        match self {
            Target::Stencil => "stencil",
            Target::Helper => "stencil_fn",
        }
    }
}

/// The call of the next helper's macro: `next! { @collect mode (runtime) { target } { helper }* }`.
/// `next` keeps the span of the call in the user's code, so a name that is no helper is reported
/// there; `runtime` is the path the generated code names the runtime by ([`runtime_path`]).
pub fn invocation(
    target: Target,
    runtime: &TokenStream,
    item: &TokenStream,
    collected: &[TokenStream],
    next: &Ident,
) -> TokenStream {
    let mode = Ident::new(target.keyword(), proc_macro2::Span::call_site());
    quote! { #next ! { @collect #mode (#runtime) { #item } #({ #collected })* } }
}

/// The path generated code names the runtime crate by: `crate = path` of the attribute
/// (`#[stencil(crate = my_lib::stencil_runtime)]`, for a crate that reaches the runtime through
/// another crate's re-export), else `found`: what the macro crate found in the user's
/// `Cargo.toml` (`::stencils` for `stencils = { package = "stencil-runtime", .. }`).
pub fn runtime_path(target: Target, attr: TokenStream, found: TokenStream) -> Result<TokenStream, Error> {
    Ok(Attribute::parse(target, attr)?.runtime.unwrap_or(found))
}

/// The arguments of `#[stencil(...)]` / `#[stencil_fn(...)]`, comma-separated in any order:
/// `crate = path` (both), `sweep = forward | backward`, `adjoint(u, ..)`, `adjoint_step(u, ..)`,
/// `gradient(c, ..)`, `scaled_adjoint_step(u, ..)`, `scaled_gradient(c, ..)` and
/// `portable_math` and `fma` (`#[stencil]` only).
struct Attribute {
    runtime: Option<TokenStream>,
    sweep: Option<SweepOrder>,
    adjoint: Option<TokenStream>,
    adjoint_step: Option<TokenStream>,
    gradient: Option<TokenStream>,
    scaled_adjoint_step: Option<TokenStream>,
    scaled_gradient: Option<TokenStream>,
    portable_math: bool,
    fma: bool,
}

impl Attribute {
    fn parse(target: Target, attr: TokenStream) -> Result<Attribute, Error> {
        let mut parsed = Attribute {
            runtime: None,
            sweep: None,
            adjoint: None,
            adjoint_step: None,
            gradient: None,
            scaled_adjoint_step: None,
            scaled_gradient: None,
            portable_math: false,
            fma: false,
        };
        if attr.is_empty() {
            return Ok(parsed);
        }
        let unsupported =
            |span: proc_macro2::Span| Error::new(span, ErrorKind::AttributeArgument { attribute: target.keyword() });
        // (key, its span, the value's tokens), in order.
        let mut args: Vec<(&'static str, proc_macro2::Span, TokenStream)> = Vec::new();
        let parser = |input: syn::parse::ParseStream| -> syn::Result<()> {
            loop {
                if input.peek(syn::Token![crate]) {
                    let key = input.parse::<syn::Token![crate]>()?;
                    input.parse::<syn::Token![=]>()?;
                    let path: syn::Path =
                        if input.peek(syn::LitStr) { input.parse::<syn::LitStr>()?.parse()? } else { input.parse()? };
                    args.push(("crate", key.span, quote!(#path)));
                } else {
                    let key: Ident = input.parse()?;
                    let listed = [
                        ("adjoint", "adjoint"),
                        ("adjoint_step", "adjoint_step"),
                        ("gradient", "gradient"),
                        ("scaled_adjoint_step", "scaled_adjoint_step"),
                        ("scaled_gradient", "scaled_gradient"),
                    ];
                    if let Some(&(_, word)) =
                        listed.iter().find(|(w, _)| key == w).filter(|_| target == Target::Stencil)
                    {
                        let fields;
                        syn::parenthesized!(fields in input);
                        let fields: TokenStream = fields.parse()?;
                        args.push((word, key.span(), fields));
                    } else if key == "portable_math" && target == Target::Stencil {
                        args.push(("portable_math", key.span(), quote!()));
                    } else if key == "fma" && target == Target::Stencil {
                        args.push(("fma", key.span(), quote!()));
                    } else if key != "sweep" || target != Target::Stencil {
                        return Err(syn::Error::new(key.span(), "argument"));
                    } else {
                        input.parse::<syn::Token![=]>()?;
                        let word: Ident = input.parse()?;
                        args.push(("sweep", key.span(), quote!(#word)));
                    }
                }
                if input.is_empty() {
                    return Ok(());
                }
                input.parse::<syn::Token![,]>()?;
                if input.is_empty() {
                    return Ok(());
                }
            }
        };
        syn::parse::Parser::parse2(parser, attr.clone()).map_err(|e| unsupported(e.span()))?;
        for (key, span, value) in args {
            let twice = Error::new(span, ErrorKind::AttributeTwice { attribute: target.keyword(), key });
            if key == "portable_math" || key == "fma" {
                let flag = if key == "fma" { &mut parsed.fma } else { &mut parsed.portable_math };
                if std::mem::replace(flag, true) {
                    return Err(twice);
                }
                continue;
            }
            if matches!(
                key,
                "crate" | "adjoint" | "adjoint_step" | "gradient" | "scaled_adjoint_step" | "scaled_gradient"
            ) {
                let slot = match key {
                    "crate" => &mut parsed.runtime,
                    "adjoint" => &mut parsed.adjoint,
                    "adjoint_step" => &mut parsed.adjoint_step,
                    "scaled_adjoint_step" => &mut parsed.scaled_adjoint_step,
                    "scaled_gradient" => &mut parsed.scaled_gradient,
                    _ => &mut parsed.gradient,
                };
                if slot.replace(value).is_some() {
                    return Err(twice);
                }
                continue;
            }
            let word = value.to_string();
            let order = SweepOrder::from_word(&word)
                .ok_or_else(|| Error::spanned(&value, ErrorKind::SweepOrder { found: word.clone() }))?;
            if parsed.sweep.replace(order).is_some() {
                return Err(twice);
            }
        }
        Ok(parsed)
    }
}

/// Expands `#[stencil]` on `item`: the functor, or, if the body calls helpers, the first step
/// of collecting their bodies ([`super::collect`]). `runtime` names the runtime crate
/// ([`runtime_path`]). Errors carry the span of the offending tokens.
pub fn expand(attr: TokenStream, item: TokenStream, runtime: TokenStream) -> Result<TokenStream, Error> {
    let mut func: syn::ItemFn =
        syn::parse2(item).map_err(|e| Error::new(e.span(), ErrorKind::Syntax { message: e.to_string() }))?;
    let runtime = apply_attribute(attr, &mut func)?.unwrap_or(runtime);
    match called_names(&func).first() {
        Some(next) => Ok(invocation(Target::Stencil, &runtime, &quote!(#func), &[], next)),
        None => expand_stencil(&func, &[], &runtime),
    }
}

/// Applies the arguments of `#[stencil(..)]` to `func`: a sweep order is left on it as an
/// attribute the lowering reads (also through the collection of helpers; the functor does not
/// keep it). Returns the runtime path `crate = ..` names, if any.
pub fn apply_attribute(attr: TokenStream, func: &mut syn::ItemFn) -> Result<Option<TokenStream>, Error> {
    let attr = Attribute::parse(Target::Stencil, attr)?;
    if let Some(order) = attr.sweep {
        let marker = format_ident!("{}", naming::SWEEP_ATTR);
        let word = format_ident!("{}", order.word());
        func.attrs.push(syn::parse_quote!(#[#marker(#word)]));
    }
    if let Some(fields) = attr.adjoint {
        let marker = format_ident!("{}", naming::ADJOINT_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker(#fields)]));
    }
    if let Some(fields) = attr.adjoint_step {
        let marker = format_ident!("{}", naming::ADJOINT_STEP_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker(#fields)]));
    }
    if let Some(fields) = attr.gradient {
        let marker = format_ident!("{}", naming::GRADIENT_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker(#fields)]));
    }
    if let Some(fields) = attr.scaled_adjoint_step {
        let marker = format_ident!("{}", naming::SCALED_ADJOINT_STEP_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker(#fields)]));
    }
    if let Some(fields) = attr.scaled_gradient {
        let marker = format_ident!("{}", naming::SCALED_GRADIENT_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker(#fields)]));
    }
    if attr.portable_math {
        let marker = format_ident!("{}", naming::PORTABLE_MATH_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker]));
    }
    if attr.fma {
        let marker = format_ident!("{}", naming::FMA_ATTR);
        func.attrs.push(syn::parse_quote!(#[#marker]));
    }
    Ok(attr.runtime)
}

/// Expands `#[stencil_fn]` on `item`: the function itself (`#[inline(always)]`, callable from
/// ordinary Rust), its `macro_rules!` twin carrying its tokens to the stencils that call it, and
/// its check as a helper (errors only), at once or after collecting the helpers it calls.
pub fn expand_stencil_fn(attr: TokenStream, item: TokenStream, runtime: TokenStream) -> TokenStream {
    let rt = match runtime_path(Target::Helper, attr, runtime) {
        Ok(rt) => rt,
        Err(e) => return e.to_syn().to_compile_error(),
    };
    let func: syn::ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let name = &func.sig.ident;
    let carried = syn::ItemFn { attrs: Vec::new(), vis: syn::Visibility::Inherited, ..func.clone() };
    let twin = format_ident!("{}", naming::helper_macro(&name.to_string(), &quote!(#carried).to_string()));
    let own = name.to_string();
    let check = match called_names(&func).into_iter().find(|n| *n != own) {
        Some(next) => invocation(Target::Helper, &rt, &quote!(#carried), &[], &next),
        None => match check_helper(&carried, std::slice::from_ref(&carried)) {
            Ok(()) => quote!(),
            Err(e) => e.to_syn().to_compile_error(),
        },
    };
    // The twin is exported (at the crate root, under a name no other helper takes) and imported
    // next to the function under its name, as public as the function (at least crate-wide), so
    // `use other_crate::physics::flux;` brings both. It calls back the runtime by the path the
    // calling stencil's crate gives it (carried in the state), not by this crate's.
    let reexport = match &func.vis {
        syn::Visibility::Public(_) => quote!(pub),
        _ => quote!(pub(crate)),
    };
    // A helper generic over its element type is, as Rust, its `f64` instantiation (Rust would
    // need bounds on `T` for its arithmetic and literals): host code and tests call it on f64;
    // stencils inline it per instantiation.
    // Generics it cannot take: the check below says so, and no Rust function adds errors of its own.
    let plain = match element_parameter(&func) {
        Ok(Some(param)) => Some(instantiate(&func, &param, ScalarType::F64)),
        Ok(None) => Some(func.clone()),
        Err(_) => None,
    };
    let plain = plain.map(|plain| {
        quote! {
            #[inline(always)]
            #[allow(dead_code)]
            #plain
        }
    });
    quote! {
        #plain

        #[doc(hidden)]
        #[macro_export]
        #[allow(non_local_definitions)]
        macro_rules! #twin {
            (@collect $mode:ident ($($rt:tt)*) $($state:tt)*) => {
                $($rt)*::__private::stencil_collect! { $mode ($($rt)*) $($state)* { #carried } }
            };
        }
        #[doc(hidden)]
        #[allow(unused_imports)]
        #reexport use #twin as #name;

        #check
    }
}

/// Expands a `#[stencil]` function whose helpers (every one its calls reach) are `helpers`;
/// the generated code names the runtime crate `rt`.
/// A helper that fails its own check makes the stencil say only that (the helper's expansion
/// reports the error itself, once). A stencil generic over its element type (`fn heat<T>`) is
/// lowered for `f32` and for `f64`: one functor type `Heat<T>`, one `Stencil` impl each.
pub fn expand_stencil(func: &syn::ItemFn, helpers: &[syn::ItemFn], rt: &TokenStream) -> Result<TokenStream, Error> {
    if let Some(broken) = helpers.iter().find(|h| check_helper(h, helpers).is_err()) {
        let kind =
            ErrorKind::BrokenHelper { stencil: func.sig.ident.to_string(), helper: broken.sig.ident.to_string() };
        return Err(Error::spanned(&func.sig.ident, kind));
    }
    let vis = &func.vis;
    let attrs: Vec<_> = func.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let format = Literal::u32_unsuffixed(IR_FORMAT);
    let mismatch = format!(
        "stencil-macros {VERSION} writes stencil IR format {IR_FORMAT}, which this stencil-runtime does not read: \
         depend on stencil-runtime {VERSION} (the same release as stencil-macros)"
    );
    let check = quote! { const _: () = ::core::assert!(#rt::__private::IR_FORMAT == #format, #mismatch); };
    let requests = adjoint::requests(func)?;
    let Some(param) = element_parameter(func)? else {
        let (functor, impls) = plain_stencil(func, helpers, rt, &requests)?;
        return Ok(quote! {
            #(#attrs)*
            #functor

            #check
            #impls
        });
    };
    let mut impls = Vec::new();
    // Per companion: its impls (one per element type) and its doc.
    let mut companions: Vec<(Vec<TokenStream>, String)> =
        requests.iter().map(|_| (Vec::new(), String::new())).collect();
    let mut name = String::new();
    for elem in ELEMENT_TYPES {
        let instance = instantiate(func, &param, elem);
        let (ir, constants) = lower_with_constants(&instance, helpers).map_err(|e| Error {
            kind: ErrorKind::Instantiation {
                param: param.to_string(),
                elem: elem.rust_name(),
                error: Box::new(e.kind),
            },
            ..e
        })?;
        refuse_constants(&constants, &requests)?;
        let declared = declared_params(&instance)?;
        let functor = format_ident!("{}", ir.functor_name(), span = func.sig.ident.span());
        let t = format_ident!("{}", elem.rust_name());
        impls.push(stencil_impl(&finish(func, &ir)?, &declared, &constants, &quote!(#functor<#t>), rt));
        for (request, (impls, doc)) in requests.iter().zip(&mut companions) {
            let (companion, companion_declared) = request.build(&instance, &ir, &declared)?;
            let companion_name = request.functor_ident(&functor);
            impls.push(stencil_impl(
                &finish(func, &companion)?,
                &companion_declared,
                &[],
                &quote!(#companion_name<#t>),
                rt,
            ));
            *doc = request.doc(&ir.name, &companion);
        }
        name = ir.functor_name();
    }
    let functor = format_ident!("{}", name, span = func.sig.ident.span());
    let functor_name = name.clone();
    let companions = requests.iter().zip(&companions).map(|(request, (impls, doc))| {
        let functor = adjoint::generic_functor(vis, &request.functor_ident(&functor), &param, doc);
        quote! { #functor #(#impls)* }
    });
    let companions = quote! { #(#companions)* };
    let doc = format!(
        "Functor of the `#[stencil]` function `{}`, generic over its element type `{param}` (`f32` or `f64`): \
         run it with `range.run({functor}::<f64>::new(), (args...))`.",
        func.sig.ident
    );
    let functor_def = generic_functor_def(vis, &functor, &param, &doc, &functor_name);
    Ok(quote! {
        #(#attrs)*
        #functor_def

        #check
        #(#impls)*
        #companions
    })
}

/// The functor type of a stencil generic over its element type `param`, with its trait impls
/// written out (derives would ask the element type for each trait, `f32: Eq`).
fn generic_functor_def(
    vis: &syn::Visibility,
    functor: &Ident,
    param: &Ident,
    doc: &str,
    functor_name: &str,
) -> TokenStream {
    quote! {
        #[doc = #doc]
        #vis struct #functor<#param>(::core::marker::PhantomData<fn() -> #param>);

        impl<#param> #functor<#param> {
            /// The functor (for the element type named by `::<f32>` or `::<f64>`).
            #vis const fn new() -> Self {
                #functor(::core::marker::PhantomData)
            }
        }
        impl<#param> ::core::clone::Clone for #functor<#param> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<#param> ::core::marker::Copy for #functor<#param> {}
        impl<#param> ::core::default::Default for #functor<#param> {
            fn default() -> Self {
                Self::new()
            }
        }
        impl<#param> ::core::fmt::Debug for #functor<#param> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(#functor_name)
            }
        }
        impl<#param> ::core::cmp::PartialEq for #functor<#param> {
            fn eq(&self, _: &Self) -> bool {
                true
            }
        }
        impl<#param> ::core::cmp::Eq for #functor<#param> {}
        impl<#param> ::core::hash::Hash for #functor<#param> {
            fn hash<H: ::core::hash::Hasher>(&self, _: &mut H) {}
        }
    }
}

/// A stencil that is not generic over its element type: its functor's definition, and its
/// `Stencil` impl with those of its adjoint and gradient functors where asked for.
fn plain_stencil(
    func: &syn::ItemFn,
    helpers: &[syn::ItemFn],
    rt: &TokenStream,
    requests: &[adjoint::Request],
) -> Result<(TokenStream, TokenStream), Error> {
    let vis = &func.vis;
    let (ir, constants) = lower_with_constants(func, helpers)?;
    refuse_constants(&constants, requests)?;
    let declared = declared_params(func)?;
    let functor = format_ident!("{}", ir.functor_name(), span = func.sig.ident.span());
    let doc =
        format!("Functor of the `#[stencil]` function `{}`: run it with `range.run({functor}, (args...))`.", ir.name);
    let mut companions = Vec::new();
    for request in requests {
        let (companion, companion_declared) = request.build(func, &ir, &declared)?;
        let (name, doc) = (request.functor_ident(&functor), request.doc(&ir.name, &companion));
        let companion_impl = stencil_impl(&finish(func, &companion)?, &companion_declared, &[], &quote!(#name), rt);
        let def = unit_functor(vis, &name, &doc);
        companions.push(quote! { #def #companion_impl });
    }
    let stencil_impl = stencil_impl(&finish(func, &ir)?, &declared, &constants, &quote!(#functor), rt);
    Ok((unit_functor(vis, &functor, &doc), quote! { #stencil_impl #(#companions)* }))
}

/// Refuses module constants in a stencil that asks for an adjoint or gradient companion (whose
/// parameters are built from the declared ones).
fn refuse_constants(constants: &[Constant], requests: &[adjoint::Request]) -> Result<(), Error> {
    match (constants.first(), requests.first()) {
        (Some(c), Some(r)) => Err(Error::spanned(
            &c.ident,
            ErrorKind::ConstantWithCompanion { name: c.ident.to_string(), companion: r.attribute().into() },
        )),
        _ => Ok(()),
    }
}

/// A lowered stencil (or its adjoint or gradient) as its functor prints it: with
/// `#[stencil(fma)]`, its products added in an expression fused ([`crate::passes::contract()`]);
/// with `#[stencil(portable_math)]`, its math functions computed by the stencil's own arithmetic
/// ([`crate::passes::portable_math()`], after the fusion: its own arithmetic stays unfused).
fn finish(func: &syn::ItemFn, ir: &crate::ir::StencilIr) -> Result<crate::ir::StencilIr, Error> {
    let marked = |name: &str| func.attrs.iter().any(|a| a.path().is_ident(name));
    let ir = if marked(naming::FMA_ATTR) { crate::passes::contract(ir) } else { ir.clone() };
    if !marked(naming::PORTABLE_MATH_ATTR) {
        return Ok(ir);
    }
    crate::passes::portable_math(&ir)
        .map_err(|f| Error::spanned(&func.sig.ident, ErrorKind::NotPortable { func: f.rust_name() }))
}

/// The unit struct of a functor that is not generic, with its documentation and derives.
fn unit_functor(vis: &syn::Visibility, name: &Ident, doc: &str) -> TokenStream {
    quote! {
        #[doc = #doc]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #vis struct #name;
    }
}

/// The `Stencil` impl of one lowered stencil for the functor type `functor`; `declared` are its
/// parameters as the function declares them (an array parameter is one argument of the
/// functor, one IR parameter per element), `constants` the module constants it reads (its last
/// IR parameters, set from the constants themselves, not from the functor's arguments).
fn stencil_impl(
    ir: &crate::ir::StencilIr,
    declared: &[UserParam],
    constants: &[Constant],
    functor: &TokenStream,
    rt: &TokenStream,
) -> TokenStream {
    let dim = Literal::usize_unsuffixed(ir.dim);
    let lt = quote!('a);
    let exec = format_ident!("{}", naming::EXEC);
    let exec = quote!(#exec);
    let [range, args] = [naming::RANGE, naming::ARGS].map(|n| format_ident!("{}", n));
    // The functor's facts (reach, flops) are those of the IR with its point functions inlined;
    // its serialised IR keeps them (the runtime inlines them for most kernels, the depot kernel
    // keeps their values on chip), and so does the CPU nest, computing each once per point.
    let analysis = prepare(ir, pipeline::Target::Facts).analysis;
    let arg_types = declared.iter().map(|u| {
        let t = param_type(ir.params[u.params.start].kind, ir.dim, rt, &lt, &exec);
        if u.array {
            let n = Literal::usize_unsuffixed(u.params.len());
            quote!([#t; #n])
        } else {
            t
        }
    });
    let arg_names: Vec<_> = ir.params.iter().map(|p| format_ident!("{}", p.name)).collect();
    let unpack = |source: &Ident| {
        let names = declared.iter().map(|u| format_ident!("{}", u.name));
        let arrays = declared.iter().filter(|u| u.array).map(|u| {
            let name = format_ident!("{}", u.name);
            let elems = u.params.clone().map(|i| &arg_names[i]);
            quote! { let [#(#elems),*] = #name; }
        });
        // Each constant bound to its parameter's name with the type the stencil gives it, at the
        // constant's own span: a constant of another type is a compile error there.
        let constants = constants.iter().map(|c| {
            let p = ir.params.iter().find(|p| p.name == c.param).expect("a constant's parameter is the IR's");
            let (name, ident) = (format_ident!("{}", c.param), &c.ident);
            let ParamKind::Scalar(t) = p.kind else { unreachable!("a constant's parameter is a scalar") };
            let t = format_ident!("{}", t.rust_name());
            quote_spanned! { ident.span() => let #name: #t = #ident; }
        });
        quote! { let (#(#names,)*) = #source; #(#arrays)* #(#constants)* }
    };
    let erased = ir.params.iter().zip(&arg_names).map(|(p, n)| match p.kind {
        ParamKind::Scalar(_) => quote!(#rt::__private::ScalarArg::scalar_arg::<#dim>(#n)),
        ParamKind::Held(t) => {
            let t = format_ident!("{}", t.rust_name());
            quote!(#rt::__private::held_arg::<_, #t, #dim>(#n))
        }
        ParamKind::Field(f) => {
            let t = format_ident!("{}", f.elem.rust_name());
            quote!(#rt::__private::field_arg::<#t, #dim, _>(&*#n))
        }
        ParamKind::Reduction(_) => quote!(#rt::__private::reduction_arg::<#dim>(#n)),
    });
    let unpack_erased = unpack(&format_ident!("args"));
    // `map_args`: each argument of the tuple with its fields taken through the map (scalars
    // copied, reductions reborrowed), so that one launch's arguments become those of a part.
    let mapped = declared.iter().enumerate().map(|(k, u)| {
        let at = syn::Index::from(k);
        let one = |v: TokenStream| match ir.params[u.params.start].kind {
            ParamKind::Scalar(_) => v,
            ParamKind::Held(_) => quote!(map.held(#v)),
            ParamKind::Field(f) => {
                let t = format_ident!("{}", f.elem.rust_name());
                if f.writable {
                    quote!(map.field_mut::<#t, #dim>(&mut **#v))
                } else {
                    quote!(map.field::<#t, #dim>(#v))
                }
            }
            ParamKind::Reduction(_) => quote!(&mut **#v),
        };
        match (ir.params[u.params.start].kind, u.array) {
            (ParamKind::Scalar(_), _) => quote!(args.#at),
            (ParamKind::Held(_), _) => one(quote!(args.#at)),
            (ParamKind::Field(f), false) if !f.writable => one(quote!(args.#at)),
            (_, false) => one(quote!((&mut args.#at))),
            (ParamKind::Field(f), true) if !f.writable => {
                let body = one(quote!(v));
                quote!(args.#at.map(|v| #body))
            }
            (_, true) => {
                let body = one(quote!(v));
                quote!(args.#at.each_mut().map(|v| #body))
            }
        }
    });
    let name = &ir.name;
    let fields = analysis.fields.iter().map(|fa| {
        let (n, lo, hi, w) = (&fa.name, fa.lo, fa.hi, fa.writable);
        quote! { #rt::FieldInfo { name: #n, lo: [#(#lo),*], hi: [#(#hi),*], writable: #w } }
    });
    let encoded = ir.encode();
    let nest = prepare(ir, pipeline::Target::HostNest);
    let run_host = print_run_host(&nest.ir, &nest.analysis, &unpack(&args), rt);
    quote! {
        impl #rt::Stencil<#dim> for #functor {
            type Args<'a, #exec: #rt::Executor> = (#(#arg_types,)*);
            const INFO: #rt::StencilInfo = #rt::StencilInfo { name: #name, fields: &[#(#fields),*] };
            const IR: &'static str = #encoded;

            fn source_ir() -> &'static #rt::codegen::StencilIr {
                static IR: ::std::sync::OnceLock<#rt::codegen::StencilIr> = ::std::sync::OnceLock::new();
                IR.get_or_init(|| #rt::__private::decode_ir(#name, <Self as #rt::Stencil<#dim>>::IR))
            }

            fn ir() -> &'static #rt::codegen::StencilIr {
                static IR: ::std::sync::OnceLock<#rt::codegen::StencilIr> = ::std::sync::OnceLock::new();
                IR.get_or_init(|| {
                    let source = <Self as #rt::Stencil<#dim>>::source_ir();
                    #rt::codegen::pipeline::prepare(source, #rt::codegen::pipeline::Target::Facts).ir.into_owned()
                })
            }

            fn erase_args<#exec: #rt::Executor>(args: Self::Args<'_, #exec>) -> ::std::vec::Vec<#rt::ArgValue<'_, #dim>> {
                #unpack_erased
                ::std::vec![#(#erased),*]
            }

            #[allow(unused_variables, clippy::all)]
            fn map_args<'m, 'b: 'm, X: #rt::Executor, Y: #rt::Executor, M: #rt::__private::FieldMap<X, Y>>(
                args: &'m mut Self::Args<'b, X>,
                map: &M,
            ) -> Self::Args<'m, Y> {
                (#(#mapped,)*)
            }

            #[allow(unused_variables, unused_mut, unused_parens, clippy::all, clippy::pedantic, clippy::nursery)]
            fn run_host(#range: &#rt::Loop<#dim>, #args: Self::Args<'_, #rt::Host>) -> ::core::result::Result<(), #rt::LaunchError> {
                #run_host
            }
        }
    }
}
