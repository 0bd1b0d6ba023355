//! Which vector instruction set the CPU nest runs with: detected once per process, lowered (never
//! raised past what the CPU has) by `STENCIL_CPU_ISA=baseline|avx2|avx512` (`scalar` is another
//! name of `baseline`) or [`set_isa`]. `STENCIL_CPU_ISA=avx2` on an AVX-512 CPU runs the code an
//! AVX2-only CPU (AMD Zen 3, Intel client CPUs) runs.
//!
//! The macro prints each stencil's row loop once and compiles it three times on x86-64: plain
//! (the build's baseline, SSE2 by default), inside a `#[target_feature(enable = "avx2,fma")]`
//! function and inside an AVX-512 one; the launch picks one by [`isa`]. None of them enables
//! floating-point contraction (Rust emits no `contract` flags), so the three give the same bits;
//! a stencil's `mul_add`s (`#[stencil(fma)]`) are FMA instructions at the two vector levels and
//! correctly rounded software on the baseline, the same bits again.

use std::sync::atomic::{AtomicU8, Ordering};

/// A vector instruction set level of the CPU nest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// What the build targets (SSE2 on x86-64; NEON on aarch64).
    Baseline,
    /// AVX2 and FMA (256-bit vectors).
    Avx2,
    /// AVX-512 F, VL, BW, DQ (512-bit vectors).
    Avx512,
}

impl Isa {
    /// Every level, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Baseline, Isa::Avx2, Isa::Avx512];

    /// The name `STENCIL_CPU_ISA` takes.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses [`Isa::name`]; `scalar`, `sse2` and `neon` also name [`Isa::Baseline`] (the
    /// build's own level: the portable fallback, and what an aarch64 build always runs).
    pub fn from_name(name: &str) -> Option<Isa> {
        let name = name.trim();
        if ["scalar", "sse2", "neon"].iter().any(|a| a.eq_ignore_ascii_case(name)) {
            return Some(Isa::Baseline);
        }
        Isa::ALL.into_iter().find(|i| i.name().eq_ignore_ascii_case(name))
    }

    /// Whether this CPU runs code of this level.
    pub fn supported(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The highest level this CPU runs.
    pub fn detected() -> Isa {
        Isa::ALL.into_iter().rev().find(|i| i.supported()).unwrap_or(Isa::Baseline)
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }
}

/// 0: not decided yet; otherwise `Isa::code`.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The level launches use: the highest the CPU runs, lowered by `STENCIL_CPU_ISA` or
/// [`set_isa`]. Cheap after the first call (one relaxed load).
#[inline]
pub fn isa() -> Isa {
    match CHOSEN.load(Ordering::Relaxed) {
        0 => {
            let wanted = std::env::var("STENCIL_CPU_ISA").ok().and_then(|v| Isa::from_name(&v));
            choose(wanted)
        }
        c => Isa::ALL[c as usize - 1],
    }
}

/// Sets the level of later launches: `Some(level)` is lowered to what the CPU runs, `None`
/// goes back to the highest. Returns the level now in force.
pub fn set_isa(level: Option<Isa>) -> Isa {
    choose(level)
}

fn choose(level: Option<Isa>) -> Isa {
    let best = Isa::detected();
    let chosen = level.map_or(best, |l| l.min(best));
    CHOSEN.store(chosen.code(), Ordering::Relaxed);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases() {
        for i in Isa::ALL {
            assert_eq!(Isa::from_name(i.name()), Some(i));
        }
        for a in ["scalar", " SSE2 ", "neon", "Baseline"] {
            assert_eq!(Isa::from_name(a), Some(Isa::Baseline), "{a}");
        }
        assert_eq!(Isa::from_name("avx1024"), None);
        assert!(Isa::Baseline.supported());
    }
}
