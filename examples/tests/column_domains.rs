//! The column model over host subdomains: the columns are independent, so every process grid
//! that keeps them whole gives the single-domain fields bit for bit, uneven splits included; a
//! grid that splits the vertical axis is refused with an error that says how to split instead.

use stencil_examples::column::{decomposed, moist_bubble, Column};
use stencil_runtime::{Decomposition, Domains, Host};

#[test]
fn whole_columns_over_subdomains_give_the_single_domain_bits() {
    let (n, dz, dt, steps) = ([23, 17, 30], 100.0, 5.0, 40);
    let initial = moist_bubble(n, dz);
    let mut single = Column::new(&Host, &initial, 20.0, dz).unwrap();
    for _ in 0..steps {
        single.step(&Host, dt).unwrap();
    }
    for grid in [[2, 2, 1], [3, 1, 1], [1, 4, 1], [5, 3, 1]] {
        let d = Decomposition::new(n, grid, [false; 3], [0, 0, 1]).unwrap();
        let domains = Domains::new(d, vec![Host; grid.iter().product()]).unwrap();
        let mut parts = decomposed(&domains, &initial, 20.0, dz).unwrap();
        for _ in 0..steps {
            for (part, exec) in parts.iter_mut().zip(domains.execs()) {
                part.step(exec, dt).unwrap();
            }
        }
        for (part, sub) in parts.iter().zip(domains.subdomains()) {
            let want = single.state.map(|f| sub.part_of(f));
            for (name, got, want) in [
                ("t", &part.state.t, &want.t),
                ("qv", &part.state.qv, &want.qv),
                ("qc", &part.state.qc, &want.qc),
                ("qr", &part.state.qr, &want.qr),
            ] {
                let (a, b) = (got.to_vec(), want.to_vec());
                let differ = a.iter().zip(&b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
                assert_eq!(differ, 0, "{grid:?}, subdomain {}: {differ} points of {name} differ", sub.index);
            }
        }
    }
}

#[test]
fn a_grid_that_splits_the_columns_is_refused() {
    let n = [8, 8, 12];
    let initial = moist_bubble(n, 100.0);
    let d = Decomposition::new(n, [2, 1, 2], [false; 3], [0, 0, 1]).unwrap();
    let domains = Domains::new(d, vec![Host; 4]).unwrap();
    let e = decomposed(&domains, &initial, 20.0, 100.0).err().expect("refused");
    assert!(e.to_string().contains("whole columns") && e.to_string().contains("--grid 2,2,1"), "{e}");
}

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
    for grid in [[2, 2, 1], [5, 3, 1]] {
        let exec = Distributed::host(Decomposition::new(n, grid, [false; 3], [0, 0, 1]).unwrap()).unwrap();
        let mut column = Column::new(&exec, &initial, 20.0, dz).unwrap();
        for _ in 0..steps {
            column.step(&exec, dt).unwrap();
        }
        let got = column.state.map(|f| exec.download(f).unwrap());
        for (name, got, want) in [("t", &got.t, &single.state.t), ("qr", &got.qr, &single.state.qr)] {
            assert!(bits(got) == bits(want), "{grid:?}: {name} differs from the single domain");
        }
    }
    let split = Distributed::host(Decomposition::new(n, [1, 1, 2], [false; 3], [0, 0, 1]).unwrap()).unwrap();
    let mut column = Column::new(&split, &initial, 20.0, dz).unwrap();
    let e = column.step(&split, dt).unwrap_err().to_string();
    assert!(e.contains("sweeps its columns along axis 2") && e.contains("1 along axis 2"), "{e}");
}
