//! The runtime's tracing spans and events: a launch, a scatter, an exchange and a gather each
//! show up under their target when a subscriber asks for them.

mod common;

use common::Captured;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains};
use tracing_subscriber::fmt::format::FmtSpan;

#[stencil]
fn shift(idx: Idx2, u: &Field2<f64>, out: &mut Field2<f64>) {
    out[idx] = u[idx.ix::<1, 0>()] - u[idx.ix::<0, -1>()];
}

#[test]
fn launches_exchanges_and_gathers_are_traced() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("stencil=trace")
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let shape = Shape2::new([12, 10]).halo(1);
        let u = Field2::from_fn(shape, |[i, j]| (i * 10 + j) as f64);
        let mut out = Field2::zeros(shape);
        Loop2D::interior(&shape).run(Shift, (&u, &mut out)).unwrap();
        let d = Decomposition::with_grid([12, 10], 2, None, [true, false], [1, 1]).unwrap();
        let domains = Domains::new(d, vec![Host, Host]).unwrap();
        let mut parts = domains.scatter(&u).unwrap();
        domains.exchange(&mut parts).unwrap();
        domains.gather(&shape, &parts).unwrap();
    });
    let text = captured.text();
    for expected in ["stencil::launch", "stencil=\"shift\"", "stencil::exchange", "exchange", "scatter", "gather"] {
        assert!(text.contains(expected), "`{expected}` is missing from the trace:\n{text}");
    }
}
