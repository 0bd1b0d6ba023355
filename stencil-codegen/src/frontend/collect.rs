//! How `#[stencil]` sees the bodies of the `#[stencil_fn]` helpers it calls.
//!
//! A proc macro sees only the item it is attached to, so each helper carries its own tokens in a
//! `macro_rules!` twin (emitted by [`super::expand::expand_stencil_fn`], exported at the crate root
//! under a name unique to the helper, and imported next to the function under the function's
//! name, `pub` for a `pub` helper, so a `use` that brings the function into scope, from this
//! crate or another, brings the macro too). A stencil that calls bare names expands to a call of
//! the first name's macro:
//!
//! ```text
//! flux! { @collect stencil (::stencil_runtime) { <stencil tokens> } }
//! ```
//!
//! which appends the helper's tokens and calls back `stencil_collect!` through the runtime path in
//! the state (the calling stencil's crate's name for the runtime, whatever the helper's crate
//! calls it): this module's [`step`]. `step` works out which called names are still missing (callees of
//! the collected helpers included; a name already collected is skipped, so recursion ends the
//! walk and is reported by the lowering), asks the next one's macro, and once none is missing
//! runs the normal expansion with every helper's body. Helpers check themselves the same way
//! (mode `stencil_fn`), with no output but errors. The macro paths resolve where the stencil
//! is, so every helper a stencil reaches, directly or through other helpers, must be in scope
//! there (a twin that carried its callees' bodies would wait for theirs, and mutually recursive
//! helpers would wait for each other forever instead of being reported).

use super::error::{Error, ErrorKind};
use super::expand::{expand_stencil, invocation, Target};
use super::lower::helpers::{called_names, check_helper};
use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::parse::{ParseStream, Parser};

/// One step of the walk: the input of `stencil_collect!` (`mode (runtime) { target } { helper }*`).
pub fn step(input: TokenStream) -> Result<TokenStream, Error> {
    let syntax = |e: syn::Error| Error::new(e.span(), ErrorKind::Syntax { message: e.to_string() });
    let parser = |input: ParseStream| -> syn::Result<(Ident, TokenStream, TokenStream, Vec<TokenStream>)> {
        let mode: Ident = input.parse()?;
        let runtime;
        syn::parenthesized!(runtime in input);
        let runtime: TokenStream = runtime.parse()?;
        let content;
        syn::braced!(content in input);
        let target: TokenStream = content.parse()?;
        let mut helpers = Vec::new();
        while !input.is_empty() {
            let content;
            syn::braced!(content in input);
            helpers.push(content.parse()?);
        }
        Ok((mode, runtime, target, helpers))
    };
    let (mode, runtime, target_tokens, helper_tokens) = parser.parse2(input).map_err(syntax)?;
    let target = if mode == "stencil" { Target::Stencil } else { Target::Helper };
    let item: syn::ItemFn = syn::parse2(target_tokens.clone()).map_err(syntax)?;
    let helpers = helper_tokens
        .iter()
        .map(|t| syn::parse2::<syn::ItemFn>(t.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(syntax)?;
    let mut known: Vec<String> = helpers.iter().map(|h| h.sig.ident.to_string()).collect();
    if target == Target::Helper {
        known.push(item.sig.ident.to_string());
    }
    let missing =
        std::iter::once(&item).chain(&helpers).flat_map(called_names).find(|name| !known.contains(&name.to_string()));
    if let Some(next) = missing {
        return Ok(invocation(target, &runtime, &target_tokens, &helper_tokens, &next));
    }
    match target {
        Target::Stencil => expand_stencil(&item, &helpers, &runtime),
        Target::Helper => {
            let mut reachable = helpers;
            reachable.push(item.clone());
            check_helper(&item, &reachable).map(|()| quote!())
        }
    }
}
