//! The `STENCIL_CPU_*` environment variables, checked once per process: a value a variable does
//! not take is an error of every host launch ([`crate::Error::Setting`]) instead of being
//! ignored, so that a mistyped setting never runs silently with the default. `Choice`: a
//! setting of a few exact values read once (`STENCIL_FUSE_SLABS`, `STENCIL_DIRECT_HALOS`,
//! `STENCIL_ONE_ROUND_HALOS`), with
//! the same error for a value it does not take.

use super::Isa;
use std::fmt;
use std::sync::OnceLock;

/// A `STENCIL_*` setting (`STENCIL_CPU_*`, `STENCIL_FUSE_SLABS`, `STENCIL_DIRECT_HALOS`,
/// `STENCIL_ONE_ROUND_HALOS`) set to a value it does not take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    /// The variable.
    pub variable: &'static str,
    /// Its value.
    pub value: String,
    /// The values it takes.
    pub expected: &'static str,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?} is not a value it takes ({})", self.variable, self.value, self.expected)
    }
}

impl std::error::Error for SettingError {}

/// A variable, what it takes, and whether a (trimmed, lower-case) value is one of those.
type Rule = (&'static str, &'static str, fn(&str) -> bool);

/// Every `STENCIL_CPU_*` variable the runtime reads.
const RULES: &[Rule] = &[
    ("STENCIL_CPU_ISA", "baseline, scalar, sse2, neon, avx2 or avx512", |v| Isa::from_name(v).is_some()),
    ("STENCIL_CPU_BLOCK", "one to three whole numbers separated by commas, e.g. 256,8,16", |v| {
        let parts: Vec<&str> = v.split(',').collect();
        parts.len() <= 3 && parts.iter().all(|p| p.trim().parse::<usize>().is_ok())
    }),
    ("STENCIL_CPU_NT", "auto, on, off, 1 or 0", |v| matches!(v, "auto" | "on" | "off" | "1" | "0")),
    ("STENCIL_CPU_FTZ", "1, on, 0 or off", on_off),
    ("STENCIL_CPU_PIN", "1, on, 0 or off", on_off),
    ("STENCIL_CPU_VERBOSE", "1 or 0", |v| matches!(v, "1" | "0")),
    ("STENCIL_CPU_L2", "a whole number of bytes, e.g. 2097152", whole),
    ("STENCIL_CPU_LLC", "a whole number of bytes, e.g. 33554432", whole),
    ("STENCIL_CPU_SPIN_US", "a whole number of microseconds, e.g. 50", whole),
    ("STENCIL_CPU_POOL", "rayon or workers", |v| matches!(v, "rayon" | "workers")),
    ("STENCIL_CPU_TASKS", "seats or shared", |v| matches!(v, "seats" | "shared")),
];

fn on_off(v: &str) -> bool {
    matches!(v, "1" | "on" | "0" | "off")
}

fn whole(v: &str) -> bool {
    v.parse::<u64>().is_ok()
}

/// The first variable that `var` gives a value it does not take (an empty value counts as
/// unset).
pub fn check_settings(var: impl Fn(&str) -> Option<String>) -> Result<(), SettingError> {
    for &(variable, expected, takes) in RULES {
        let Some(value) = var(variable) else { continue };
        let v = value.trim().to_ascii_lowercase();
        if !v.is_empty() && !takes(&v) {
            return Err(SettingError { variable, value, expected });
        }
    }
    Ok(())
}

/// [`check_settings`] on this process's environment, read once.
pub fn settings() -> Result<(), SettingError> {
    static CHECKED: OnceLock<Result<(), SettingError>> = OnceLock::new();
    CHECKED.get_or_init(|| check_settings(|name| std::env::var(name).ok())).clone()
}

/// A setting that takes one of a few exact values (no trimming, case as listed), read from the
/// environment once per process: unset gives `default`; any other value a [`SettingError`] that
/// lists `expected`.
pub(crate) struct Choice<T: 'static> {
    variable: &'static str,
    values: &'static [(&'static str, T)],
    default: T,
    expected: &'static str,
    read: OnceLock<Result<T, SettingError>>,
}

impl<T: Copy> Choice<T> {
    /// The setting `variable`, taking the names of `values` (unset: `default`); `expected` says
    /// what it takes, for the error.
    pub(crate) const fn new(
        variable: &'static str,
        values: &'static [(&'static str, T)],
        default: T,
        expected: &'static str,
    ) -> Self {
        Choice { variable, values, default, expected, read: OnceLock::new() }
    }

    /// The value in this process's environment, read once.
    pub(crate) fn get(&self) -> Result<T, SettingError> {
        self.read.get_or_init(|| self.parse(std::env::var(self.variable).ok().as_deref())).clone()
    }

    /// The value `value` (`None`: unset) stands for.
    pub(crate) fn parse(&self, value: Option<&str>) -> Result<T, SettingError> {
        let Some(value) = value else { return Ok(self.default) };
        match self.values.iter().find(|(name, _)| *name == value) {
            Some(&(_, v)) => Ok(v),
            None => Err(SettingError { variable: self.variable, value: value.to_string(), expected: self.expected }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<(), SettingError> {
        check_settings(|n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn a_choice_takes_its_values_exactly_and_names_any_other() {
        static SIDE: Choice<i8> = Choice::new("STENCIL_TEST_SIDE", &[("low", -1), ("high", 1)], 0, "low or high");
        assert_eq!(SIDE.parse(None), Ok(0));
        assert_eq!(SIDE.parse(Some("low")), Ok(-1));
        assert_eq!(SIDE.parse(Some("high")), Ok(1));
        // Unlike the `STENCIL_CPU_*` check: no trimming, no case folding, and empty is a value.
        for value in [" low", "High", ""] {
            let e = SIDE.parse(Some(value)).unwrap_err();
            assert_eq!(e, SettingError { variable: "STENCIL_TEST_SIDE", value: value.into(), expected: "low or high" });
            assert_eq!(e.to_string(), format!("STENCIL_TEST_SIDE={value:?} is not a value it takes (low or high)"));
        }
    }

    #[test]
    fn good_values_pass_and_each_bad_one_is_named() {
        let good = [
            ("STENCIL_CPU_ISA", "AVX2"),
            ("STENCIL_CPU_ISA", " scalar "),
            ("STENCIL_CPU_BLOCK", "256, 8,16"),
            ("STENCIL_CPU_BLOCK", "0"),
            ("STENCIL_CPU_NT", "Auto"),
            ("STENCIL_CPU_FTZ", "1"),
            ("STENCIL_CPU_PIN", "off"),
            ("STENCIL_CPU_VERBOSE", "1"),
            ("STENCIL_CPU_L2", "2097152"),
            ("STENCIL_CPU_LLC", ""),
            ("STENCIL_CPU_SPIN_US", "0"),
            ("STENCIL_CPU_POOL", "rayon"),
            ("STENCIL_CPU_TASKS", " Shared"),
        ];
        assert_eq!(with(&good), Ok(()));
        assert_eq!(with(&[]), Ok(()));
        let bad = [
            ("STENCIL_CPU_ISA", "avx1024"),
            ("STENCIL_CPU_BLOCK", "256x8x16"),
            ("STENCIL_CPU_BLOCK", "1,2,3,4"),
            ("STENCIL_CPU_NT", "sometimes"),
            ("STENCIL_CPU_FTZ", "yes"),
            ("STENCIL_CPU_PIN", "2"),
            ("STENCIL_CPU_VERBOSE", "true"),
            ("STENCIL_CPU_L2", "2M"),
            ("STENCIL_CPU_LLC", "-1"),
            ("STENCIL_CPU_SPIN_US", "50us"),
            ("STENCIL_CPU_POOL", "tokio"),
            ("STENCIL_CPU_TASKS", "affine"),
        ];
        for (variable, value) in bad {
            let e = with(&[(variable, value)]).unwrap_err();
            assert_eq!((e.variable, e.value.as_str()), (variable, value));
            let text = e.to_string();
            assert!(text.starts_with(&format!("{variable}={value:?}")) && text.contains(e.expected), "{text}");
        }
    }
}
