//! Held minima and maxima folded through a device transport ([`DeviceTransport::all_reduce`]),
//! on host subdomains of one process, with a transport that folds on the host as NCCL's
//! all-reduce would (every subdomain's piece combined by the operation into every subdomain's
//! copy): which reductions take that path, what each subdomain passes, and the results' bits
//! against a plain loop. The same path between ranks and on GPUs runs only with NCCL.

use super::*;
use crate::domain::{DeviceMessage, DeviceTransport, HeldFold};
use crate::executor::HostHeld;
use crate::field::{Field3, Shape3};
use crate::range::Loop3D;
use crate::{stencil, Max, Min, Sum};
use std::sync::atomic::AtomicU64;

#[stencil]
fn smallest(idx: Idx3, x: &Field3<f64>, m: &mut Min<f64>) {
    m.fold(x[idx]);
}

#[stencil]
fn largest_and_sum(idx: Idx3, x: &Field3<f64>, m: &mut Max<f64>, s: &mut Sum<f64>) {
    m.fold(x[idx]);
    s.fold(x[idx]);
}

/// A one-point clock: the next step's size and the time after it.
#[stencil]
fn clock(idx: Idx3, rate: Held<f64>, t: Held<f64>, x: &Field3<f64>, dt: &mut Min<f64>, next: &mut Max<f64>) {
    let d = 0.5 / rate;
    dt.fold(d);
    next.fold(t + d);
}

/// Folds on the host what NCCL folds on the devices; `skip` leaves the copies alone (a fold
/// forgotten on purpose, which the checks must catch).
#[derive(Debug, Default)]
struct FoldOnHost {
    parts: usize,
    skip: bool,
    calls: Mutex<Vec<Vec<HeldFold>>>,
}

/// The `f64` a host held scalar at `address` holds.
fn load(address: u64) -> f64 {
    // SAFETY: `address` is a `HostHeld<f64>`'s (its `AtomicU64` of bits), alive during the call.
    f64::from_bits(unsafe { &*(address as *const AtomicU64) }.load(Ordering::Acquire))
}

impl DeviceTransport for FoldOnHost {
    fn exchange(&self, sends: &[DeviceMessage], recvs: &[DeviceMessage]) -> Result<(), LaunchError> {
        assert!(sends.is_empty() && recvs.is_empty(), "one process: no message between ranks");
        Ok(())
    }

    fn all_reduce(&self, folds: &[HeldFold]) -> Result<(), LaunchError> {
        self.calls.lock().unwrap().push(folds.to_vec());
        for scalar in folds.chunks(self.parts) {
            let op = scalar[0].op;
            let locals: Vec<usize> = scalar.iter().map(|f| f.local).collect();
            assert_eq!(locals, (0..self.parts).collect::<Vec<_>>(), "one fold per subdomain, in order");
            assert!(scalar.iter().all(|f| f.op == op && f.piece != f.copy), "{scalar:?}");
            let value = scalar.iter().fold(crate::reduce::identity::<f64>(op), |v, f| match op {
                ReduceOp::Min => v.min(load(f.piece)),
                ReduceOp::Max => v.max(load(f.piece)),
                ReduceOp::Sum => panic!("a sum reached the all-reduce"),
            });
            if !self.skip {
                for f in scalar {
                    // SAFETY: as in `load`.
                    unsafe { &*(f.copy as *const AtomicU64) }.store(value.to_bits(), Ordering::Release);
                }
            }
        }
        Ok(())
    }
}

/// A distributed executor over 2 × 2 × 1 host subdomains of a 12 × 10 × 8 grid, with `transport`.
fn executor(transport: Arc<FoldOnHost>) -> Distributed<Host, 3> {
    let d = Decomposition::new([12, 10, 8], [2, 2, 1], [false; 3], [1; 3]).unwrap();
    let mut domains = Domains::new(d, vec![Host; 4]).unwrap();
    domains.set_device_transport(transport);
    Distributed::new(domains)
}

/// What every part's copy of `h` holds.
fn copies(h: &PartsHeld<HostHeld<f64>>) -> Vec<u64> {
    h.parts.iter().map(|p| p.get().to_bits()).collect()
}

#[test]
fn minima_and_maxima_go_through_the_transport_and_sums_do_not() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 1.0
    };
    let shape = Shape3::new([12, 10, 8]).halo(1);
    let host = Field3::from_fn(shape, |_| next());
    let plain = |f: fn(f64, f64) -> f64, from: f64| host.interior_view().iter().fold(from, |m, &v| f(m, v));
    let (low, high) = (plain(f64::min, f64::INFINITY), plain(f64::max, f64::NEG_INFINITY));
    let all = Loop3D::interior(&shape);

    for skip in [false, true] {
        let transport = Arc::new(FoldOnHost { parts: 4, skip, ..Default::default() });
        let exec = executor(transport.clone());
        let x = exec.upload(&host).unwrap();

        // A minimum: one fold per subdomain through the transport, every copy the plain loop's.
        let m = exec.held(f64::NAN).unwrap();
        exec.reduce_into(&all, Smallest, None, (&x, &mut Min::new()), &[&m]).unwrap();
        let calls = transport.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "one all-reduce");
        assert!(calls[0].iter().all(|f| f.op == ReduceOp::Min), "{:?}", calls[0]);
        let want = if skip { vec![f64::NAN.to_bits(); 4] } else { vec![low.to_bits(); 4] };
        assert_eq!(copies(&m), want, "the minimum in every part (fold skipped: {skip})");

        // A maximum beside a sum: both folded in the process, in the parts' order.
        let (mx, s) = (exec.held(f64::NAN).unwrap(), exec.held(f64::NAN).unwrap());
        exec.reduce_into(&all, LargestAndSum, None, (&x, &mut Max::new(), &mut Sum::new()), &[&mx, &s]).unwrap();
        assert_eq!(transport.calls.lock().unwrap().len(), 1, "a sum keeps every result off the transport");
        let (mut rm, mut rs) = (Max::new(), Sum::new());
        exec.run(&all, LargestAndSum, (&x, &mut rm, &mut rs)).unwrap();
        assert_eq!(copies(&mx), vec![high.to_bits(); 4]);
        assert_eq!(copies(&s), vec![rs.get().to_bits(); 4], "the sum of `run`, bit for bit");

        // A clock over one point of one part: the other parts give the identities (their pieces
        // start at 0, below the step and the time, so a part that gave none would be seen).
        let (rate, t) = (exec.held(2.0).unwrap(), exec.held(1.0).unwrap());
        let (dt, t_next) = (exec.held(0.0).unwrap(), exec.held(0.0).unwrap());
        let point = Loop3D::from_bounds(shape.extent(), [9, 2, 3], [10, 3, 4]).unwrap();
        exec.reduce_into(&point, Clock, None, (&rate, &t, &x, &mut Min::new(), &mut Max::new()), &[&dt, &t_next])
            .unwrap();
        let calls = transport.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 2);
        let ops: Vec<ReduceOp> = calls[1].iter().map(|f| f.op).collect();
        assert_eq!(ops, [[ReduceOp::Min; 4], [ReduceOp::Max; 4]].concat(), "each scalar's folds together");
        if !skip {
            assert_eq!((copies(&dt), copies(&t_next)), (vec![0.25f64.to_bits(); 4], vec![1.25f64.to_bits(); 4]));
        } else {
            assert_eq!(copies(&dt), vec![0f64.to_bits(); 4], "a forgotten fold is seen");
        }
    }
}
