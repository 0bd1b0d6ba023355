//! The nest's part for point functions (`stencil_runtime::cpu::PointLayout` says where values
//! go): a row function per point function that computes its outputs along a row into buffers,
//! run by the block function over the widened rows of every group of the block before the
//! block's rows; the stencil's row function then reads each value it needs from the buffers,
//! one row slice per (function, output, offset).

use super::{assigned_locals, ident, NestPrinter};
use crate::analysis::{field_accesses, FieldAccess};
use crate::ir::{visit_exprs, ExprKind, StencilIr};
use crate::naming;
use proc_macro2::{Ident, TokenStream};
use quote::quote;

/// The distinct offsets at which the body evaluates each point function, sorted.
pub(super) fn call_offsets(ir: &StencilIr) -> Vec<Vec<[i32; 3]>> {
    let mut calls = vec![Vec::new(); ir.point_fns.len()];
    visit_exprs(&ir.body, &mut |e| {
        if let ExprKind::PointValue { func, offset, .. } = e.kind {
            calls[func].push(offset);
        }
    });
    for c in &mut calls {
        c.sort();
        c.dedup();
    }
    calls
}

/// The pieces the nest splices in.
#[derive(Default)]
pub(super) struct PointFnNest {
    /// In `run_host` after the strides: the layouts and the point functions' read offsets.
    pub setup: TokenStream,
    /// Next to the row function: the point functions' row functions.
    pub row_fns: TokenStream,
    /// The row function's parameters: one row per function, output and offset.
    pub row_params: TokenStream,
    /// The row function's arguments for them.
    pub row_args: TokenStream,
    /// Their re-slicing to the row's length.
    pub reslice: TokenStream,
    /// The block function's parameters and arguments (the layouts and read offsets).
    pub block_params: TokenStream,
    pub block_args: TokenStream,
    /// In the block function before the row loop: the buffers, filled (inside
    /// [`PointFnNest::wrap_block`]).
    pub block_compute: TokenStream,
    /// Every buffer: its name, element type and the name of its length in a block.
    buffers: Vec<(Ident, Ident, Ident)>,
    /// The buffers' lengths in a block.
    lens: TokenStream,
    /// In the row loop: each row's slices of the buffers.
    pub block_rows: TokenStream,
}

/// The point-function pieces of `ir`'s nest; `calls` are [`call_offsets`], `scalars` the
/// stencil's scalar parameters (name, type).
pub(super) fn point_fn_nest(
    ir: &StencilIr,
    calls: &[Vec<[i32; 3]>],
    scalars: &[(Ident, Ident)],
    rt: &TokenStream,
) -> PointFnNest {
    let mut nest = PointFnNest::default();
    let [shape, strides, len, x, block, r, base] =
        [naming::SHAPE, naming::STRIDES, naming::LEN, naming::X, naming::BLOCK, naming::ROW_INDEX, naming::BASE]
            .map(ident);
    let [group, rows, q, at] =
        [naming::POINT_GROUP, naming::POINT_GROUP_ROWS, naming::POINT_GROUP_ROW, naming::POINT_AT].map(ident);
    let scalar_names: Vec<&Ident> = scalars.iter().map(|(n, _)| n).collect();
    let scalar_params: Vec<TokenStream> = scalars.iter().map(|(n, t)| quote!(#n: #t)).collect();
    for (t, pf) in ir.point_fns.iter().enumerate() {
        let offsets = &calls[t];
        if offsets.is_empty() {
            continue;
        }
        let layout = ident(&naming::point_layout(t));
        let row_fn = ident(&naming::point_row_fn(t));
        let pseudo = StencilIr { body: pf.body.clone(), point_fns: Vec::new(), sweep: None, ..ir.clone() };
        let reads: Vec<FieldAccess> = field_accesses(&pseudo).into_iter().filter(FieldAccess::is_read).collect();
        let offset_lits = offsets.iter().map(|[a, b, c]| quote!([#a, #b, #c]));
        let read_offsets: Vec<(Ident, [i32; 3], &FieldAccess)> = reads
            .iter()
            .flat_map(|fa| {
                fa.offsets.iter().enumerate().map(move |(j, o)| (ident(&naming::point_offset(t, &fa.name, j)), *o, fa))
            })
            .collect();
        let offset_setup = read_offsets.iter().map(|(n, [a, b, c], _)| {
            quote! { let #n = #rt::__private::linear_offset(&#strides, [#a, #b, #c]); }
        });
        nest.setup.extend(quote! {
            let #layout = #rt::__private::PointLayout::new(&#shape, &[#(#offset_lits),*]);
            #(#offset_setup)*
        });
        // The point function's row function: its reads' rows in, its outputs' rows out.
        let outputs: Vec<(Ident, Ident, Ident)> = pf
            .outputs
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let local = &ir.locals[*l];
                (ident(&naming::point_out(k)), ident(&local.name), ident(local.ty.rust_name()))
            })
            .collect();
        let read_rows: Vec<(Ident, Ident)> = reads
            .iter()
            .flat_map(|fa| (0..fa.offsets.len()).map(move |i| (super::row_name(fa, i), ident(fa.elem.rust_name()))))
            .collect();
        let read_params = read_rows.iter().map(|(n, ty)| quote!(#n: &[#ty]));
        let out_params = outputs.iter().map(|(n, _, ty)| quote!(#n: &mut [#ty]));
        let reslice_reads = read_rows.iter().map(|(n, _)| quote!(let #n = &#n[..#len];));
        let reslice_outs = outputs.iter().map(|(n, _, _)| quote!(let #n = &mut #n[..#len];));
        let stores = outputs.iter().map(|(n, l, _)| quote!(#n[#x] = #l;));
        let body_printer = NestPrinter {
            ir,
            accesses: &reads,
            assigned: assigned_locals(&pf.body),
            x: x.clone(),
            level: ident(naming::LEVEL),
            levels: ident(naming::LEVELS),
            point_calls: Vec::new(),
            wrapping: true,
        };
        let body = body_printer.stmts(&pf.body);
        nest.row_fns.extend(quote! {
            #[inline(always)]
            fn #row_fn(#len: usize, #(#scalar_params,)* #(#read_params,)* #(#out_params,)*) {
                #(#reslice_reads)*
                #(#reslice_outs)*
                for #x in 0..#len {
                    #body
                    #(#stores)*
                }
            }
        });
        // The block function: the buffers, filled group by group, row by row.
        let data_args = read_offsets.iter().map(|(off, _, fa)| {
            let data = super::data_name(fa);
            quote!(#rt::__private::row(#data, #base, #off, #rows.width))
        });
        let buffers: Vec<(Ident, Ident)> =
            (0..outputs.len()).map(|k| (ident(&naming::point_buffer(t, k)), outputs[k].2.clone())).collect();
        let buffer_len = ident(&naming::point_buffer_len(t));
        nest.lens.extend(quote!(let #buffer_len = #layout.buffer_len(&#block);));
        nest.buffers.extend(buffers.iter().map(|(b, ty)| (b.clone(), ty.clone(), buffer_len.clone())));
        let out_args = buffers.iter().map(|(b, _)| quote!(&mut #b[#at..#at + #rows.width]));
        // The thread's previous block (same launch, one plane below): the first layout asks.
        let previous = ident(naming::POINT_PREVIOUS);
        if nest.block_compute.is_empty() {
            nest.block_compute.extend(quote!(let #previous = #layout.previous_block(&#block);));
        }
        let copies =
            buffers.iter().map(|(b, _)| quote!(#b.copy_within(#at..#at + #rows.width * #rows.rows, #rows.start);));
        nest.block_compute.extend(quote! {
            for #group in 0..#layout.groups() {
                let #rows = #layout.group_rows(#group, &#block);
                if let ::core::option::Option::Some(#at) =
                    #previous.as_ref().and_then(|p| #layout.earlier_values(#group, p, &#block))
                {
                    #(#copies)*
                    continue;
                }
                for #q in 0..#rows.rows {
                    let #base = #rows.base + #q * #rows.stride;
                    let #at = #rows.start + #q * #rows.width;
                    #row_fn(#rows.width, #(#scalar_names,)* #(#data_args,)* #(#out_args,)*);
                }
            }
        });
        let offset_params = read_offsets.iter().map(|(n, _, _)| quote!(#n: isize));
        let offset_names = read_offsets.iter().map(|(n, _, _)| n);
        nest.block_params.extend(quote!(#layout: &#rt::__private::PointLayout, #(#offset_params,)*));
        nest.block_args.extend(quote!(&#layout, #(#offset_names,)*));
        // The stencil's rows of each output at each offset.
        for (k, (buf, ty)) in buffers.iter().enumerate() {
            for i in 0..offsets.len() {
                let row = ident(&naming::point_row(t, k, i));
                nest.row_params.extend(quote!(#row: &[#ty],));
                nest.row_args.extend(quote!(#row,));
                nest.reslice.extend(quote!(let #row = &#row[..#len];));
                nest.block_rows.extend(quote! { let #row = &#buf[#layout.call_start(#i, #r, &#block)..]; });
            }
        }
    }
    nest
}

impl PointFnNest {
    /// The block function's body `body` (its row loop) with the buffers in place and filled:
    /// one per-thread buffer per element type (`PointElement`), cut into the functions'
    /// outputs. (No closure: a closure would not be compiled for the block function's
    /// instruction set.)
    pub(super) fn wrap_block(&self, body: TokenStream, rt: &TokenStream) -> TokenStream {
        if self.buffers.is_empty() {
            return body;
        }
        let (lens, compute) = (&self.lens, &self.block_compute);
        let mut types: Vec<&Ident> = self.buffers.iter().map(|(_, t, _)| t).collect();
        types.sort_by_key(|t| t.to_string());
        types.dedup();
        let (mut take, mut put) = (TokenStream::new(), TokenStream::new());
        for ty in types {
            let scratch = ident(&naming::point_scratch(&ty.to_string()));
            let mine: Vec<&(Ident, Ident, Ident)> = self.buffers.iter().filter(|(_, t, _)| t == ty).collect();
            let total = mine.iter().map(|(_, _, n)| n);
            let rest = ident(naming::POINT_REST);
            let cuts = mine.iter().map(|(b, _, n)| quote!(let (#b, #rest) = #rest.split_at_mut(#n);));
            take.extend(quote! {
                let mut #scratch = <#ty as #rt::__private::PointElement>::take_buffer(0 #(+ #total)*);
                let #rest = &mut #scratch[..];
                #(#cuts)*
            });
            put.extend(quote! { <#ty as #rt::__private::PointElement>::put_buffer(#scratch); });
        }
        quote! { #lens #take #compute #body #put }
    }
}
