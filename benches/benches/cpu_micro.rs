//! CPU micro-benchmarks with criterion (`cargo bench -p stencil-bench --bench cpu_micro`): the
//! cost of a launch on a tiny range (what a small subdomain pays per stencil), one 7-point and one
//! 25-point sweep of a 64³ cube (cache-resident), the halo fill of a field, and the halo exchange
//! between two host subdomains. The bandwidth-level figures are `cpu_bench` and `cpu_peers`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use stencil_bench::{Acoustic25, Diffusion7};
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains};

const C7: [f32; 7] = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4];

fn launches(c: &mut Criterion) {
    let mut group = c.benchmark_group("launch");
    for n in [4usize, 16, 64] {
        let shape = Shape3::new([n; 3]).halo(1);
        let f = Field3::from_fn(shape, |[i, j, k]| (i + 2 * j + 3 * k) as f32);
        let mut g = Field3::zeros(shape);
        let range = Loop3D::interior(&shape);
        group.throughput(Throughput::Elements((n * n * n) as u64));
        group.bench_function(format!("diffusion7 {n}^3 f32"), |b| {
            b.iter(|| range.run(Diffusion7, (C7[0], C7[1], C7[2], C7[3], C7[4], C7[5], C7[6], &f, &mut g)).unwrap());
            black_box(&g);
        });
    }
    let shape = Shape3::new([64; 3]).halo(4);
    let u = Field3::from_fn(shape, |[i, j, k]| ((i * j + k) % 7) as f32);
    let (up, v2) = (u.clone(), Field3::filled(shape, 2.25e6f32));
    let mut next = Field3::zeros(shape);
    let range = Loop3D::interior(&shape);
    group.throughput(Throughput::Elements(64 * 64 * 64));
    group.bench_function("acoustic25 64^3 f32", |b| {
        b.iter(|| range.run(Acoustic25, (1e-8, &u, &up, &v2, &mut next)).unwrap());
        black_box(&next);
    });
    group.finish();
}

fn halos(c: &mut Criterion) {
    let mut group = c.benchmark_group("halo");
    let shape = Shape3::new([64; 3]).halo(2);
    let mut f = Field3::from_fn(shape, |[i, j, k]| (i - j + k) as f64);
    group.bench_function("periodic fill 64^3 halo 2 f64", |b| {
        b.iter(|| Host.fill_halos(&mut [(&mut f, [Some(HaloFill::Periodic); 3])]).unwrap());
    });
    let d = Decomposition::with_grid([64; 3], 2, None, [true; 3], [2; 3]).unwrap();
    let domains = Domains::new(d, vec![Host, Host]).unwrap();
    let mut parts = domains.scatter(&f).unwrap();
    group.bench_function("exchange 2 subdomains of 64x64x32 halo 2 f64", |b| {
        b.iter(|| domains.exchange(&mut parts).unwrap());
    });
    group.finish();
}

criterion_group!(benches, launches, halos);
criterion_main!(benches);
