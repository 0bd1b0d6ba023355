//! Sources and receivers at any point of the physical domain (like Devito's sparse functions):
//! a source injected into its cell's eight nodes with trilinear weights, receivers sampling `u`
//! by trilinear interpolation. On nodes they give the grid-node runs bit for bit; between nodes,
//! the interpolation of the node traces and (the scheme being linear in its source) the weighted
//! sum of the runs with the source on each node; over subdomains, the single-domain run.

use stencil_examples::acoustic::{run, Model, Outcome, RegionStrategies};
use stencil_examples::checkpoint::Plan;
use stencil_runtime::{Distributed, Host, Overlap};

fn model() -> Model {
    let mut m = Model::layered(20, 50);
    m.n = [20, 18, 19];
    m.pml = 4;
    m.f0 = 25.0;
    m.source = [9, 8, 6];
    m.receiver_depth = 3;
    m
}

fn outcome(m: &Model) -> Outcome<f64> {
    run::<Host, f64>(&Host, &RegionStrategies::default(), m, Some(m.steps / 2), &Plan::none(), |_| {}).unwrap()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn positions_on_nodes_give_the_grid_node_run() {
    let m = model();
    let reference = outcome(&m);
    let mut at = m.clone();
    at.source_position = Some(m.source.map(|i| i as f64 * m.h));
    at.receiver_positions =
        Some((0..m.n[0]).map(|i| [i as f64 * m.h, m.source[1] as f64 * m.h, m.receiver_depth as f64 * m.h]).collect());
    let out = outcome(&at);
    assert_eq!(bits(out.last.u.as_slice()), bits(reference.last.u.as_slice()));
    assert_eq!(out.traces.len(), reference.traces.len());
    for (a, b) in out.traces.iter().zip(&reference.traces) {
        assert_eq!(bits(a), bits(b));
    }
    assert!(reference.traces.iter().flatten().any(|v| *v != 0.0), "the wave reached the receivers");
}

#[test]
fn a_receiver_between_nodes_interpolates_the_node_traces() {
    let m = model();
    let h = m.h;
    let p = [7.25 * h, 8.5 * h, 4.75 * h];
    let mut at = m.clone();
    // The eight nodes of the cell, then the point inside it.
    let mut positions = Vec::new();
    for k in [4.0, 5.0] {
        for j in [8.0, 9.0] {
            for i in [7.0, 8.0] {
                positions.push([i * h, j * h, k * h]);
            }
        }
    }
    positions.push(p);
    at.receiver_positions = Some(positions);
    let out = outcome(&at);
    let w = |f: f64, upper: bool| if upper { f } else { 1.0 - f };
    let mut peak = 0.0f64;
    for row in &out.traces {
        let mut want = 0.0;
        for (n, node) in row[..8].iter().enumerate() {
            want += w(0.25, n & 1 == 1) * w(0.5, n & 2 == 2) * w(0.75, n & 4 == 4) * node;
        }
        assert!((row[8] - want).abs() <= 1e-12 * want.abs().max(1e-30), "{} against {want}", row[8]);
        peak = peak.max(want.abs());
    }
    assert!(peak > 0.0, "the wave reached the receivers");
}

#[test]
fn a_source_between_nodes_is_the_weighted_sum_of_node_sources() {
    let m = model();
    let h = m.h;
    let frac = [0.3, 0.6, 0.2];
    let base = [9, 8, 6];
    let mut off = m.clone();
    off.source_position = Some(std::array::from_fn(|a| (base[a] as f64 + frac[a]) * h));
    let u = outcome(&off).last.u;
    let mut sum = vec![0.0; u.as_slice().len()];
    for n in 0..8 {
        let corner: [usize; 3] = std::array::from_fn(|a| base[a] + (n >> a & 1));
        let weight: f64 = (0..3).map(|a| if n >> a & 1 == 1 { frac[a] } else { 1.0 - frac[a] }).product();
        let mut on = m.clone();
        on.source = corner;
        for (s, v) in sum.iter_mut().zip(outcome(&on).last.u.as_slice()) {
            *s += weight * v;
        }
    }
    let peak = sum.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    assert!(peak > 0.0);
    for (a, b) in u.as_slice().iter().zip(&sum) {
        assert!((a - b).abs() <= 1e-10 * peak, "{a} against {b}");
    }
}

#[test]
fn sparse_positions_over_subdomains_equal_one_domain() {
    let mut m = model();
    m.source_position = Some([9.4 * m.h, 7.9 * m.h, 6.5 * m.h]);
    m.receiver_positions = Some(vec![
        [2.5 * m.h, 9.0 * m.h, 3.3 * m.h],
        [16.0 * m.h, 8.5 * m.h, 12.0 * m.h],
        [9.0 * m.h, 8.0 * m.h, 6.0 * m.h],
    ]);
    let reference = outcome(&m);
    for (grid, overlap) in [([2, 1, 1], Overlap::None), ([1, 2, 2], Overlap::OneDivided), ([3, 2, 1], Overlap::None)] {
        let d = m.decompose(grid.iter().product(), Some(grid)).unwrap();
        let exec = Distributed::host(d).unwrap().with_overlap(overlap).unwrap();
        let out =
            run::<_, f64>(&exec, &RegionStrategies::default(), &m, Some(m.steps / 2), &Plan::none(), |_| {}).unwrap();
        assert_eq!(bits(out.last.u.as_slice()), bits(reference.last.u.as_slice()), "{grid:?}");
        for (a, b) in out.traces.iter().zip(&reference.traces) {
            assert_eq!(bits(a), bits(b), "{grid:?}");
        }
    }
}

#[test]
fn positions_outside_the_domain_are_refused() {
    let mut m = model();
    m.source_position = Some([-1.0, 0.0, 0.0]);
    assert!(m.check().unwrap_err().to_string().contains("source position"));
    let mut m = model();
    m.receiver_positions = Some(vec![[0.0, 0.0, 0.0], [0.0, 1e6, 0.0]]);
    assert!(m.check().unwrap_err().to_string().contains("receiver 1"));
    m.receiver_positions = Some(Vec::new());
    assert!(m.check().is_err());
}
