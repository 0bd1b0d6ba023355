//! The canonical test stencils, defined once for every test and benchmark: 7-point diffusion
//! (f32, and its f64 twin), the 25-point star (radius 4, f32 and f64), a stencil with two
//! outputs, `if`/`else` and `sqrt`, an f64 stencil, a 2D stencil, an in-place leapfrog update
//! a finite-volume Euler flux with nested `#[stencil_fn]` helpers, and two stencils with point
//! functions (a flux difference with an upwind branch; point functions calling point functions).
//!
//! Element order is a property of the field, not of the stencil: the same functors run on
//! `Order::Kij` fields (see [`ORDERS`]; the equivalence, GPU and kernel tests do).
//!
//! Each function is defined through `with_source!`, which also keeps its source text in a
//! `..._SOURCE` constant, so a test can lower the very same function with `stencil_codegen` and
//! compare it with the IR the macro embedded. The plain-Rust references (`*_ref`) evaluate the
//! same expressions in the same order as the stencil bodies, so results are bit-equal.

use crate::{nb, Real};
use stencil_runtime::prelude::*;
use stencil_runtime::{Field, Order};

/// Both element orders, for tests that run every stencil on both.
pub const ORDERS: [Order; 2] = [Order::Ijk, Order::Kij];

/// Defines a `#[stencil]` or `#[stencil_fn]` function and keeps its source text, as written,
/// in the constant `$source`.
macro_rules! with_source {
    ($source:ident, #[$attr:ident $(($($arg:tt)*))?] $item:item) => {
        #[$attr $(($($arg)*))?]
        $item

        #[doc = concat!("The source text of the function defined next to `", stringify!($source), "`.")]
        pub const $source: &str = stringify!($item);
    };
}

/// 7-point diffusion (ASUCA's `Diffusion3d`) of element type `$t`.
macro_rules! diffusion7 {
    ($name:ident, $source:ident, $t:ident $(, $opt:ident)?) => {
        with_source!(
            $source,
            #[stencil($($opt)?)]
            pub fn $name(
                idx: Idx3,
                ce: $t,
                cw: $t,
                cn: $t,
                cs: $t,
                ct: $t,
                cb: $t,
                cc: $t,
                f: &Field3<$t>,
                f_new: &mut Field3<$t>,
            ) {
                f_new[idx] = cc * f[idx]
                    + ce * f[idx.ix::<1, 0, 0>()]
                    + cw * f[idx.ix::<-1, 0, 0>()]
                    + cn * f[idx.ix::<0, 1, 0>()]
                    + cs * f[idx.ix::<0, -1, 0>()]
                    + ct * f[idx.ix::<0, 0, 1>()]
                    + cb * f[idx.ix::<0, 0, -1>()];
            }
        );
    };
}
diffusion7!(diffusion, DIFFUSION_SOURCE, f32);
diffusion7!(diffusion7_f64, DIFFUSION7_F64_SOURCE, f64);
diffusion7!(diffusion_fma, DIFFUSION_FMA_SOURCE, f32, fma);
diffusion7!(diffusion7_f64_fma, DIFFUSION7_F64_FMA_SOURCE, f64, fma);

/// [`Diffusion`]'s (and [`Diffusion7F64`]'s) point update; `c` is `[ce, cw, cn, cs, ct, cb, cc]`,
/// the stencil's scalar order.
pub fn diffusion_ref<T: Real>(c: [T; 7], f: &Field<T, 3>, g: [isize; 3]) -> T {
    let [ce, cw, cn, cs, ct, cb, cc] = c;
    cc * nb(f, g, [0, 0, 0])
        + ce * nb(f, g, [1, 0, 0])
        + cw * nb(f, g, [-1, 0, 0])
        + cn * nb(f, g, [0, 1, 0])
        + cs * nb(f, g, [0, -1, 0])
        + ct * nb(f, g, [0, 0, 1])
        + cb * nb(f, g, [0, 0, -1])
}

/// [`DiffusionFma`]'s (and [`Diffusion7F64Fma`]'s) point update: [`diffusion_ref`]'s sum with each
/// product after the first fused into the sum so far, as `#[stencil(fma)]` fuses it.
pub fn diffusion_fma_ref<T: Real>(c: [T; 7], f: &Field<T, 3>, g: [isize; 3]) -> T {
    let [ce, cw, cn, cs, ct, cb, cc] = c;
    let mut sum = cc * nb(f, g, [0, 0, 0]);
    for (k, o) in
        [(ce, [1, 0, 0]), (cw, [-1, 0, 0]), (cn, [0, 1, 0]), (cs, [0, -1, 0]), (ct, [0, 0, 1]), (cb, [0, 0, -1])]
    {
        sum = k.mul_add(nb(f, g, o), sum);
    }
    sum
}

/// The 25-point star (radius 4, 8th-order Laplacian): one step of the wave equation
/// `u_next = 2u - u_prev + c * v2 * lap(u)`, of element type `$t`.
macro_rules! star25 {
    ($name:ident, $source:ident, $t:ident $(, $opt:ident)?) => {
        with_source!(
            $source,
            #[stencil($($opt)?)]
            pub fn $name(
                idx: Idx3,
                c: $t,
                u: &Field3<$t>,
                u_prev: &Field3<$t>,
                v2: &Field3<$t>,
                u_next: &mut Field3<$t>,
            ) {
                let c0 = -205.0 / 72.0;
                let c1 = 8.0 / 5.0;
                let c2 = -1.0 / 5.0;
                let c3 = 8.0 / 315.0;
                let c4 = -1.0 / 560.0;
                let lap = 3.0 * c0 * u[idx]
                    + c1 * (u[idx.ix::<1, 0, 0>()]
                        + u[idx.ix::<-1, 0, 0>()]
                        + u[idx.ix::<0, 1, 0>()]
                        + u[idx.ix::<0, -1, 0>()]
                        + u[idx.ix::<0, 0, 1>()]
                        + u[idx.ix::<0, 0, -1>()])
                    + c2 * (u[idx.ix::<2, 0, 0>()]
                        + u[idx.ix::<-2, 0, 0>()]
                        + u[idx.ix::<0, 2, 0>()]
                        + u[idx.ix::<0, -2, 0>()]
                        + u[idx.ix::<0, 0, 2>()]
                        + u[idx.ix::<0, 0, -2>()])
                    + c3 * (u[idx.ix::<3, 0, 0>()]
                        + u[idx.ix::<-3, 0, 0>()]
                        + u[idx.ix::<0, 3, 0>()]
                        + u[idx.ix::<0, -3, 0>()]
                        + u[idx.ix::<0, 0, 3>()]
                        + u[idx.ix::<0, 0, -3>()])
                    + c4 * (u[idx.ix::<4, 0, 0>()]
                        + u[idx.ix::<-4, 0, 0>()]
                        + u[idx.ix::<0, 4, 0>()]
                        + u[idx.ix::<0, -4, 0>()]
                        + u[idx.ix::<0, 0, 4>()]
                        + u[idx.ix::<0, 0, -4>()]);
                u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
            }
        );
    };
}
star25!(star25, STAR25_SOURCE, f32);
star25!(star25_f64, STAR25_F64_SOURCE, f64);
star25!(star25_fma, STAR25_FMA_SOURCE, f32, fma);
star25!(star25_f64_fma, STAR25_F64_FMA_SOURCE, f64, fma);

/// The sum of the six points at distance `r` from `g` along the axes, in the stencils' order.
fn star25_ring<T: Real>(u: &Field<T, 3>, g: [isize; 3], r: isize) -> T {
    nb(u, g, [r, 0, 0])
        + nb(u, g, [-r, 0, 0])
        + nb(u, g, [0, r, 0])
        + nb(u, g, [0, -r, 0])
        + nb(u, g, [0, 0, r])
        + nb(u, g, [0, 0, -r])
}

/// [`Star25`]'s (and [`Star25F64`]'s) point update.
pub fn star25_ref<T: Real>(c: T, u: &Field<T, 3>, u_prev: &Field<T, 3>, v2: &Field<T, 3>, g: [isize; 3]) -> T {
    let ring = |r: isize| star25_ring(u, g, r);
    let c0 = -T::lit(205.0) / T::lit(72.0);
    let c1 = T::lit(8.0) / T::lit(5.0);
    let c2 = -T::lit(1.0) / T::lit(5.0);
    let c3 = T::lit(8.0) / T::lit(315.0);
    let c4 = -T::lit(1.0) / T::lit(560.0);
    let centre = nb(u, g, [0, 0, 0]);
    let lap = T::lit(3.0) * c0 * centre + c1 * ring(1) + c2 * ring(2) + c3 * ring(3) + c4 * ring(4);
    T::lit(2.0) * centre - nb(u_prev, g, [0, 0, 0]) + c * nb(v2, g, [0, 0, 0]) * lap
}

/// [`Star25Fma`]'s (and [`Star25F64Fma`]'s) point update: [`star25_ref`] with each product that
/// is added fused, as `#[stencil(fma)]` fuses it.
pub fn star25_fma_ref<T: Real>(c: T, u: &Field<T, 3>, u_prev: &Field<T, 3>, v2: &Field<T, 3>, g: [isize; 3]) -> T {
    let ring = |r: isize| star25_ring(u, g, r);
    let c0 = -T::lit(205.0) / T::lit(72.0);
    let ck = [
        T::lit(8.0) / T::lit(5.0),
        -T::lit(1.0) / T::lit(5.0),
        T::lit(8.0) / T::lit(315.0),
        -T::lit(1.0) / T::lit(560.0),
    ];
    let centre = nb(u, g, [0, 0, 0]);
    let mut lap = T::lit(3.0) * c0 * centre;
    for (r, k) in (1..=4).zip(ck) {
        lap = k.mul_add(ring(r), lap);
    }
    let old = T::lit(2.0).mul_add(centre, -nb(u_prev, g, [0, 0, 0]));
    (c * nb(v2, g, [0, 0, 0])).mul_add(lap, old)
}

with_source!(
    BRANCHY_SOURCE,
    #[stencil]
    /// Two outputs, if/else as statement and expression, sqrt, max, a mutable local, a box corner.
    pub fn branchy(
        idx: Idx3,
        limit: f32,
        flip: bool,
        a: &Field3<f32>,
        b: &Field3<f32>,
        lo: &mut Field3<f32>,
        hi: &mut Field3<f32>,
    ) {
        let g = a[idx.ix::<1, 1, 0>()] - a[idx.ix::<-1, 0, -1>()];
        let mut s = (g * g + b[idx] * b[idx]).sqrt();
        if s > limit {
            s = limit;
        } else if flip {
            s = -s;
        }
        let w = if b[idx.ix::<0, 0, 1>()] > 0.0 { b[idx.ix::<0, 0, 1>()] } else { a[idx].max(0.5) };
        lo[idx] = s - w;
        if a[idx] > 0.0 {
            hi[idx] = s + w;
        } else {
            hi[idx] = w / (1.0 + s);
        }
    }
);

/// [`Branchy`]'s point update: `(lo, hi)`.
pub fn branchy_ref(limit: f32, flip: bool, a: &Field<f32, 3>, b: &Field<f32, 3>, g: [isize; 3]) -> (f32, f32) {
    let g_ = nb(a, g, [1, 1, 0]) - nb(a, g, [-1, 0, -1]);
    let b0 = nb(b, g, [0, 0, 0]);
    let mut s = (g_ * g_ + b0 * b0).sqrt();
    if s > limit {
        s = limit;
    } else if flip {
        s = -s;
    }
    let w = if nb(b, g, [0, 0, 1]) > 0.0 { nb(b, g, [0, 0, 1]) } else { nb(a, g, [0, 0, 0]).max(0.5) };
    let hi = if nb(a, g, [0, 0, 0]) > 0.0 { s + w } else { w / (1.0 + s) };
    (s - w, hi)
}

with_source!(
    DIFFUSION_F64_SOURCE,
    #[stencil]
    /// An f64 stencil reaching 2 points along k.
    pub fn diffusion_f64(idx: Idx3, k: f64, f: &Field3<f64>, out: &mut Field3<f64>) {
        out[idx] = f[idx]
            + k * (f[idx.ix::<1, 0, 0>()]
                + f[idx.ix::<-1, 0, 0>()]
                + f[idx.ix::<0, 1, 0>()]
                + f[idx.ix::<0, -1, 0>()]
                + f[idx.ix::<0, 0, 2>()]
                + f[idx.ix::<0, 0, -2>()]
                - 6.0 * f[idx]);
    }
);

/// [`DiffusionF64`]'s point update.
pub fn diffusion_f64_ref(k: f64, f: &Field<f64, 3>, g: [isize; 3]) -> f64 {
    let at = |o: [isize; 3]| nb(f, g, o);
    at([0, 0, 0])
        + k * (at([1, 0, 0]) + at([-1, 0, 0]) + at([0, 1, 0]) + at([0, -1, 0]) + at([0, 0, 2]) + at([0, 0, -2])
            - 6.0 * at([0, 0, 0]))
}

with_source!(
    JACOBI2D_SOURCE,
    #[stencil]
    /// A 2D weighted Jacobi sweep.
    pub fn jacobi2d(idx: Idx2, w: f32, u: &Field2<f32>, rhs: &Field2<f32>, out: &mut Field2<f32>) {
        out[idx] = (1.0 - w) * u[idx]
            + w * 0.25
                * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()] - rhs[idx]);
    }
);

/// [`Jacobi2d`]'s point update.
pub fn jacobi2d_ref(w: f32, u: &Field<f32, 2>, rhs: &Field<f32, 2>, g: [isize; 2]) -> f32 {
    let at = |o: [isize; 2]| nb(u, g, o);
    (1.0 - w) * at([0, 0]) + w * 0.25 * (at([1, 0]) + at([-1, 0]) + at([0, 1]) + at([0, -1]) - nb(rhs, g, [0, 0]))
}

with_source!(
    LEAPFROG7_SOURCE,
    #[stencil]
    /// A leapfrog step updated in place: `u_prev` is read at its own point and overwritten (the
    /// acoustic model's pattern), so the kernels must load it as an output field.
    pub fn leapfrog7(idx: Idx3, c: f32, u: &Field3<f32>, u_prev: &mut Field3<f32>) {
        let lap = u[idx.ix::<1, 0, 0>()]
            + u[idx.ix::<-1, 0, 0>()]
            + u[idx.ix::<0, 1, 0>()]
            + u[idx.ix::<0, -1, 0>()]
            + u[idx.ix::<0, 0, 1>()]
            + u[idx.ix::<0, 0, -1>()]
            - 6.0 * u[idx];
        u_prev[idx] = 2.0 * u[idx] - u_prev[idx] + c * lap;
    }
);

with_source!(
    MINMOD_SOURCE,
    #[stencil_fn]
    /// Minmod slope limiter.
    pub fn minmod(a: f64, b: f64) -> f64 {
        if a * b <= 0.0 {
            0.0
        } else if a.abs() < b.abs() {
            a
        } else {
            b
        }
    }
);

with_source!(
    PRESSURE_SOURCE,
    #[stencil_fn]
    /// Pressure of a conserved Euler state `(rho, rho u, rho v, rho w, E)`.
    pub fn pressure(q: [f64; 5], gamma: f64) -> f64 {
        let ke = 0.5 * (q[1] * q[1] + q[2] * q[2] + q[3] * q[3]) / q[0];
        (gamma - 1.0) * (q[4] - ke)
    }
);

with_source!(
    FLUX_X_SOURCE,
    #[stencil_fn]
    /// The x-flux of a state and its fastest signal speed `|u| + c`.
    pub fn flux_x(q: [f64; 5], gamma: f64) -> ([f64; 5], f64) {
        let p = pressure(q, gamma);
        let u = q[1] / q[0];
        let c = (gamma * p / q[0]).sqrt();
        ([q[1], q[1] * u + p, q[2] * u, q[3] * u, (q[4] + p) * u], u.abs() + c)
    }
);

with_source!(
    MUSCL_SOURCE,
    #[stencil_fn]
    /// MUSCL reconstruction with minmod of the two states at the face between `q0` and `q1`.
    pub fn muscl(qm: [f64; 5], q0: [f64; 5], q1: [f64; 5], q2: [f64; 5]) -> ([f64; 5], [f64; 5]) {
        let mut ql = q0;
        let mut qr = q1;
        for v in 0..5 {
            ql[v] += 0.5 * minmod(q0[v] - qm[v], q1[v] - q0[v]);
            qr[v] -= 0.5 * minmod(q1[v] - q0[v], q2[v] - q1[v]);
        }
        (ql, qr)
    }
);

with_source!(
    RUSANOV_SOURCE,
    #[stencil_fn]
    /// The Rusanov (local Lax-Friedrichs) flux between two states.
    pub fn rusanov(ql: [f64; 5], qr: [f64; 5], gamma: f64) -> [f64; 5] {
        let (fl, sl) = flux_x(ql, gamma);
        let (fr, sr) = flux_x(qr, gamma);
        let s = sl.max(sr);
        let mut f = [0.0; 5];
        for v in 0..5 {
            f[v] = 0.5 * (fl[v] + fr[v]) - 0.5 * s * (qr[v] - ql[v]);
        }
        f
    }
);

/// The sources of the `#[stencil_fn]` helpers [`EulerFluxX`] reaches.
pub const EULER_HELPER_SOURCES: [&str; 5] =
    [MUSCL_SOURCE, MINMOD_SOURCE, RUSANOV_SOURCE, FLUX_X_SOURCE, PRESSURE_SOURCE];

with_source!(
    EULER_FLUX_X_SOURCE,
    #[stencil]
    /// Finite-volume Euler: the Rusanov flux through the face between cells i and i+1 of MUSCL
    /// reconstructed states; 5 inputs, 5 outputs, arrays and nested `#[stencil_fn]` helpers.
    pub fn euler_flux_x(
        idx: Idx3,
        gamma: f64,
        rho: &Field3<f64>,
        mx: &Field3<f64>,
        my: &Field3<f64>,
        mz: &Field3<f64>,
        e: &Field3<f64>,
        f_rho: &mut Field3<f64>,
        f_mx: &mut Field3<f64>,
        f_my: &mut Field3<f64>,
        f_mz: &mut Field3<f64>,
        f_e: &mut Field3<f64>,
    ) {
        let qm = [
            rho[idx.ix::<-1, 0, 0>()],
            mx[idx.ix::<-1, 0, 0>()],
            my[idx.ix::<-1, 0, 0>()],
            mz[idx.ix::<-1, 0, 0>()],
            e[idx.ix::<-1, 0, 0>()],
        ];
        let q0 = [rho[idx], mx[idx], my[idx], mz[idx], e[idx]];
        let q1 = [
            rho[idx.ix::<1, 0, 0>()],
            mx[idx.ix::<1, 0, 0>()],
            my[idx.ix::<1, 0, 0>()],
            mz[idx.ix::<1, 0, 0>()],
            e[idx.ix::<1, 0, 0>()],
        ];
        let q2 = [
            rho[idx.ix::<2, 0, 0>()],
            mx[idx.ix::<2, 0, 0>()],
            my[idx.ix::<2, 0, 0>()],
            mz[idx.ix::<2, 0, 0>()],
            e[idx.ix::<2, 0, 0>()],
        ];
        let (ql, qr) = muscl(qm, q0, q1, q2);
        let f = rusanov(ql, qr, gamma);
        f_rho[idx] = f[0];
        f_mx[idx] = f[1];
        f_my[idx] = f[2];
        f_mz[idx] = f[3];
        f_e[idx] = f[4];
    }
);

/// A flux-difference update: a face flux per axis with an upwind branch, each face's flux
/// evaluated by both cells that share it.
#[stencil]
pub fn flux_update(idx: Idx3, c: f64, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    let fx = |p: Idx3| {
        let (l, r) = (u[p], u[p.ix::<1, 0, 0>()]);
        let s = v[p] + v[p.ix::<1, 0, 0>()];
        if s > 0.0 {
            s * l
        } else {
            s * r - (l - r).abs().sqrt()
        }
    };
    let fy = |p: Idx3| 0.5 * (u[p] + u[p.ix::<0, 1, 0>()]) * v[p.ix::<0, 1, 0>()];
    let fz = |p: Idx3| (u[p.ix::<0, 0, 1>()] - u[p]) * c;
    out[idx] = u[idx]
        - c * ((fx(idx) - fx(idx.ix::<-1, 0, 0>()))
            + (fy(idx) - fy(idx.ix::<0, -1, 0>()))
            + (fz(idx) - fz(idx.ix::<0, 0, -1>())));
}

/// Point functions read over different boxes of offsets: `a`, a flux reaching two points up
/// along z, at the point and one down; `b` at the point and one up. A first pass that wrote
/// both over the union of their boxes would compute `a` one point up too and read `u` three
/// points up: past a halo of 2, which is all the stencil needs.
#[stencil]
pub fn split_boxes(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    let a = |p: Idx3| u[p.ix::<0, 0, 2>()] - u[p];
    let b = |p: Idx3| v[p] * 0.5 + u[p];
    out[idx] = a(idx) - a(idx.ix::<0, 0, -1>()) + b(idx.ix::<0, 0, 1>()) * b(idx);
}

/// [`split_boxes`] as a sum that starts with terms at the point itself (so it has a point
/// pass), with the boxes apart along x as well.
#[stencil]
pub fn split_boxes_sum(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    let a = |p: Idx3| u[p.ix::<0, 0, 2>()] - u[p.ix::<-2, 0, 0>()];
    let b = |p: Idx3| v[p] * 0.5 + u[p];
    out[idx] = v[idx] * 0.25 + a(idx) + b(idx) + a(idx.ix::<0, 0, -1>()) * 0.5 + b(idx.ix::<1, 0, 1>());
}

/// Point functions calling earlier ones: a pair of values per point, face values from them along
/// x and z, and the pair at the point itself in the body too.
#[stencil]
pub fn nested(idx: Idx3, g: f64, q: &Field3<f64>, r: &Field3<f64>, out: &mut Field3<f64>) {
    let w = |p: Idx3| [q[p] / r[p], (q[p] * g).sqrt()];
    let fx = |p: Idx3| {
        let (a, b) = (w(p.ix::<-1, 0, 0>()), w(p.ix::<1, 0, 0>()));
        a[0] * b[1] - w(p)[0]
    };
    let fz = |p: Idx3| w(p.ix::<0, 0, 1>())[1] - w(p)[1];
    out[idx] = fx(idx) - fx(idx.ix::<-1, 0, 0>()) + fz(idx) * fz(idx.ix::<0, 0, -1>()) + w(idx)[0];
}

/// Point functions needed only away from the point itself: on two planes with a gap between
/// them, at diagonals, calling each other on other planes (what the depot kernel's rings and
/// widened tiles must get right at the edges of a range).
#[stencil]
pub fn lopsided(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    let a = |p: Idx3| u[p] * v[p.ix::<0, 1, 0>()] + 0.25;
    let b = |p: Idx3| a(p.ix::<1, 0, -1>()) + a(p.ix::<1, 0, 1>()) * u[p.ix::<0, 0, 1>()];
    let d = |p: Idx3| (b(p.ix::<1, -1, 0>()), a(p.ix::<-1, 1, 1>()) - v[p]);
    let (d0, d1) = d(idx.ix::<0, 0, 1>());
    let (e0, e1) = d(idx.ix::<-1, 1, -1>());
    out[idx] = d0 * e0 - d1 * e1 + b(idx.ix::<1, 1, 0>());
}

/// [`lopsided`] with `b` costly enough for a ring of planes in the depot kernel: `d`, needed on
/// one plane at a single point off the tile point, reads `b` at the point it is needed for,
/// which is another thread's entry of `b`'s ring (so `b` is computed there instead).
#[stencil]
pub fn lopsided_ring(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, out: &mut Field3<f64>) {
    let a = |p: Idx3| u[p] * v[p.ix::<0, 1, 0>()] + 0.25;
    let b = |p: Idx3| {
        let s = a(p.ix::<1, 0, -1>()) + a(p.ix::<1, 0, 1>()) * u[p.ix::<0, 0, 1>()];
        s * (u[p] + 1.0) / (v[p] * v[p] + 2.0) - u[p] * v[p] * 3.0
    };
    let d = |p: Idx3| (b(p.ix::<1, -1, 0>()), a(p.ix::<-1, 1, 1>()) - v[p]);
    let (d0, d1) = d(idx.ix::<0, 0, 1>());
    let (e0, e1) = d(idx.ix::<-1, 1, -1>());
    out[idx] = d0 * e0 - d1 * e1 + b(idx.ix::<1, 1, 0>());
}
