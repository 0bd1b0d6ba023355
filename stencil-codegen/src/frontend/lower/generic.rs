//! Stencils generic over their element type: `fn heat<T>(idx: Idx3, c: T, f: &Field3<T>,
//! out: &mut Field3<T>)` is lowered once per element type, with every `T` (in types, casts,
//! `T::sqrt(x)` paths) replaced by `f32` or `f64`; the macro emits one functor type `Heat<T>`
//! with a `Stencil` impl per instantiation.

use crate::frontend::error::{Error, ErrorKind};
use crate::ir::ScalarType;
use syn::visit_mut::VisitMut;

/// The element types a generic stencil is instantiated for.
pub const ELEMENT_TYPES: [ScalarType; 2] = [ScalarType::F32, ScalarType::F64];

/// The element type parameter of a stencil (`T` of `fn heat<T>`), `None` if it has no generics;
/// an error for lifetimes, const parameters or more than one type parameter.
pub fn element_parameter(item: &syn::ItemFn) -> Result<Option<syn::Ident>, Error> {
    let generics = &item.sig.generics;
    if generics.params.is_empty() && generics.where_clause.is_none() {
        return Ok(None);
    }
    let mut types = generics.params.iter().filter_map(|p| match p {
        syn::GenericParam::Type(t) => Some(t.ident.clone()),
        _ => None,
    });
    match (types.next(), types.next(), generics.params.len()) {
        (Some(t), None, 1) => Ok(Some(t)),
        _ => Err(Error::spanned(generics, ErrorKind::Generics)),
    }
}

/// `item` with its generics removed and every path that is `param` (or starts with it, as in
/// `T::sqrt`) naming `elem` instead.
pub fn instantiate(item: &syn::ItemFn, param: &syn::Ident, elem: ScalarType) -> syn::ItemFn {
    struct Substitute<'a> {
        param: &'a syn::Ident,
        elem: syn::Ident,
    }
    impl VisitMut for Substitute<'_> {
        fn visit_path_mut(&mut self, path: &mut syn::Path) {
            if path.leading_colon.is_none() {
                if let Some(first) = path.segments.first_mut() {
                    if first.ident == *self.param && first.arguments.is_empty() {
                        first.ident = syn::Ident::new(&self.elem.to_string(), first.ident.span());
                    }
                }
            }
            syn::visit_mut::visit_path_mut(self, path);
        }
    }
    let mut item = item.clone();
    item.sig.generics = syn::Generics::default();
    let elem = syn::Ident::new(elem.rust_name(), param.span());
    Substitute { param, elem }.visit_item_fn_mut(&mut item);
    item
}
