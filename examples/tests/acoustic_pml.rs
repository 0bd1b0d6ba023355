//! The PML absorbs: in a homogeneous box with a source at the centre, the energy left in the
//! physical domain after the wavefront has left it is under 1% of its peak; with the PML
//! switched off (width 0: the walls of the physical domain reflect) more than half stays.

use stencil_examples::acoustic::{Coefficients, Layer, Model, RegionStrategies, Wave};
use stencil_runtime::Host;

/// A 48³ physical domain (10 m) at 2000 m/s with a 15 Hz source at its centre and a PML of
/// `pml` points; 300 steps of 2 ms take the wavefront well past every wall.
fn model(pml: usize) -> Model {
    let mut m = Model::layered(48, 300);
    m.layers = vec![Layer { top: 0.0, v: 2000.0 }];
    m.f0 = 15.0;
    m.pml = pml;
    m.source = [24, 24, 24];
    m.dt = 0.4 * m.h / 2000.0;
    m
}

/// Energy in the physical domain every 5 steps, and its peak.
fn energies(m: &Model) -> (Vec<f64>, f64) {
    let (regions, c) = (m.regions(), Coefficients::new([m.h; 3]).to::<f64>());
    let mut state = m.initial::<f64>().unwrap();
    let mut e = Vec::new();
    for step in 0..m.steps {
        f64::step(&Host, &RegionStrategies::default(), &regions, &c, &mut state, &m.source_at(step).unwrap()).unwrap();
        if step % 5 == 4 {
            e.push(m.energy::<f64>(&state.u, &state.u_prev));
        }
    }
    let peak = e.iter().copied().fold(0.0, f64::max);
    (e, peak)
}

#[test]
fn pml_leaves_under_one_percent_and_reflecting_walls_over_half() {
    let (with, peak) = energies(&model(12));
    let (without, peak_off) = energies(&model(0));
    for (s, (a, b)) in with.iter().zip(&without).enumerate().step_by(4) {
        eprintln!("step {:3}: with the PML {:.4} of the peak, without {:.4}", 5 * s + 5, a / peak, b / peak_off);
    }
    let (left, left_off) = (with.last().unwrap() / peak, without.last().unwrap() / peak_off);
    eprintln!("energy left after 300 steps: {:.4}% with the PML, {:.1}% without", 100.0 * left, 100.0 * left_off);
    assert!(peak > 0.0 && peak_off > 0.0, "the source injected nothing");
    assert!(left < 0.01, "the PML left {:.2}% of the peak energy", 100.0 * left);
    assert!(left_off > 0.5, "reflecting walls kept only {:.1}% of the peak energy", 100.0 * left_off);
}
