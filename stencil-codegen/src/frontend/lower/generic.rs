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

/// `item` with its generics removed and `param` replaced by `elem` in every type and every path
/// expression through it (`T::sqrt`, `T::MAX`).
pub fn instantiate(item: &syn::ItemFn, param: &syn::Ident, elem: ScalarType) -> syn::ItemFn {
    struct Substitute<'a> {
        param: &'a syn::Ident,
        elem: syn::Ident,
    }
    impl Substitute<'_> {
        fn rename(&self, path: &mut syn::Path) {
            if path.leading_colon.is_none() {
                if let Some(first) = path.segments.first_mut() {
                    if first.ident == *self.param && first.arguments.is_empty() {
                        first.ident = syn::Ident::new(&self.elem.to_string(), first.ident.span());
                    }
                }
            }
        }
    }
    impl VisitMut for Substitute<'_> {
        // Types (`&Field3<T>`, `let x: T`, `as T`) name the element type wherever `T` stands.
        fn visit_type_path_mut(&mut self, ty: &mut syn::TypePath) {
            if ty.qself.is_none() {
                self.rename(&mut ty.path);
            }
            syn::visit_mut::visit_type_path_mut(self, ty);
        }
        // In expressions only paths through the type do (`T::sqrt(x)`, `T::MAX`): a bare `T` is
        // a value, which the element type is not.
        fn visit_expr_path_mut(&mut self, e: &mut syn::ExprPath) {
            if e.qself.is_none() && e.path.segments.len() > 1 {
                self.rename(&mut e.path);
            }
            syn::visit_mut::visit_expr_path_mut(self, e);
        }
    }
    let mut item = item.clone();
    item.sig.generics = syn::Generics::default();
    let elem = syn::Ident::new(elem.rust_name(), param.span());
    Substitute { param, elem }.visit_item_fn_mut(&mut item);
    item
}
