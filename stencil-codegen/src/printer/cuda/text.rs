//! Small pieces of C text every CUDA printer writes: signed offsets appended to an index, and
//! vector types.

use super::c_body::c_type;
use crate::ir::ScalarType;

/// `" + 3LL"`, `" - 520LL"` or `""`.
pub(super) fn plus(v: i64) -> String {
    match v.cmp(&0) {
        std::cmp::Ordering::Equal => String::new(),
        std::cmp::Ordering::Greater => format!(" + {v}LL"),
        std::cmp::Ordering::Less => format!(" - {}LL", -v),
    }
}

/// `" + 3"`, `" - 2"` or `""`, for `int` expressions.
pub(super) fn plus32(v: i32) -> String {
    plus(v as i64).trim_end_matches("LL").to_string()
}

/// The CUDA vector type of `lanes` elements of `t` (the scalar type for one lane).
pub(super) fn vector_type(t: ScalarType, lanes: u32) -> String {
    let base = match t {
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
        ScalarType::I32 => "int",
        ScalarType::U32 => "uint",
        ScalarType::Bool => unreachable!("no bool fields"),
    };
    if lanes == 1 {
        c_type(t).to_string()
    } else {
        format!("{base}{lanes}")
    }
}
