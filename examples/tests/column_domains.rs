//! The column model over host subdomains (its one `Column` on the distributed executor): the
//! columns are independent, so every process grid that keeps them whole gives the single-domain
//! fields bit for bit, uneven splits included; a grid that splits the vertical axis is refused
//! at the first sweep with an error that says how to split instead.

use stencil_examples::column::{moist_bubble, Column};
use stencil_runtime::{Decomposition, Host};

/// The single-domain `Column`, unchanged, on the distributed executor: the same bits for every
/// grid that keeps the columns whole; a grid that splits them is refused at the first sweep.
#[test]
fn the_single_domain_column_on_the_distributed_executor_equals_it() {
    use stencil_runtime::{Distributed, Executor, Loop3D};
    let (n, dz, dt, steps) = ([23, 17, 30], 100.0, 5.0, 12);
    let initial = moist_bubble(n, dz);
    let mut single = Column::new(&Host, &initial, 20.0, dz).unwrap();
    for _ in 0..steps {
        single.step(&Host, dt).unwrap();
    }
    let bits = |f: &stencil_runtime::Field3<f64>| -> Vec<u64> {
        f.read_range(&Loop3D::interior(f.shape())).unwrap().into_iter().map(f64::to_bits).collect()
    };
    for grid in [[2, 2, 1], [3, 1, 1], [1, 4, 1], [5, 3, 1]] {
        let exec = Distributed::host(Decomposition::new(n, grid, [false; 3], [0, 0, 1]).unwrap()).unwrap();
        let mut column = Column::new(&exec, &initial, 20.0, dz).unwrap();
        for _ in 0..steps {
            column.step(&exec, dt).unwrap();
        }
        let got = column.state.map(|f| exec.download(f).unwrap());
        for (name, got, want) in [
            ("t", &got.t, &single.state.t),
            ("qv", &got.qv, &single.state.qv),
            ("qc", &got.qc, &single.state.qc),
            ("qr", &got.qr, &single.state.qr),
        ] {
            assert!(bits(got) == bits(want), "{grid:?}: {name} differs from the single domain");
        }
    }
    let split = Distributed::host(Decomposition::new(n, [1, 1, 2], [false; 3], [0, 0, 1]).unwrap()).unwrap();
    let mut column = Column::new(&split, &initial, 20.0, dz).unwrap();
    let e = column.step(&split, dt).unwrap_err().to_string();
    assert!(e.contains("sweeps its columns along axis 2") && e.contains("1 along axis 2"), "{e}");
}
