//! Host fields: a shape (interior, halo, element order, padded contiguous axis) and an aligned buffer.
//!
//! Coordinates come in two spellings:
//! - *global* coordinates `[isize; D]` index the interior from 0 to `n - 1`; halo cells are negative
//!   or `>= n`. Constructors from closures and `get`/`set` use them.
//! - *storage* coordinates `[usize; D]` start at the first halo cell (`global + halo`). Ranges
//!   (`Loop1D/2D/3D`) use them, as ASUCA's `Loop3D(nx + 2*m, m, m, ...)` does.

mod buffer;
mod halo;
mod shape;

use buffer::available_memory;
pub use buffer::AlignedBuf;
pub(crate) use halo::check as check_halo;
pub use halo::{HaloError, HaloFill};
pub use shape::{Order, Shape, Shape1, Shape2, Shape3, DEFAULT_ALIGN};

use crate::range::RangeError;
use std::fmt;

/// A scalar type a field may hold: what the stencil DSL supports as field elements.
pub trait Element: Copy + Send + Sync + Default + PartialEq + fmt::Debug + 'static {
    /// The name of this type in the stencil DSL (`f32`, `f64`, `i32`, `u32`).
    const NAME: &'static str;
    /// `-self` (wrapping for integers), as [`HaloFill::MirrorNegated`] writes it.
    fn negated(self) -> Self;
    /// `self + other` (wrapping for integers), as [`Executor::add_at`](crate::Executor::add_at)
    /// adds.
    fn plus(self, other: Self) -> Self;
    /// Appends the value's little-endian bytes (what a message between ranks carries).
    fn put_le(self, out: &mut Vec<u8>);
    /// The value of `bytes` (little-endian, exactly the type's size), as [`Element::put_le`] wrote it.
    fn get_le(bytes: &[u8]) -> Self;
}
impl Element for f32 {
    const NAME: &'static str = "f32";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get_le(bytes: &[u8]) -> Self {
        f32::from_le_bytes(bytes.try_into().expect("one element's bytes"))
    }
    fn negated(self) -> Self {
        -self
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
}
impl Element for f64 {
    const NAME: &'static str = "f64";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get_le(bytes: &[u8]) -> Self {
        f64::from_le_bytes(bytes.try_into().expect("one element's bytes"))
    }
    fn negated(self) -> Self {
        -self
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
}
impl Element for i32 {
    const NAME: &'static str = "i32";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get_le(bytes: &[u8]) -> Self {
        i32::from_le_bytes(bytes.try_into().expect("one element's bytes"))
    }
    fn negated(self) -> Self {
        self.wrapping_neg()
    }
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}
impl Element for u32 {
    const NAME: &'static str = "u32";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get_le(bytes: &[u8]) -> Self {
        u32::from_le_bytes(bytes.try_into().expect("one element's bytes"))
    }
    fn negated(self) -> Self {
        self.wrapping_neg()
    }
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

/// A `D`-dimensional field on the host, stored with the layout its [`Shape`] describes.
#[derive(Clone)]
pub struct Field<T: Element, const D: usize> {
    shape: Shape<D>,
    data: AlignedBuf<T>,
    /// The boundary declared by [`Executor::declare_boundary`](crate::Executor::declare_boundary).
    boundary: Option<[Option<HaloFill>; D]>,
}

/// A 1D host field.
pub type Field1<T> = Field<T, 1>;
/// A 2D host field.
pub type Field2<T> = Field<T, 2>;
/// A 3D host field.
pub type Field3<T> = Field<T, 3>;

impl<T: Element, const D: usize> Field<T, D> {
    /// A field of the given shape with every point (halo and padding included) set to zero;
    /// aborts the process when memory runs out, as `Vec` does (see [`Field::try_zeros`]).
    pub fn zeros(shape: Shape<D>) -> Self {
        Field { data: AlignedBuf::zeroed(shape.len()), shape, boundary: None }
    }

    /// [`Field::zeros`], or [`FieldError::OutOfMemory`] saying how many bytes the field needs
    /// and how many the system has available.
    pub fn try_zeros(shape: Shape<D>) -> Result<Self, FieldError> {
        let data = AlignedBuf::try_zeroed(shape.len()).map_err(|e| FieldError::OutOfMemory {
            shape: shape.describe(),
            bytes: e.bytes.unwrap_or(usize::MAX),
            available: available_memory(),
        })?;
        Ok(Field { data, shape, boundary: None })
    }

    /// [`Field::from_fn`] that returns [`FieldError::OutOfMemory`] instead of aborting.
    pub fn try_from_fn(shape: Shape<D>, mut f: impl FnMut([isize; D]) -> T) -> Result<Self, FieldError> {
        let mut field = Self::try_zeros(shape)?;
        for s in shape.storage_points() {
            let off = shape.offset(s);
            field.data[off] = f(shape.to_global(s));
        }
        Ok(field)
    }

    /// The boundary declared by [`Executor::declare_boundary`](crate::Executor::declare_boundary).
    pub(crate) fn declared(&self) -> Option<[Option<HaloFill>; D]> {
        self.boundary
    }

    /// Declares the boundary (checked against the halo) and fills it.
    pub(crate) fn declare(&mut self, fills: [Option<HaloFill>; D]) -> Result<(), HaloError> {
        for (axis, fill) in fills.iter().enumerate() {
            if let Some(fill) = fill {
                halo::check(self.shape.interior(), self.shape.halo_widths(), axis, *fill)?;
            }
        }
        self.boundary = Some(fills);
        self.fill_declared()
    }

    /// Fills the declared boundary, axis after axis (nothing without one).
    pub(crate) fn fill_declared(&mut self) -> Result<(), HaloError> {
        for (axis, fill) in self.boundary.unwrap_or([None; D]).into_iter().enumerate() {
            if let Some(fill) = fill {
                self.fill_halo(axis, fill)?;
            }
        }
        Ok(())
    }

    /// A copy of this field, or [`FieldError::OutOfMemory`].
    pub fn try_clone(&self) -> Result<Self, FieldError> {
        let mut copy = Self::try_zeros(self.shape)?;
        copy.data.copy_from_slice(&self.data);
        copy.boundary = self.boundary;
        Ok(copy)
    }

    /// A field with every point (halo included) set to `value`; padding stays zero.
    pub fn filled(shape: Shape<D>, value: T) -> Self {
        Self::from_fn(shape, |_| value)
    }

    /// A field whose value at each global coordinate (halo included) is `f(coordinate)`.
    pub fn from_fn(shape: Shape<D>, mut f: impl FnMut([isize; D]) -> T) -> Self {
        let mut field = Self::zeros(shape);
        for s in shape.storage_points() {
            let off = shape.offset(s);
            field.data[off] = f(shape.to_global(s));
        }
        field
    }

    /// Builds a field from every point's value (halo included), listed in the field's element
    /// order with the fastest axis first and no padding, as [`Field::to_vec`] returns them.
    pub fn from_vec(shape: Shape<D>, values: Vec<T>) -> Result<Self, FieldError> {
        if values.len() != shape.points() {
            return Err(FieldError::LengthMismatch { expected: shape.points(), got: values.len() });
        }
        let mut field = Self::zeros(shape);
        // Row by row of the storage box, in layout order: the order of `storage_points`.
        let (row, starts) = shape.box_rows([0; D], shape.extent());
        for (start, values) in starts.zip(values.chunks_exact(row.max(1))) {
            field.data[start..start + row].copy_from_slice(values);
        }
        Ok(field)
    }

    /// The values of the box of `len` points at storage coordinate `at`, in the field's layout
    /// order (contiguous axis fastest); an error when the box leaves the field.
    pub fn read_box(&self, at: [usize; D], len: [usize; D]) -> Result<Vec<T>, FieldError> {
        self.check_box(at, len, "read_box")?;
        let (row, starts) = self.shape.box_rows(at, len);
        let mut out = Vec::with_capacity(len.iter().product());
        for start in starts {
            out.extend_from_slice(&self.data[start..start + row]);
        }
        Ok(out)
    }

    /// Writes `values` (in [`Field::read_box`]'s order) into the box of `len` points at `at`;
    /// an error when the box leaves the field or `values` is not one value per point.
    pub fn write_box(&mut self, at: [usize; D], len: [usize; D], values: &[T]) -> Result<(), FieldError> {
        self.check_box(at, len, "write_box")?;
        let points: usize = len.iter().product();
        if values.len() != points {
            return Err(FieldError::LengthMismatch { expected: points, got: values.len() });
        }
        let (row, starts) = self.shape.box_rows(at, len);
        for (start, chunk) in starts.zip(values.chunks(row.max(1))) {
            self.data[start..start + row].copy_from_slice(chunk);
        }
        Ok(())
    }

    /// Refuses a box that leaves the field's storage.
    fn check_box(&self, at: [usize; D], len: [usize; D], what: &'static str) -> Result<(), FieldError> {
        let ext = self.shape.extent();
        match (0..D).find(|&a| at[a] + len[a] > ext[a]) {
            Some(a) => Err(FieldError::Range(RangeError::BoxOutside {
                call: what,
                at: at.to_vec(),
                len: len.to_vec(),
                shape: self.shape.describe(),
                axis: a,
            })),
            None => Ok(()),
        }
    }

    /// Every point's value (halo included) in element order, fastest axis first, without padding.
    pub fn to_vec(&self) -> Vec<T> {
        let (row, starts) = self.shape.box_rows([0; D], self.shape.extent());
        let mut out = Vec::with_capacity(self.shape.points());
        for start in starts {
            out.extend_from_slice(&self.data[start..start + row]);
        }
        out
    }

    /// The field's shape.
    pub fn shape(&self) -> &Shape<D> {
        &self.shape
    }

    /// The value at a global coordinate (halo cells are negative or `>= n`), or `None` outside.
    pub fn get(&self, global: [isize; D]) -> Option<T> {
        self.shape.storage_of(global).map(|s| self.data[self.shape.offset(s)])
    }

    /// Sets the value at a global coordinate; an error names the coordinate if it is outside.
    pub fn set(&mut self, global: [isize; D], value: T) -> Result<(), FieldError> {
        let s = self
            .shape
            .storage_of(global)
            .ok_or(FieldError::OutOfBounds { coordinate: global.to_vec(), shape: self.shape.describe() })?;
        let off = self.shape.offset(s);
        self.data[off] = value;
        Ok(())
    }

    /// The raw storage, padding included (see [`Shape::offset`] for where a point lives).
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The raw storage, mutable. Writing padding is harmless; executors never read it.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Copies the values of the interior into an `ndarray` indexed `[i, j, k]` (layout-independent).
    pub fn to_array(&self) -> ndarray::Array<T, ndarray::Dim<[usize; D]>>
    where
        ndarray::Dim<[usize; D]>: ndarray::Dimension,
    {
        let n = self.shape.interior();
        let mut values = Vec::with_capacity(self.shape.interior_points());
        // ndarray's standard layout: last index fastest.
        for_each_c_order(n, |g| {
            let global = g.map(|v| v as isize);
            values.push(self.data[self.shape.offset(self.shape.storage_of(global).expect("interior"))]);
        });
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&n), values)
            .expect("interior has the shape's size")
            .into_dimensionality()
            .expect("D axes")
    }

    /// A view of the interior indexed `[i, j, k]`, with the field's strides: no copy. Its memory
    /// order follows the field's [`Order`] (`Ijk`: `i` fastest; `Kij`: `k` fastest), and rows
    /// along the contiguous axis are padded (the strides skip the halo and padding).
    pub fn interior_view(&self) -> ndarray::ArrayView<'_, T, ndarray::Dim<[usize; D]>>
    where
        ndarray::Dim<[usize; D]>: ndarray::Dimension,
    {
        use ndarray::ShapeBuilder;
        let (n, start) = self.interior_start();
        let strides = self.shape.strides();
        ndarray::ArrayView::from_shape(ndarray::IxDyn(&n).strides(ndarray::IxDyn(&strides)), &self.data[start..])
            .expect("the interior lies inside the storage")
            .into_dimensionality()
            .expect("D axes")
    }

    /// [`Field::interior_view`], mutable: writes through it change the field's interior.
    pub fn interior_view_mut(&mut self) -> ndarray::ArrayViewMut<'_, T, ndarray::Dim<[usize; D]>>
    where
        ndarray::Dim<[usize; D]>: ndarray::Dimension,
    {
        use ndarray::ShapeBuilder;
        let (n, start) = self.interior_start();
        let strides = self.shape.strides();
        ndarray::ArrayViewMut::from_shape(ndarray::IxDyn(&n).strides(ndarray::IxDyn(&strides)), &mut self.data[start..])
            .expect("the interior lies inside the storage")
            .into_dimensionality()
            .expect("D axes")
    }

    /// The interior's size and the storage offset of its first point (0 when it is empty).
    fn interior_start(&self) -> ([usize; D], usize) {
        let n = self.shape.interior();
        let start = if n.contains(&0) { 0 } else { self.shape.offset(self.shape.halo_widths()) };
        (n, start)
    }

    /// A field whose interior is copied from an `ndarray` view indexed `[i, j, k]`; halo cells are
    /// zero. An error names both shapes if the view's shape is not the interior's.
    pub fn from_array<S>(
        shape: Shape<D>,
        array: &ndarray::ArrayBase<S, ndarray::Dim<[usize; D]>>,
    ) -> Result<Self, FieldError>
    where
        S: ndarray::Data<Elem = T>,
        ndarray::Dim<[usize; D]>: ndarray::Dimension,
    {
        let dims: Vec<usize> = array.shape().to_vec();
        if dims != shape.interior().to_vec() {
            return Err(FieldError::ArrayShapeMismatch { array: dims, interior: shape.interior().to_vec() });
        }
        let array = array.view().into_dyn();
        let mut field = Self::zeros(shape);
        for_each_c_order(shape.interior(), |g| {
            let v = array[ndarray::IxDyn(&g)];
            let s = shape.storage_of(g.map(|v| v as isize)).expect("interior");
            field.data[shape.offset(s)] = v;
        });
        Ok(field)
    }
}

impl<T: Element, const D: usize> fmt::Debug for Field<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Field<{}, {}D>({})", T::NAME, D, self.shape.describe())
    }
}

/// Visits every index of an `n`-box in C order (last index fastest).
fn for_each_c_order<const D: usize>(n: [usize; D], mut f: impl FnMut([usize; D])) {
    if n.contains(&0) {
        return;
    }
    let mut g = [0usize; D];
    loop {
        f(g);
        let mut axis = D;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            g[axis] += 1;
            if g[axis] < n[axis] {
                break;
            }
            g[axis] = 0;
        }
    }
}

/// Misuse of a field's constructors or accessors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// `from_vec` got a vector whose length is not the number of points (halo included).
    LengthMismatch {
        /// Points in the shape, halo included.
        expected: usize,
        /// Length of the vector given.
        got: usize,
    },
    /// `from_array` got an array whose shape is not the field's interior.
    ArrayShapeMismatch {
        /// The array's shape.
        array: Vec<usize>,
        /// The field's interior size.
        interior: Vec<usize>,
    },
    /// `set` was given a coordinate outside the field (halo included).
    OutOfBounds {
        /// The global coordinate given.
        coordinate: Vec<isize>,
        /// The field's shape, described.
        shape: String,
    },
    /// `read_range` was given a range that does not fit the field, or `read_box`/`write_box` a
    /// box that leaves it ([`RangeError::DoesNotFit`], [`RangeError::BoxOutside`]).
    Range(RangeError),
    /// The memory for a field could not be had.
    OutOfMemory {
        /// The field's shape, described.
        shape: String,
        /// Bytes the field needs.
        bytes: usize,
        /// Bytes the system reported available (Linux `MemAvailable`), when known.
        available: Option<u64>,
    },
}

impl FieldError {
    /// The error's stable code (see the catalogue in [`crate::error`]).
    pub fn code(&self) -> &'static str {
        match self {
            FieldError::LengthMismatch { .. } => "S0211",
            FieldError::ArrayShapeMismatch { .. } => "S0212",
            FieldError::OutOfBounds { .. } => "S0213",
            FieldError::Range(_) => "S0214",
            FieldError::OutOfMemory { .. } => "S0215",
        }
    }

    /// What went wrong, without the code and the help.
    pub fn message(&self) -> String {
        match self {
            // A box error names its call itself.
            FieldError::Range(e @ RangeError::BoxOutside { .. }) => e.to_string(),
            FieldError::Range(e) => format!("read_range: {e}"),
            FieldError::LengthMismatch { expected, got } => {
                format!("the vector has {got} values but the shape has {expected} points (halo included)")
            }
            FieldError::ArrayShapeMismatch { array, interior } => {
                format!("the array has shape {array:?} but the field's interior is {interior:?}")
            }
            FieldError::OutOfBounds { coordinate, shape } => {
                format!("global coordinate {coordinate:?} is outside the field {shape}")
            }
            FieldError::OutOfMemory { shape, bytes, available } => format!(
                "a field of {shape} needs {} of memory, which could not be had ({})",
                gib(*bytes as f64),
                available.map_or("available memory unknown".to_string(), |a| format!("{} available", gib(a as f64)))
            ),
        }
    }

    /// What to change.
    pub fn help(&self) -> String {
        match self {
            FieldError::Range(RangeError::BoxOutside { .. }) => {
                "keep the box inside the field: at + len <= extent on every axis (halo included)".to_string()
            }
            FieldError::Range(_) => "build the range for the field's extent with i0 + i1 <= n on every axis, e.g. \
                                     `Loop3D::interior(field.shape())`"
                .to_string(),
            FieldError::LengthMismatch { .. } => {
                "pass one value per point in element order, as `Field::to_vec` returns them".to_string()
            }
            FieldError::ArrayShapeMismatch { .. } => {
                "pass an array of the interior's shape (halo cells are set to zero)".to_string()
            }
            FieldError::OutOfBounds { .. } => {
                "use a coordinate inside the field: halo cells run from -halo to n + halo - 1".to_string()
            }
            FieldError::OutOfMemory { .. } => {
                "use a smaller grid, f32 instead of f64, or split the grid over subdomains on several processes"
                    .to_string()
            }
        }
    }
}

/// Bytes as GiB, for messages.
fn gib(bytes: f64) -> String {
    format!("{:.2} GiB", bytes / (1u64 << 30) as f64)
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]\nhelp: {}", self.message(), self.code(), self.help())
    }
}

impl std::error::Error for FieldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FieldError::Range(e) => Some(e),
            _ => None,
        }
    }
}
