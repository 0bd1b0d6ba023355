//! Prints the CUDA C that a stencil runs as, for a strategy and a grid, with its launch shape:
//! `cargo run --release --bin print_cuda -- --strategy zmarch --size 256`.
//! No GPU needed: this is the code `range.with_strategy(s).run_on(...)` compiles with NVRTC.

use clap::{Parser, ValueEnum};
use stencil_examples::diffusion::{Diffusion3d, Diffusion3dF64};
use stencil_runtime::prelude::*;
use stencil_runtime::{cuda_kernel, Strategy};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Kind {
    /// One thread per point, 32x4x2 blocks.
    Point,
    /// z-marching, 64x4 threads, 16 points each, 16-byte accesses where aligned.
    Zmarch,
    /// 2.5D streaming with a 32x8 shared-memory plane and a register queue.
    Stream25d,
    /// 32x4x4 shared-memory tiles.
    Smem3d,
}

#[derive(Parser, Debug)]
#[command(about = "Print the CUDA kernel of the diffusion3d stencil for a strategy")]
struct Args {
    /// Blocking strategy.
    #[arg(long, value_enum, default_value = "zmarch")]
    strategy: Kind,
    /// Interior points per axis.
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Element order of the fields.
    #[arg(long, default_value = "ijk")]
    layout: String,
    /// Print the f64 variant.
    #[arg(long)]
    f64: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let strategy = match args.strategy {
        Kind::Point => Strategy::PointPerThread { block: [32, 4, 2] },
        Kind::Zmarch => Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        Kind::Stream25d => Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        Kind::Smem3d => Strategy::SharedTile3D { tile: [32, 4, 4] },
    };
    let order = match args.layout.as_str() {
        "ijk" => Order::Ijk,
        "kij" => Order::Kij,
        other => return Err(format!("unknown layout `{other}`: use ijk or kij").into()),
    };
    let shape = Shape3::new([args.size; 3]).halo(1).order(order);
    let range = Loop3D::interior(&shape);
    let k = if args.f64 {
        cuda_kernel::<Diffusion3dF64, 3>(strategy, &shape, &range)?
    } else {
        cuda_kernel::<Diffusion3d, 3>(strategy, &shape, &range)?
    };
    let grid = k.grid(stencil_runtime::cuda_source::layout_lengths(&shape, &range), shape.offset(range.begin()) as i64);
    println!("// {}: grid {grid:?}, block {:?}, dynamic shared memory {} B", k.entry, k.block, k.shared_bytes);
    println!("{}", k.source);
    Ok(())
}
