//! The CPU loop nest: one row at a time along the contiguous axis, one slice per (field,
//! offset), so the inner loop is plain slice arithmetic that LLVM vectorises, with bounds checks
//! hoisted to one per read and block (`BlockRows`: every row of the block at once) and the launch
//! validated once. The runtime hands the nest blocks
//! of rows (a plane of a tile); the loop over a block's rows and the row loop inside it are one
//! function, compiled three times on x86-64 (the build's baseline, AVX2 with FMA, AVX-512 through
//! `#[target_feature]`); the runtime picks one per launch (`cpu::isa`). No level enables
//! floating-point contraction, so all three compute the same bits (a stencil's own `mul_add`s,
//! `#[stencil(fma)]`'s among them, are correctly rounded at every level: FMA instructions where
//! the level has them, software on the baseline).
//!
//! A stencil that reduces has its row function return one partial result per reduction (the row
//! folded in order from its first point); the block function stores it in the row's slot, and
//! after the sweep the slots are combined in a fixed tree (`stencil_runtime::cpu::Partials`).
//!
//! A column sweep keeps the row and block functions and hands them one level of a tile of
//! columns at a time, in the sweep's order (`stencil_runtime::cpu::for_each_column`): the block
//! function also takes the level, the rows of written fields at levels already passed, and the
//! tile's carried locals (one value per column, loaded into a plain local at the top of the row
//! loop and stored back at its end).
//!
//! Where the column axis is the contiguous one (`Order::Kij`) those rows would be single points,
//! so a sweep also has a column function, which the runtime calls instead for such fields: the
//! rows of its blocks are whole columns, and it walks each column through all its levels in the
//! sweep's order, the level its position in the column, the carried locals plain locals set
//! before the first level. A written field is one window of the column that also holds the
//! levels it reads back (read at fixed distances from the level written).

mod point_fns;

use crate::analysis::{Analysis, FieldAccess};
use crate::ir::{
    BinOp, Expr, ExprKind, Literal, LocalId, ParamKind, ReduceOp, ScalarType, StencilIr, Stmt, SweepOrder, UnOp,
};
use crate::naming;
use proc_macro2::{Ident, Literal as Lit, Span, TokenStream};
use quote::quote;
use std::collections::HashSet;

/// The body of the functor's `run_host`: destructures [`naming::ARGS`] with `unpack` (which
/// binds every parameter of the IR by its name), validates the launch against
/// [`naming::RANGE`] (prefixed: user parameters may be called `range`), and runs the row loop in
/// parallel. `analysis` is `ir`'s; `rt` is the path of the runtime crate.
pub fn print_run_host(ir: &StencilIr, analysis: &Analysis, unpack: &TokenStream, rt: &TokenStream) -> TokenStream {
    let nest = Nest::new(ir, analysis, rt);
    let [range, shape, strides, isa] = [naming::RANGE, naming::SHAPE, naming::STRIDES, naming::ISA].map(ident);
    let field_shapes = nest.accesses.iter().map(|fa| {
        let n = &nest.names[fa.param];
        let s = &fa.name;
        quote! { (#s, #n.shape()) }
    });
    let setup = nest.field_setup();
    let unit_flag = if nest.unit_groups() {
        let flag = ident(naming::UNIT_STRIDE);
        quote!(let #flag = #strides[0] == 1;)
    } else {
        quote!()
    };
    let (pf_setup, pf_row_fns) = (&nest.pf.setup, &nest.pf.row_fns);
    let row_fn = nest.row_fn();
    let (block_fns, closure) = nest.block_fns();
    let (reduce_setup, runner, reduce_finish) = nest.runner(&closure);
    // A held scalar is read once, here: the nest takes its value as it takes a scalar's.
    let held = ir.params.iter().filter(|p| matches!(p.kind, ParamKind::Held(_))).map(|p| {
        let n = ident(&p.name);
        quote! { let #n = #rt::__private::held_value(#n); }
    });
    quote! {
        #unpack
        #(#held)*
        let #shape = #rt::__private::validate(#range, &Self::INFO, &[#(#field_shapes),*])?;
        let #strides = #shape.strides();
        #unit_flag
        #setup
        #pf_setup
        #pf_row_fns
        #row_fn
        #block_fns
        let #isa = #rt::__private::isa();
        #reduce_setup
        #runner;
        #reduce_finish
        ::core::result::Result::Ok(())
    }
}

/// What the parts of a CPU nest share: the fields by role, the scalars and reductions, a sweep's
/// reads at passed levels and carried locals, and the statement printer.
struct Nest<'a> {
    ir: &'a StencilIr,
    accesses: &'a [FieldAccess],
    rt: &'a TokenStream,
    /// Every IR parameter's name.
    names: Vec<Ident>,
    writers: Vec<&'a FieldAccess>,
    readers: Vec<&'a FieldAccess>,
    /// A column sweep's reads of written fields at levels it has passed: (field, offset index).
    passed: Vec<(&'a FieldAccess, usize)>,
    /// Carried locals the body uses: (tile buffer, row slice, local, type).
    carried: Vec<(Ident, Ident, Ident, Ident)>,
    /// (name, type).
    scalars: Vec<(Ident, Ident)>,
    /// (user name, accumulator, partial results, element type, operator).
    reductions: Vec<(Ident, Ident, Ident, Ident, ReduceOp)>,
    /// Point functions: computed once per point of a block into buffers the row function reads.
    pf: point_fns::PointFnNest,
    /// The row function's rows (name, element type): read, written, and read at passed levels.
    read_rows: Vec<(Ident, Ident)>,
    write_rows: Vec<(Ident, Ident)>,
    passed_rows: Vec<(Ident, Ident)>,
    printer: NestPrinter<'a>,
}

impl<'a> Nest<'a> {
    fn new(ir: &'a StencilIr, analysis: &'a Analysis, rt: &'a TokenStream) -> Self {
        let accesses = &analysis.fields[..];
        let writers: Vec<&FieldAccess> = accesses.iter().filter(|f| f.writable).collect();
        let readers: Vec<&FieldAccess> = accesses.iter().filter(|f| !f.writable).collect();
        // A column sweep also reads written fields at levels it has passed (every written field's
        // non-zero offsets), carries locals from level to level, and sees the level.
        let passed: Vec<(&FieldAccess, usize)> = writers
            .iter()
            .flat_map(|fa| fa.offsets.iter().enumerate().filter(|(_, o)| **o != [0; 3]).map(move |(i, _)| (*fa, i)))
            .collect();
        for (fa, i) in &passed {
            // The frontend allows no other read of a written field; the `unsafe` reads below rely on it.
            assert!(
                ir.reads_written_at(fa.offsets[*i]),
                "stencil `{}` reads written field `{}` at {:?}, which is not a level its sweep has passed",
                ir.name,
                fa.name,
                fa.offsets[*i]
            );
        }
        // Carried locals the body uses (temporaries of their initial values stay in the set-up).
        let used = used_locals(&ir.body);
        let carried = ir
            .sweep
            .as_ref()
            .map(|sw| {
                sw.carried
                    .iter()
                    .filter_map(|s| match s {
                        Stmt::Let { local, .. } if used.contains(local) => Some(&ir.locals[*local]),
                        _ => None,
                    })
                    .map(|l| {
                        let (tile, row) = (ident(&naming::carry_tile(&l.name)), ident(&naming::carry_row(&l.name)));
                        (tile, row, ident(&l.name), ident(l.ty.rust_name()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let scalars: Vec<(Ident, Ident)> = ir
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Scalar(t) | ParamKind::Held(t) => Some((ident(&p.name), ident(t.rust_name()))),
                ParamKind::Field(_) | ParamKind::Reduction(_) => None,
            })
            .collect();
        let reductions = ir
            .reductions()
            .map(|(p, r)| {
                let name = &ir.params[p].name;
                (
                    ident(name),
                    ident(&naming::acc(name)),
                    ident(&naming::partials(name)),
                    ident(r.elem.rust_name()),
                    r.op,
                )
            })
            .collect();
        let point_calls = point_fns::call_offsets(ir);
        let pf = point_fns::point_fn_nest(ir, &point_calls, &scalars, rt);
        let read_rows =
            readers.iter().flat_map(|fa| (0..fa.offsets.len()).map(move |i| (row_name(fa, i), elem(fa)))).collect();
        let write_rows = writers.iter().map(|fa| (row_name(fa, 0), elem(fa))).collect();
        let passed_rows = passed.iter().map(|(fa, i)| (passed_row_name(fa, *i), elem(fa))).collect();
        let printer = NestPrinter {
            ir,
            accesses,
            assigned: assigned_locals(&ir.body),
            x: ident(naming::X),
            level: ident(naming::LEVEL),
            levels: ident(naming::LEVELS),
            point_calls,
            wrapping: false,
        };
        Nest {
            ir,
            accesses,
            rt,
            names: ir.params.iter().map(|p| ident(&p.name)).collect(),
            writers,
            readers,
            passed,
            carried,
            scalars,
            reductions,
            pf,
            read_rows,
            write_rows,
            passed_rows,
            printer,
        }
    }

    /// For each read (field, offset index) whose offset differs from an earlier one of the same
    /// field only along axis 0: (field, index, earlier index, difference along axis 0).
    fn unit_shifts(&self) -> Vec<(&'a FieldAccess, usize, usize, i32)> {
        let mut shifts = Vec::new();
        for fa in &self.readers {
            for (i, o) in fa.offsets.iter().enumerate() {
                if let Some(j) = fa.offsets[..i].iter().position(|p| p[1] == o[1] && p[2] == o[2]) {
                    shifts.push((*fa, i, j, o[0] - fa.offsets[j][0]));
                }
            }
        }
        shifts
    }

    /// Whether some reads share a row up to a shift along axis 0 (then the block function has a
    /// build for stride 1 along axis 0, where they are one pointer with constant displacements:
    /// fewer registers, no spilled row pointers).
    fn unit_groups(&self) -> bool {
        !self.unit_shifts().is_empty()
    }

    /// At the top of the block function: in the stride-1 build, each such read's offset is the
    /// earlier read's plus a constant, so the compiler sees one row pointer.
    fn unit_offsets(&self) -> TokenStream {
        let unit = ident(naming::UNIT);
        let overrides = self.unit_shifts().into_iter().map(|(fa, i, j, d)| {
            let (off, rep) = (offset_name(fa, i), offset_name(fa, j));
            let d = Lit::isize_unsuffixed(d as isize);
            quote!(let #off = if #unit { #rep + #d } else { #off };)
        });
        quote!(#(#overrides)*)
    }

    /// After the strides: each read field's slice and read offsets, each written field's row
    /// writer, and the offsets of a sweep's reads at passed levels.
    fn field_setup(&self) -> TokenStream {
        let (rt, strides) = (self.rt, ident(naming::STRIDES));
        let setup = self.accesses.iter().map(|fa| {
            let n = &self.names[fa.param];
            let data = data_name(fa);
            if fa.writable {
                quote! { let #data = #rt::__private::RowWriter::new(#n.as_mut_slice()); }
            } else {
                let offsets = fa.offsets.iter().enumerate().map(|(i, o)| {
                    let off = offset_name(fa, i);
                    let [a, b, c] = *o;
                    quote! { let #off = #rt::__private::linear_offset(&#strides, [#a, #b, #c]); }
                });
                quote! { let #data = #n.as_slice(); #(#offsets)* }
            }
        });
        let passed_setup = self.passed.iter().map(|(fa, i)| {
            let off = offset_name(fa, *i);
            let [a, b, c] = fa.offsets[*i];
            quote! { let #off = #rt::__private::linear_offset(&#strides, [#a, #b, #c]); }
        });
        quote!(#(#setup)* #(#passed_setup)*)
    }

    /// A sweep's extra parameters of the row function (the level, the passed rows and the carried
    /// rows) and the arguments that pass them on; nothing without a sweep.
    fn sweep_row_params(&self) -> (TokenStream, TokenStream) {
        if self.ir.sweep.is_none() {
            return (quote!(), quote!());
        }
        let [level, levels] = [&self.printer.level, &self.printer.levels];
        let p = self.passed_rows.iter().map(|(n, t)| quote!(#n: &[#t]));
        let c = self.carried.iter().map(|(_, row, _, t)| quote!(#row: &mut [#t]));
        let pa = self.passed_rows.iter().map(|(n, _)| n);
        let ca = self.carried.iter().map(|(_, row, _, _)| row);
        (quote!(#level: i32, #levels: i32, #(#p,)* #(#c,)*), quote!(#level, #levels, #(#pa,)* #(#ca,)*))
    }

    /// The row function: the loop over one row, its parameters the length, the scalars, every
    /// read row and the written rows (and a sweep's, and the point functions'); with reductions
    /// it returns the row's partial results.
    fn row_fn(&self) -> TokenStream {
        let [len, row_fn] = [naming::LEN, naming::ROW_FN].map(ident);
        let x = &self.printer.x;
        let row_params = {
            let s = self.scalars.iter().map(|(n, t)| quote!(#n: #t));
            let r = self.read_rows.iter().map(|(n, t)| quote!(#n: &[#t]));
            let w = self.write_rows.iter().map(|(n, t)| quote!(#n: &mut [#t]));
            let (sweep, p) = (self.sweep_row_params().0, &self.pf.row_params);
            quote!(#len: usize, #(#s,)* #(#r,)* #(#w,)* #sweep #p)
        };
        // Re-slicing every row to `len` lets LLVM drop the bounds checks of `row[x]` and vectorise.
        let reslice = self
            .read_rows
            .iter()
            .chain(&self.passed_rows)
            .map(|(n, _)| quote!(let #n = &#n[..#len];))
            .chain(self.write_rows.iter().map(|(n, _)| quote!(let #n = &mut #n[..#len];)))
            .chain(self.carried.iter().map(|(_, n, _, _)| quote!(let #n = &mut #n[..#len];)));
        let acc_init = self.reductions.iter().map(|(_, acc, _, t, op)| {
            let init = match op {
                ReduceOp::Sum => quote!(0.0),
                ReduceOp::Min => quote!(#t::INFINITY),
                ReduceOp::Max => quote!(#t::NEG_INFINITY),
            };
            quote!(let mut #acc: #t = #init;)
        });
        // A carried local is a plain local inside the row loop, its value kept per column between
        // levels.
        let carry_in = self.carried.iter().map(|(_, row, l, t)| quote!(let mut #l: #t = #row[#x];));
        let carry_out = self.carried.iter().map(|(_, row, l, _)| quote!(#row[#x] = #l;));
        let body = self.printer.stmts(&self.ir.body);
        let (row_ret, row_tail) = if self.reductions.is_empty() {
            (quote!(), quote!())
        } else {
            let accs = self.reductions.iter().map(|r| &r.1);
            let acc_types = self.reductions.iter().map(|r| &r.3);
            (quote!(-> (#(#acc_types,)*)), quote!((#(#accs,)*)))
        };
        let pf_reslice = &self.pf.reslice;
        quote! {
            #[inline(always)]
            fn #row_fn(#row_params) #row_ret {
                #(#reslice)*
                #pf_reslice
                #(#acc_init)*
                for #x in 0..#len {
                    #(#carry_in)*
                    #body
                    #(#carry_out)*
                }
                #row_tail
            }
        }
    }

    /// The row function's call in the block loop (storing its partial results in the row's slots).
    fn row_call(&self) -> TokenStream {
        let [len, row_fn, base, slots] = [naming::LEN, naming::ROW_FN, naming::BASE, naming::SLOTS].map(ident);
        let row_args = {
            let s = self.scalars.iter().map(|(n, _)| n);
            let r = self.read_rows.iter().map(|(n, _)| n);
            let w = self.write_rows.iter().map(|(n, _)| n);
            let (sweep, p) = (self.sweep_row_params().1, &self.pf.row_args);
            quote!(#len, #(#s,)* #(#r,)* #(#w,)* #sweep #p)
        };
        if self.reductions.is_empty() {
            return quote!(#row_fn(#row_args););
        }
        let accs = self.reductions.iter().map(|r| &r.1);
        let store = self.reductions.iter().map(|(_, acc, p, _, _)| quote!(#p.put(#slots.slot(#base), #acc);));
        quote!(let (#(#accs,)*) = #row_fn(#row_args); #(#store)*)
    }

    /// A sweep's extra parameters of the block function (the level, the written fields read at
    /// passed levels with those offsets, the tile's carried values) and their arguments.
    fn sweep_block_params(&self) -> (TokenStream, TokenStream) {
        if self.ir.sweep.is_none() {
            return (quote!(), quote!());
        }
        let (rt, [level, levels]) = (self.rt, [&self.printer.level, &self.printer.levels]);
        let passed_fields: Vec<&FieldAccess> =
            self.writers.iter().copied().filter(|fa| fa.offsets.iter().any(|o| *o != [0; 3])).collect();
        let passed_offsets = |fa: &FieldAccess| -> Vec<Ident> {
            (0..fa.offsets.len()).filter(|i| fa.offsets[*i] != [0; 3]).map(|i| offset_name(fa, i)).collect()
        };
        let d = passed_fields.iter().map(|fa| {
            let (n, t, offs) = (data_name(fa), elem(fa), passed_offsets(fa));
            quote!(#n: &#rt::__private::RowWriter<'_, #t>, #(#offs: isize,)*)
        });
        let c = self.carried.iter().map(|(tile, _, _, t)| quote!(#tile: &mut [#t]));
        let da = passed_fields.iter().map(|fa| {
            let (n, offs) = (data_name(fa), passed_offsets(fa));
            quote!(&#n, #(#offs,)*)
        });
        let ca = self.carried.iter().map(|(tile, _, _, _)| tile);
        (quote!(#level: i32, #levels: i32, #(#d)* #(#c,)*), quote!(#level, #levels, #(#da)* #(#ca,)*))
    }

    /// The block function (the loop over the rows of a block, its parameters the block, the
    /// scalars, every read field's data and offsets, and the block's outputs) with its ISA twins,
    /// and the closure the runtime calls per block, which picks one.
    fn block_fns(&self) -> (TokenStream, TokenStream) {
        let rt = self.rt;
        let [block, out, r, base, len, slots, isa] =
            [naming::BLOCK, naming::OUT, naming::ROW_INDEX, naming::BASE, naming::LEN, naming::SLOTS, naming::ISA]
                .map(ident);
        let outputs_ty = {
            let w = self.writers.iter().map(|fa| {
                let t = elem(fa);
                quote!(&#rt::__private::RowWriter<'_, #t>)
            });
            quote!(#rt::__private::BlockOutputs<'_, (#(#w,)*)>)
        };
        let (reduce_params, reduce_args) = if self.reductions.is_empty() {
            (quote!(), quote!())
        } else {
            let p = self.reductions.iter().map(|(_, _, p, t, _)| quote!(#p: &#rt::__private::Partials<#t>));
            let partials = self.reductions.iter().map(|r| &r.2);
            (quote!(#slots: &#rt::__private::RowSlots, #(#p,)*), quote!(#slots, #(#partials,)*))
        };
        let (sweep_block_params, sweep_block_args) = self.sweep_block_params();
        let (input_params, input_args) = inputs(&self.scalars, &self.readers);
        let block_params = {
            let p = &self.pf.block_params;
            quote!(#block: #rt::__private::RowBlock, #input_params #sweep_block_params #p #reduce_params #out: &mut #outputs_ty)
        };
        let block_args = {
            let pfa = &self.pf.block_args;
            quote!(#block, #input_args #sweep_block_args #pfa #reduce_args #out)
        };
        // Each read's rows of the block, checked against its field once per block; a row is then
        // a pointer and a length, without a bounds check of its own.
        let block_rows = self.readers.iter().flat_map(|fa| {
            let (data, block) = (data_name(fa), &block);
            (0..fa.offsets.len()).map(move |i| {
                let (rows, off) = (block_rows_name(fa, i), offset_name(fa, i));
                quote! { let #rows = #rt::__private::BlockRows::new(#data, &#block, #off); }
            })
        });
        let row_slices = self.readers.iter().flat_map(|fa| {
            let r = &r;
            (0..fa.offsets.len()).map(move |i| {
                let (row, rows) = (row_name(fa, i), block_rows_name(fa, i));
                quote! { let #row = #rows.row(#r); }
            })
        });
        // The rows of a block a sweep adds: the passed rows (finished by this task at earlier
        // levels) and the row's slice of each carried local.
        let sweep_rows = self.passed.iter().map(|(fa, i)| {
            let (row, data, off) = (passed_row_name(fa, *i), data_name(fa), offset_name(fa, *i));
            quote! {
                // SAFETY: the row of a level this sweep has passed in the same columns, which this
                // task finished in an earlier block; the rows written now are at another level.
                let #row = unsafe { #data.passed_row(#base, #off, #len) };
            }
        });
        let carry_rows =
            self.carried.iter().map(|(tile, row, _, _)| quote!(let #row = &mut #tile[#r * #len..(#r + 1) * #len];));
        let writer_rows = self.writers.iter().map(|f| row_name(f, 0));
        let (pf_rows, row_call) = (&self.pf.block_rows, self.row_call());
        let block_loop = quote! {
            #(#block_rows)*
            for #r in 0..#block.rows {
                let #base = #block.row_base(#r);
                #(#row_slices)*
                #pf_rows
                #(#sweep_rows)*
                #(#carry_rows)*
                let (#(#writer_rows,)*) = #out.row(#r);
                #row_call
            }
        };
        let block_body = self.pf.wrap_block(block_loop, rt);
        let [block_fn, block_avx2, block_avx512] =
            [naming::BLOCK_FN, naming::BLOCK_FN_AVX2, naming::BLOCK_FN_AVX512].map(ident);
        let unit = self.unit_groups().then(|| (ident(naming::UNIT), ident(naming::UNIT_STRIDE)));
        let generics = unit.as_ref().map(|(c, _)| quote!(<const #c: bool>));
        let unit_offsets = self.unit_offsets();
        let builds = IsaBuilds { plain: block_fn.clone(), avx2: block_avx2, avx512: block_avx512, unit };
        let (twins, dispatch) = (builds.twins(&block_params, &block_args), builds.dispatch(rt, &isa, &block_args));
        let fns = quote! {
            #[inline(always)]
            fn #block_fn #generics(#block_params) {
                let #len = #block.len;
                #unit_offsets
                #block_body
            }
            #twins
        };
        let closure = quote! {
            |#block, #out| {
                #dispatch
            }
        };
        (fns, closure)
    }

    /// The call of the runtime's loop over blocks (rows, or a sweep's levels and columns) with
    /// `closure`, and the reductions' set-up before it and folding after it.
    fn runner(&self, closure: &TokenStream) -> (TokenStream, TokenStream, TokenStream) {
        let (rt, ir) = (self.rt, self.ir);
        let [range, shape, slots] = [naming::RANGE, naming::SHAPE, naming::SLOTS].map(ident);
        let write_only = self.writers.iter().all(|f| !f.is_read());
        let writer_data = self.writers.iter().map(|f| data_name(f));
        let outputs_tuple = quote!((#(&#writer_data,)*));
        // Without reductions the nest is exactly what it was before they existed.
        let (reduce_setup, reduce_finish, runner) = if self.reductions.is_empty() {
            (
                quote!(),
                quote!(),
                quote!(#rt::__private::for_each_row(#range, &#shape, &Self::INFO, #write_only, #outputs_tuple, #closure)),
            )
        } else {
            let setup = self.reductions.iter().map(|(_, _, p, t, op)| {
                let op = ident(op.type_name());
                quote!(let #p = &#rt::__private::Partials::<#t>::new(#rt::ReduceOp::#op, #slots.count());)
            });
            let finish = self.reductions.iter().map(|(n, _, p, _, _)| quote!(#n.fold(#p.total());));
            (
                quote!(let #slots = &#rt::__private::RowSlots::new(#range, &#shape); #(#setup)*),
                quote!(#(#finish)*),
                quote!(#rt::__private::for_each_row_reducing(#range, &#shape, &Self::INFO, #outputs_tuple, #closure)),
            )
        };
        let Some(sw) = &ir.sweep else { return (reduce_setup, runner, reduce_finish) };
        let block = ident(naming::BLOCK);
        let out = ident(naming::OUT);
        let order = ident(match sw.order {
            SweepOrder::Forward => "Forward",
            SweepOrder::Backward => "Backward",
        });
        let start = self.printer.stmts(&sw.carried);
        let state = ident(naming::SWEEP_STATE);
        let tiles = self.carried.iter().map(|(tile, _, _, _)| tile);
        let initial = self.carried.iter().map(|(_, _, l, _)| quote!(::std::vec![#l; #block.rows * #block.len]));
        let [level, levels] = [&self.printer.level, &self.printer.levels];
        let axis = Lit::usize_unsuffixed(ir.column_axis());
        let name = &ir.name;
        let nest = ColumnNest {
            scalars: &self.scalars,
            readers: &self.readers,
            writers: &self.writers,
            read_rows: &self.read_rows,
        };
        let columns = print_columns(ir, nest, &self.printer, rt);
        let (column_items, column_call) = (&columns.items, &columns.call);
        let runner = quote! {
            if #range.len_per_axis()[#axis] > i32::MAX as usize {
                return ::core::result::Result::Err(#rt::LaunchError::Range(#rt::RangeError::ColumnLevels {
                    stencil: #name,
                    axis: #axis,
                    levels: #range.len_per_axis()[#axis],
                    limit: i32::MAX as usize,
                }));
            }
            #column_items
            #rt::__private::for_each_column(
                #range,
                &#shape,
                #rt::__private::SweepOrder::#order,
                #outputs_tuple,
                |#block| { #start (#(#initial,)*) },
                |#state, #block, #level, #levels, #out| {
                    let (#(#tiles,)*) = #state;
                    (#closure)(#block, #out)
                },
                #column_call,
            )
        };
        (reduce_setup, runner, reduce_finish)
    }
}

/// A field's element type.
fn elem(fa: &FieldAccess) -> Ident {
    ident(fa.elem.rust_name())
}

/// A block function and its twins compiled for AVX2 and AVX-512 (each calls it, so the same body
/// is vectorised for the wider instruction set). With `unit` (the const parameter and the run-time
/// flag it takes), each has a build for stride 1 along axis 0 and one for any strides.
struct IsaBuilds {
    plain: Ident,
    avx2: Ident,
    avx512: Ident,
    unit: Option<(Ident, Ident)>,
}

impl IsaBuilds {
    /// The twins' definitions, taking `params` and passing `args` on.
    fn twins(&self, params: &TokenStream, args: &TokenStream) -> TokenStream {
        let IsaBuilds { plain, avx2, avx512, unit } = self;
        let (generics, pass) = match unit {
            Some((c, _)) => (quote!(<const #c: bool>), quote!(::<#c>)),
            None => (quote!(), quote!()),
        };
        quote! {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            fn #avx2 #generics(#params) {
                #plain #pass(#args)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
            fn #avx512 #generics(#params) {
                #plain #pass(#args)
            }
        }
    }

    /// The call of the build for the level `isa` names (and, with `unit`, the strides).
    fn dispatch(&self, rt: &TokenStream, isa: &Ident, args: &TokenStream) -> TokenStream {
        let IsaBuilds { plain, avx2, avx512, unit } = self;
        let by_isa = |pass: TokenStream| {
            quote! {
                match #isa {
                    // SAFETY: `isa()` names a level only where the CPU runs its instructions.
                    #[cfg(target_arch = "x86_64")]
                    #rt::__private::Isa::Avx512 => unsafe { #avx512 #pass(#args) },
                    #[cfg(target_arch = "x86_64")]
                    #rt::__private::Isa::Avx2 => unsafe { #avx2 #pass(#args) },
                    _ => #plain #pass(#args),
                }
            }
        };
        match unit {
            Some((_, flag)) => {
                let (yes, no) = (by_isa(quote!(::<true>)), by_isa(quote!(::<false>)));
                quote!(if #flag { #yes } else { #no })
            }
            None => by_isa(quote!()),
        }
    }
}

/// The scalar and read-field parameters of a block function (each read field's data and the
/// offset of each of its reads), and the arguments that pass them on.
fn inputs(scalars: &[(Ident, Ident)], readers: &[&FieldAccess]) -> (TokenStream, TokenStream) {
    let ps = scalars.iter().map(|(n, t)| quote!(#n: #t));
    let pd = readers.iter().map(|fa| {
        let (n, t) = (data_name(fa), ident(fa.elem.rust_name()));
        let offs = (0..fa.offsets.len()).map(move |i| offset_name(fa, i));
        quote!(#n: &[#t], #(#offs: isize,)*)
    });
    let a_s = scalars.iter().map(|(n, _)| n);
    let ad = readers.iter().map(|fa| {
        let n = data_name(fa);
        let offs = (0..fa.offsets.len()).map(move |i| offset_name(fa, i));
        quote!(#n, #(#offs,)*)
    });
    (quote!(#(#ps,)* #(#pd)*), quote!(#(#a_s,)* #(#ad)*))
}

fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn data_name(fa: &FieldAccess) -> Ident {
    ident(&naming::data(&fa.name))
}

fn offset_name(fa: &FieldAccess, i: usize) -> Ident {
    ident(&naming::offset(&fa.name, i))
}

fn row_name(fa: &FieldAccess, i: usize) -> Ident {
    ident(&naming::row(&fa.name, i))
}

fn block_rows_name(fa: &FieldAccess, i: usize) -> Ident {
    ident(&naming::block_rows(&fa.name, i))
}

fn passed_row_name(fa: &FieldAccess, i: usize) -> Ident {
    ident(&naming::passed_row(&fa.name, i))
}

// The column nest's names (generated names start with `__`, which user names never do).
/// The column function (one column through all its levels).
const COLUMN_FN: &str = "__column_fn";
/// The column block function (the loop over the columns of a block), and its AVX2 and AVX-512
/// builds.
const COLUMN_BLOCK_FN: &str = "__column_block_fn";
const COLUMN_BLOCK_FN_AVX2: &str = "__column_block_fn_avx2";
const COLUMN_BLOCK_FN_AVX512: &str = "__column_block_fn_avx512";

/// Levels of written field `fa`'s column window below the column (the farthest passed level
/// read back going up).
fn below_name(fa: &FieldAccess) -> Ident {
    ident(&format!("__below_{}", fa.name))
}

/// Levels of written field `fa`'s column window above the column.
fn above_name(fa: &FieldAccess) -> Ident {
    ident(&format!("__above_{}", fa.name))
}

/// Where the `i`-th offset of written field `fa` (a passed level) lies in its column window from
/// the level written.
fn at_name(fa: &FieldAccess, i: usize) -> Ident {
    ident(&format!("__at_{}_{i}", fa.name))
}

/// Whether written field `fa` is read back at a level a sweep has passed.
fn reads_back(fa: &FieldAccess) -> bool {
    fa.offsets.iter().any(|o| *o != [0; 3])
}

/// What a sweep's column nest shares with its row nest: the scalars (name, type), the read and
/// written fields, and the read rows (name, element type).
struct ColumnNest<'a> {
    scalars: &'a [(Ident, Ident)],
    readers: &'a [&'a FieldAccess],
    writers: &'a [&'a FieldAccess],
    read_rows: &'a [(Ident, Ident)],
}

/// A sweep's column nest: its functions, and the closure that `for_each_column` calls with a
/// block of whole columns and the level count.
struct Columns {
    items: TokenStream,
    call: TokenStream,
}

/// The column nest of sweep `ir` (module docs), its statements printed by the row nest's
/// `printer` as a column function's.
fn print_columns(ir: &StencilIr, nest: ColumnNest<'_>, printer: &NestPrinter<'_>, rt: &TokenStream) -> Columns {
    let sw = ir.sweep.as_ref().expect("a column sweep");
    let ColumnNest { scalars, readers, writers, read_rows } = nest;
    let [block, base, len, x, level, levels, r, isa] = [
        naming::BLOCK,
        naming::BASE,
        naming::LEN,
        naming::X,
        naming::LEVEL,
        naming::LEVELS,
        naming::ROW_INDEX,
        naming::ISA,
    ]
    .map(ident);
    let [column_fn, block_fn, block_avx2, block_avx512] =
        [COLUMN_FN, COLUMN_BLOCK_FN, COLUMN_BLOCK_FN_AVX2, COLUMN_BLOCK_FN_AVX512].map(ident);
    let elem = |fa: &FieldAccess| ident(fa.elem.rust_name());
    // Written fields read back, and each passed level they are read at.
    let back: Vec<&FieldAccess> = writers.iter().copied().filter(|fa| reads_back(fa)).collect();
    let passed: Vec<(&FieldAccess, usize)> = back
        .iter()
        .flat_map(|fa| fa.offsets.iter().enumerate().filter(|(_, o)| **o != [0; 3]).map(move |(i, _)| (*fa, i)))
        .collect();
    let write_rows: Vec<(Ident, Ident)> = writers.iter().map(|fa| (row_name(fa, 0), elem(fa))).collect();
    let belows: Vec<Ident> = back.iter().map(|fa| below_name(fa)).collect();
    let ats: Vec<Ident> = passed.iter().map(|(fa, i)| at_name(fa, *i)).collect();
    // The column function: one column, its rows the column's levels in storage order.
    let column_params = {
        let s = scalars.iter().map(|(n, t)| quote!(#n: #t));
        let r = read_rows.iter().map(|(n, t)| quote!(#n: &[#t]));
        let w = write_rows.iter().map(|(n, t)| quote!(#n: &mut [#t]));
        quote!(#len: usize, #(#s,)* #(#r,)* #(#w,)* #levels: i32, #(#belows: usize,)* #(#ats: usize,)*)
    };
    let column_args = {
        let s = scalars.iter().map(|(n, _)| n);
        let r = read_rows.iter().map(|(n, _)| n);
        let w = write_rows.iter().map(|(n, _)| n);
        quote!(#len, #(#s,)* #(#r,)* #(#w,)* #levels, #(#belows,)* #(#ats,)*)
    };
    // Re-slicing to `len` drops the bounds checks of the rows read at the level written.
    let reslice = read_rows.iter().map(|(n, _)| quote!(let #n = &#n[..#len];)).chain(
        writers.iter().filter(|fa| !reads_back(fa)).map(|fa| {
            let n = row_name(fa, 0);
            quote!(let #n = &mut #n[..#len];)
        }),
    );
    let (walk, at_level) = match sw.order {
        SweepOrder::Forward => (quote!(0..#len), quote!(#x as i32)),
        SweepOrder::Backward => (quote!((0..#len).rev()), quote!((#len - 1 - #x) as i32)),
    };
    let start = printer.stmts_in(&sw.carried, true);
    let body = printer.stmts_in(&ir.body, true);
    // The column block function: the columns of a block, each field's column (a window that
    // also holds the levels read back, for a written field), then the column function.
    let (input_params, input_args) = inputs(scalars, readers);
    let block_params = {
        let w = writers.iter().map(|fa| {
            let (n, t) = (data_name(fa), elem(fa));
            quote!(#n: &#rt::__private::RowWriter<'_, #t>)
        });
        let p = passed.iter().map(|(fa, i)| offset_name(fa, *i));
        quote!(#block: #rt::__private::RowBlock, #input_params #levels: i32, #(#w,)* #(#p: isize,)*)
    };
    let block_args = {
        let w = writers.iter().map(|fa| data_name(fa));
        let p = passed.iter().map(|(fa, i)| offset_name(fa, *i));
        quote!(#block, #input_args #levels, #(&#w,)* #(#p,)*)
    };
    let windows = back.iter().map(|fa| {
        let (below, above) = (below_name(fa), above_name(fa));
        let back_at: Vec<usize> = (0..fa.offsets.len()).filter(|i| fa.offsets[*i] != [0; 3]).collect();
        let offs: Vec<Ident> = back_at.iter().map(|i| offset_name(fa, *i)).collect();
        let at = back_at.iter().zip(&offs).map(|(i, off)| {
            let at = at_name(fa, *i);
            quote!(let #at: usize = #below.wrapping_add_signed(#off);)
        });
        quote! {
            let #below: usize = 0isize #(.min(#offs))*.unsigned_abs();
            let #above: usize = 0isize #(.max(#offs))*.unsigned_abs();
            #(#at)*
        }
    });
    let read_slices = readers.iter().flat_map(|fa| {
        let (data, base, len) = (data_name(fa), &base, &len);
        (0..fa.offsets.len()).map(move |i| {
            let (row, off) = (row_name(fa, i), offset_name(fa, i));
            quote! { let #row = #rt::__private::row(#data, #base, #off, #len); }
        })
    });
    let write_slices = writers.iter().map(|fa| {
        let (row, data) = (row_name(fa, 0), data_name(fa));
        let (below, above) = if reads_back(fa) {
            let (b, a) = (below_name(fa), above_name(fa));
            (quote!(#b), quote!(#a))
        } else {
            (quote!(0), quote!(0))
        };
        quote! {
            // SAFETY: this block's column (`for_each_column` hands each column to one task), and
            // the levels of the same column it reads back; no other reference to them is alive.
            let #row = unsafe { #data.column_window(#base, #below, #len, #above) };
        }
    });
    let builds = IsaBuilds { plain: block_fn.clone(), avx2: block_avx2, avx512: block_avx512, unit: None };
    let (twins, dispatch) = (builds.twins(&block_params, &block_args), builds.dispatch(rt, &isa, &block_args));
    let items = quote! {
        #[inline(always)]
        fn #column_fn(#column_params) {
            #(#reslice)*
            #start
            for #x in #walk {
                let #level: i32 = #at_level;
                #body
            }
        }
        #[inline(always)]
        fn #block_fn(#block_params) {
            let #len = #block.len;
            #(#windows)*
            for #r in 0..#block.rows {
                let #base = #block.row_base(#r);
                #(#read_slices)*
                #(#write_slices)*
                #column_fn(#column_args);
            }
        }
        #twins
    };
    let call = quote! {
        |#block, #levels| {
            #dispatch
        }
    };
    Columns { items, call }
}

/// Locals that `body` reads or assigns.
fn used_locals(body: &[Stmt]) -> HashSet<LocalId> {
    let mut set = assigned_locals(body);
    crate::ir::visit_exprs(body, &mut |e| {
        if let ExprKind::Local(l) = e.kind {
            set.insert(l);
        }
    });
    set
}

/// Locals that are assigned after their declaration (printed `let mut`).
fn assigned_locals(body: &[Stmt]) -> HashSet<LocalId> {
    let mut set = HashSet::new();
    fn walk(body: &[Stmt], set: &mut HashSet<LocalId>) {
        for s in body {
            match s {
                Stmt::Assign { local, .. } => {
                    set.insert(*local);
                }
                Stmt::If { then_body, else_body, .. } => {
                    walk(then_body, set);
                    walk(else_body, set);
                }
                _ => {}
            }
        }
    }
    walk(body, &mut set);
    set
}

struct NestPrinter<'a> {
    ir: &'a StencilIr,
    accesses: &'a [FieldAccess],
    assigned: HashSet<LocalId>,
    /// The position in the row.
    x: Ident,
    /// A column sweep's level (`idx.level()`) and level count (`idx.levels()`).
    level: Ident,
    levels: Ident,
    /// The offsets at which the body evaluates each point function (`point_fns::call_offsets`).
    point_calls: Vec<Vec<[i32; 3]>>,
    /// Integer arithmetic wraps (a point function's body, computed at points nobody reads too;
    /// integer `/` and `%`, which would still panic, are refused in it by the frontend).
    wrapping: bool,
}

impl NestPrinter<'_> {
    fn access(&self, param: usize) -> &FieldAccess {
        self.accesses.iter().find(|f| f.param == param).expect("field parameter")
    }

    /// Where the level written lies in written field `fa`'s row (or column window).
    fn written_at(&self, fa: &FieldAccess, column: bool) -> TokenStream {
        let x = &self.x;
        if column && reads_back(fa) {
            let below = below_name(fa);
            quote!(#x + #below)
        } else {
            quote!(#x)
        }
    }

    fn stmts(&self, body: &[Stmt]) -> TokenStream {
        self.stmts_in(body, false)
    }

    /// `body` printed for the row function (`column` false) or a sweep's column function
    /// (`print_columns`: a written field read back is a window of its column, the level written
    /// at `x + below` in it, a passed level at `x + at`).
    fn stmts_in(&self, body: &[Stmt], column: bool) -> TokenStream {
        body.iter().map(|s| self.stmt(s, column)).collect()
    }

    fn stmt(&self, s: &Stmt, column: bool) -> TokenStream {
        match s {
            Stmt::Let { local, init } => {
                let l = &self.ir.locals[*local];
                let name = ident(&l.name);
                let ty = ident(l.ty.rust_name());
                let m = if self.assigned.contains(local) && init.is_some() { quote!(mut) } else { quote!() };
                match init {
                    Some(e) => {
                        let e = self.expr(e, column);
                        quote! { let #m #name: #ty = #e; }
                    }
                    None => quote! { let #name: #ty; },
                }
            }
            Stmt::Assign { local, value } => {
                let name = ident(&self.ir.locals[*local].name);
                let v = self.expr(value, column);
                quote! { #name = #v; }
            }
            Stmt::Store { field, value } => {
                let fa = self.access(*field);
                let (row, at) = (row_name(fa, 0), self.written_at(fa, column));
                let v = self.expr(value, column);
                quote! { #row[#at] = #v; }
            }
            Stmt::Fold { reduction, value } => {
                let acc = ident(&naming::acc(&self.ir.params[*reduction].name));
                let v = self.expr(value, column);
                match self.ir.params[*reduction].kind {
                    ParamKind::Reduction(r) if r.op == ReduceOp::Sum => quote! { #acc += #v; },
                    ParamKind::Reduction(r) => {
                        let cmp = if r.op == ReduceOp::Min { quote!(<) } else { quote!(>) };
                        quote! { { let __v = #v; if __v #cmp #acc || __v.is_nan() { #acc = __v; } } }
                    }
                    _ => unreachable!("a fold's target is a reduction parameter"),
                }
            }
            Stmt::If { cond, then_body, else_body } => {
                let c = self.expr(cond, column);
                let t = self.stmts_in(then_body, column);
                if else_body.is_empty() {
                    quote! { if #c { #t } }
                } else {
                    let e = self.stmts_in(else_body, column);
                    quote! { if #c { #t } else { #e } }
                }
            }
        }
    }

    fn expr(&self, e: &Expr, column: bool) -> TokenStream {
        match &e.kind {
            ExprKind::Lit(l) => literal(*l, e.ty),
            ExprKind::Local(id) => {
                let name = ident(&self.ir.locals[*id].name);
                quote!(#name)
            }
            ExprKind::Scalar(p) => {
                let name = ident(&self.ir.params[*p].name);
                quote!(#name)
            }
            ExprKind::Load { field, offset } => {
                let fa = self.access(*field);
                let i = fa.offsets.iter().position(|o| o == offset);
                let x = &self.x;
                match (fa.writable, i) {
                    (true, _) if *offset == [0; 3] => {
                        let (row, at) = (row_name(fa, 0), self.written_at(fa, column));
                        quote!(#row[#at])
                    }
                    (true, Some(i)) if column => {
                        let (row, at) = (row_name(fa, 0), at_name(fa, i));
                        quote!(#row[#x + #at])
                    }
                    (true, Some(i)) => {
                        let row = passed_row_name(fa, i);
                        quote!(#row[#x])
                    }
                    (false, Some(i)) => {
                        let row = row_name(fa, i);
                        quote!(#row[#x])
                    }
                    (_, None) => unreachable!("every offset read is analysed"),
                }
            }
            ExprKind::Unary(op, a) => {
                let a = self.expr(a, column);
                match op {
                    UnOp::Neg if self.wrapping && e.ty.is_int() => quote!(#a.wrapping_neg()),
                    UnOp::Neg => quote!((-#a)),
                    UnOp::Not => quote!((!#a)),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let int = a.ty.is_int();
                let (a, b) = (self.expr(a, column), self.expr(b, column));
                // A point function is also computed at points nobody reads (a block's widened
                // rows): its integer arithmetic wraps instead of panicking on overflow there.
                let wrapping = match op {
                    BinOp::Add => Some(quote!(wrapping_add)),
                    BinOp::Sub => Some(quote!(wrapping_sub)),
                    BinOp::Mul => Some(quote!(wrapping_mul)),
                    BinOp::Shl => Some(quote!(wrapping_shl)),
                    BinOp::Shr => Some(quote!(wrapping_shr)),
                    _ => None,
                };
                match wrapping {
                    Some(m) if self.wrapping && int && matches!(op, BinOp::Shl | BinOp::Shr) => {
                        quote!(#a.#m(#b as u32))
                    }
                    Some(m) if self.wrapping && int => quote!(#a.#m(#b)),
                    _ => {
                        let op: TokenStream = binop_tokens(*op);
                        quote!((#a #op #b))
                    }
                }
            }
            ExprKind::Cast(a) => {
                let a = self.expr(a, column);
                let ty = ident(e.ty.rust_name());
                quote!((#a as #ty))
            }
            ExprKind::Call(f, args) => {
                let recv = self.expr(&args[0], column);
                let rest = args[1..].iter().map(|a| self.expr(a, column));
                let m = ident(f.rust_name());
                quote!(#recv.#m(#(#rest),*))
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (self.expr(c, column), self.expr(a, column), self.expr(b, column));
                quote!((if #c { #a } else { #b }))
            }
            ExprKind::Level => {
                let l = &self.level;
                quote!(#l)
            }
            ExprKind::Levels => {
                let l = &self.levels;
                quote!(#l)
            }
            ExprKind::PointValue { func, output, offset } => {
                let call = self.point_calls[*func].iter().position(|o| o == offset).expect("every call is listed");
                let (row, x) = (ident(&naming::point_row(*func, *output, call)), &self.x);
                quote!(#row[#x])
            }
        }
    }
}

fn binop_tokens(op: BinOp) -> TokenStream {
    op.symbol().parse().expect("operator tokens")
}

/// A literal typed for `ty` (`1.5f32`, `3i32`, `true`), parenthesised if negative.
fn literal(l: Literal, ty: ScalarType) -> TokenStream {
    match (l, ty) {
        (Literal::Bool(b), _) => {
            if b {
                quote!(true)
            } else {
                quote!(false)
            }
        }
        (Literal::Float(_, v), ScalarType::F32) => float_tokens(v as f64, quote!(f32), |_| Lit::f32_suffixed(v.abs())),
        (Literal::Float(v, _), _) => float_tokens(v, quote!(f64), Lit::f64_suffixed),
        (Literal::Int(v), ScalarType::I32) => signed(v, |v| Lit::i32_suffixed(v as i32)),
        (Literal::Int(v), ScalarType::U32) => signed(v, |v| Lit::u32_suffixed(v as u32)),
        (Literal::Int(v), ScalarType::F32) => float_tokens(v as f64, quote!(f32), |v| Lit::f32_suffixed(v as f32)),
        (Literal::Int(v), _) => float_tokens(v as f64, quote!(f64), Lit::f64_suffixed),
    }
}

fn signed(v: i64, lit: impl Fn(i64) -> Lit) -> TokenStream {
    if v < 0 {
        let l = lit(-v);
        quote!((-#l))
    } else {
        let l = lit(v);
        quote!(#l)
    }
}

fn float_tokens(v: f64, ty: TokenStream, lit: impl Fn(f64) -> Lit) -> TokenStream {
    if v.is_infinite() {
        return if v > 0.0 { quote!(#ty::INFINITY) } else { quote!(#ty::NEG_INFINITY) };
    }
    if v < 0.0 || (v == 0.0 && v.is_sign_negative()) {
        let l = lit(-v);
        quote!((-#l))
    } else {
        let l = lit(v);
        quote!(#l)
    }
}

/// The Rust type of a parameter as the functor's argument tuple spells it, with fields of the
/// executor type parameter `exec` (`&'a <E as Executor>::Field<f32, 3>`).
pub fn param_type(
    kind: ParamKind,
    dim: usize,
    rt: &TokenStream,
    lifetime: &TokenStream,
    exec: &TokenStream,
) -> TokenStream {
    match kind {
        ParamKind::Scalar(t) => {
            let t = ident(t.rust_name());
            quote!(#t)
        }
        ParamKind::Held(t) => {
            let t = ident(t.rust_name());
            quote!(&#lifetime <#exec as #rt::Executor>::HeldScalar<#t>)
        }
        ParamKind::Field(f) => {
            let t = ident(f.elem.rust_name());
            let d = Lit::usize_unsuffixed(dim);
            let field = quote!(<#exec as #rt::Executor>::Field<#t, #d>);
            if f.writable {
                quote!(&#lifetime mut #field)
            } else {
                quote!(&#lifetime #field)
            }
        }
        ParamKind::Reduction(r) => {
            let (op, t) = (ident(r.op.type_name()), ident(r.elem.rust_name()));
            quote!(&#lifetime mut #rt::#op<#t>)
        }
    }
}
