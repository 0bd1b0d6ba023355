//! Small questions about `syn` syntax that several lowering steps ask.

/// The name of a call of a bare function name (`flux(a, b)`): a `#[stencil_fn]` helper.
pub(super) fn helper_name(c: &syn::ExprCall) -> Option<&syn::Ident> {
    match &*c.func {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

/// A block's statements and its final expression, if it ends in one.
pub(super) fn split_tail(block: &syn::Block) -> Option<(&[syn::Stmt], &syn::Expr)> {
    match block.stmts.split_last()? {
        (syn::Stmt::Expr(e, None), rest) => Some((rest, e)),
        _ => None,
    }
}
