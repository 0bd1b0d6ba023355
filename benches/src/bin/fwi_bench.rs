//! The gradient's cost on a GPU, as ratios measured in one run: the adjoint of the FWI model's
//! 25-point update (`FwiWaveAdjoint`; a reverse time step with it, a zeroing copy and the
//! adjoint; the reverse time step in one launch, `FwiWaveAdjointStep`; the one the gradient
//! runs, in scaled cotangents, `FwiWaveScaledAdjointStep`; and the `m`-gradient stencils beside
//! them) against the forward update, in points per second on an `n³` f64 grid; and one shot's
//! gradient (a forward run, then
//! the adjoint run backwards through a checkpointing schedule with slots for a tenth of the
//! steps) against one forward run of the same shot, with the memory the checkpoints hold.

use clap::Parser;
use stencil_bench::{copy_bandwidth, median};
use stencil_examples::fwi::{
    Fwi, FwiWave, FwiWaveAdjoint, FwiWaveAdjointStep, FwiWaveCotangentScale, FwiWaveGradient, FwiWaveScaledAdjointStep,
    FwiWaveScaledGradient, Survey,
};
use stencil_runtime::adjoint::range_mask;
use stencil_runtime::cuda::{DeviceField3, Gpu};
use stencil_runtime::prelude::*;
use stencil_runtime::revolve::{Held, Schedule};
use stencil_runtime::Strategy;

/// Any error of the run.
type Failure = Box<dyn std::error::Error>;

/// Command line.
#[derive(Parser)]
#[command(
    about = "FWI on a GPU: adjoint and gradient stencils against the forward update; a gradient against a forward run"
)]
struct Args {
    /// Points per axis of the stencil timings.
    #[arg(long, default_value_t = 320)]
    n: usize,
    /// Physical points per axis of the survey (plus a sponge of 10 on every side).
    #[arg(long, default_value_t = 64)]
    survey: usize,
    /// Time steps of the survey's shot.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Timed repetitions (the median is kept).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Also time the adjoint and the reverse time step under every strategy the tuner tries (the
    /// tuner keeps the fastest).
    #[arg(long)]
    strategies: bool,
    /// Also time the adjoint under the depot kernel (the one-pass default) and under each
    /// two-pass strategy (scaled cotangents written to a scratch field, then gathered), side by
    /// side with the forward, each two-pass result checked bit for bit against the depot's.
    #[arg(long)]
    two_pass: bool,
    /// Also time the reverse time step under these strategies (labels, e.g. `depot_32x8x64`),
    /// each checked bit for bit against the one the tuner picks.
    #[arg(long, value_delimiter = ',')]
    step_strategies: Vec<Strategy>,
}

/// Median wall time of `work` in ms (after one warm-up), each run ending with a synchronize.
fn time(gpu: &Gpu, reps: usize, mut work: impl FnMut() -> Result<(), Failure>) -> Result<f64, Failure> {
    work()?;
    gpu.synchronize()?;
    let mut ms = Vec::new();
    for _ in 0..reps {
        let start = std::time::Instant::now();
        work()?;
        gpu.synchronize()?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(ms))
}

fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let gpu = Gpu::new(0)?;
    let n = args.n;
    let shape = Shape3::new([n; 3]).halo(4);
    let copy = copy_bandwidth(&gpu, shape.len() * 8)?;
    let range = Loop3D::interior(&shape);
    let points = range.points() as f64;
    let random = |seed: u64| {
        let mut s = seed;
        Field3::from_fn(shape, move |_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        })
    };
    let m = gpu.upload(&Field3::from_fn(shape, |_| 1.0 / (2000.0f64 * 2000.0)))?;
    let damp = gpu.upload(&Field3::from_fn(shape, |[i, _, _]| if i < 10 { 0.01 } else { 0.0 }))?;
    let (u, u_prev, b) = (gpu.upload(&random(1))?, gpu.upload(&random(2))?, gpu.upload(&random(3))?);
    let mask = gpu.upload(&range_mask::<f64, 3>(shape, &range))?;
    let (mut next, mut a, mut t, mut m_bar) = (
        gpu.alloc::<f64, 3>(shape)?,
        gpu.upload(&random(4))?,
        gpu.alloc::<f64, 3>(shape)?,
        gpu.alloc::<f64, 3>(shape)?,
    );
    let (c0, cx, dt2) = (-8.541_666_666_666_666, [1.6, -0.2, 0.025_396_825, -0.001_785_714], 1e-6);
    let ms_of = |ms: f64| points / (ms * 1e-3) / 1e9;
    let reps = args.reps.max(1);
    let fwd =
        time(&gpu, reps, || Ok(gpu.run(&range, FwiWave, (c0, cx, cx, cx, dt2, &m, &damp, &u, &u_prev, &mut next))?))?;
    let adj = time(&gpu, reps, || {
        Ok(gpu.run(&range, FwiWaveAdjoint, (c0, cx, cx, cx, dt2, &m, &damp, &mut a, &mut t, &b, &mask))?)
    })?;
    let zeros = gpu.alloc::<f64, 3>(shape)?;
    let zeroed_adj = time(&gpu, reps, || {
        gpu.copy(&mut t, &zeros)?;
        Ok(gpu.run(&range, FwiWaveAdjoint, (c0, cx, cx, cx, dt2, &m, &damp, &mut a, &mut t, &b, &mask))?)
    })?;
    let step = time(&gpu, reps, || {
        Ok(gpu.run(&range, FwiWaveAdjointStep, (c0, cx, cx, cx, dt2, &m, &damp, &mut t, &a, &b, &mask))?)
    })?;
    let grad = time(&gpu, reps, || {
        Ok(gpu.run(&range, FwiWaveGradient, (c0, cx, cx, cx, dt2, &m, &damp, &u, &u_prev, &b, &mut m_bar, &mask))?)
    })?;
    // The reverse step and the gradient in scaled cotangents (what the gradient runs), with the
    // scale; the cotangents zero outside the range, as the scaled step needs.
    let mut rho = gpu.alloc::<f64, 3>(shape)?;
    gpu.run(&range, FwiWaveCotangentScale, (c0, cx, cx, cx, dt2, &m, &damp, &mut rho))?;
    let in_range = range_mask::<f64, 3>(shape, &range);
    let inside = |seed: u64| {
        let f = random(seed);
        Field3::from_fn(shape, |p| if in_range.get(p) == Some(1.0) { f.get(p).unwrap_or(0.0) } else { 0.0 })
    };
    let (mu_a, mu_b) = (gpu.upload(&inside(7))?, gpu.upload(&inside(8))?);
    let scaled_step = time(&gpu, reps, || {
        Ok(gpu.run(&range, FwiWaveScaledAdjointStep, (c0, cx, cx, cx, dt2, &m, &damp, &mut t, &mu_a, &mu_b))?)
    })?;
    let scaled_grad = time(&gpu, reps, || {
        let args = (c0, cx, cx, cx, dt2, &m, &damp, &u, &u_prev, &mu_b, &mut m_bar, &rho, &mask);
        Ok(gpu.run(&range, FwiWaveScaledGradient, args)?)
    })?;
    if args.strategies {
        // One table row per strategy the tuner tries for `ir`, `run` launching under it.
        let table = |title: &str, ir, run: &mut dyn FnMut(Strategy) -> Result<(), Failure>| {
            println!("{title} under each strategy the tuner tries ({n}^3 f64):");
            println!("| strategy | ms | GPts/s |");
            println!("|---|---:|---:|");
            for strategy in stencil_runtime::tuning::candidates(ir, [n; 3], 2) {
                match time(&gpu, reps, || run(strategy)) {
                    Ok(ms) => println!("| {} | {ms:.3} | {:.2} |", strategy.label(), ms_of(ms)),
                    Err(e) => println!("| {} | failed: {e} | |", strategy.label()),
                }
            }
            println!();
        };
        table("the adjoint", <FwiWaveAdjoint as Stencil<3>>::source_ir(), &mut |s| {
            let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut a, &mut t, &b, &mask);
            Ok(gpu.run_with(&range, FwiWaveAdjoint, Some(s), args)?)
        });
        table(
            "the reverse time step in scaled cotangents (FwiWaveScaledAdjointStep)",
            <FwiWaveScaledAdjointStep as Stencil<3>>::source_ir(),
            &mut |s| {
                let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut t, &mu_a, &mu_b);
                Ok(gpu.run_with(&range, FwiWaveScaledAdjointStep, Some(s), args)?)
            },
        );
        table("the forward (FwiWave)", <FwiWave as Stencil<3>>::source_ir(), &mut |s| {
            let args = (c0, cx, cx, cx, dt2, &m, &damp, &u, &u_prev, &mut next);
            Ok(gpu.run_with(&range, FwiWave, Some(s), args)?)
        });
        table(
            "the reverse time step (FwiWaveAdjointStep)",
            <FwiWaveAdjointStep as Stencil<3>>::source_ir(),
            &mut |s| {
                let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut t, &a, &b, &mask);
                Ok(gpu.run_with(&range, FwiWaveAdjointStep, Some(s), args)?)
            },
        );
    }
    let mut differs = Vec::new();
    if !args.step_strategies.is_empty() {
        let once = |strategy: Option<Strategy>| -> Result<Vec<u64>, Failure> {
            let mut out = gpu.upload(&random(6))?;
            let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut out, &a, &b, &mask);
            gpu.run_with(&range, FwiWaveAdjointStep, strategy, args)?;
            Ok(gpu.download(&out)?.as_slice().iter().map(|v| v.to_bits()).collect())
        };
        let reference = once(None)?;
        println!("the reverse time step under the strategies asked for:");
        println!("| strategy | ms | GPts/s | ratio to forward | bits |");
        println!("|---|---:|---:|---:|---|");
        for strategy in args.step_strategies.iter().copied() {
            let same = once(Some(strategy))? == reference;
            if !same {
                differs.push(strategy.label());
            }
            let ms = time(&gpu, reps, || {
                let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut t, &a, &b, &mask);
                Ok(gpu.run_with(&range, FwiWaveAdjointStep, Some(strategy), args)?)
            })?;
            let bits = if same { "= tuned" } else { "DIFFER" };
            println!("| {} | {ms:.3} | {:.2} | {:.2} | {bits} |", strategy.label(), ms_of(ms), ms_of(ms) / ms_of(fwd));
        }
        println!();
    }
    if args.two_pass {
        let depot = Strategy::Depot { block_x: 32, block_y: 8, planes: 16 };
        // The depot as the reference, then the two-pass strategies the tuner tries.
        let ir = <FwiWaveAdjoint as Stencil<3>>::source_ir();
        let tried = stencil_runtime::tuning::candidates(ir, [n; 3], 2).into_iter().filter(Strategy::is_two_pass);
        let paths: Vec<Strategy> = std::iter::once(depot).chain(tried).collect();
        // One launch of each from the same start, bits compared with the depot's.
        let once = |strategy: Strategy| -> Result<Vec<u64>, Failure> {
            let (mut a1, mut t1) = (gpu.upload(&random(4))?, gpu.upload(&random(5))?);
            let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut a1, &mut t1, &b, &mask);
            gpu.run_with(&range, FwiWaveAdjoint, Some(strategy), args)?;
            let (a1, t1) = (gpu.download(&a1)?, gpu.download(&t1)?);
            Ok(a1.as_slice().iter().chain(t1.as_slice()).map(|v| v.to_bits()).collect())
        };
        let reference = once(depot)?;
        println!("{n}^3 f64: the adjoint, one pass (depot) against two passes (copy {copy:.0} GB/s):");
        println!("| stencil | ms | GPts/s | ratio to forward | bits |");
        println!("|---|---:|---:|---:|---|");
        println!("| forward (FwiWave, tuned) | {fwd:.3} | {:.2} | 1.00 | |", ms_of(fwd));
        println!("| adjoint as tuned | {adj:.3} | {:.2} | {:.2} | |", ms_of(adj), ms_of(adj) / ms_of(fwd));
        let mut best: Option<(Strategy, f64)> = None;
        for strategy in paths {
            let same = if strategy == depot {
                "reference".to_string()
            } else {
                match once(strategy) {
                    Ok(bits) if bits == reference => "= depot".to_string(),
                    Ok(_) => {
                        differs.push(strategy.label());
                        "DIFFERENT".to_string()
                    }
                    Err(e) => format!("failed: {e}"),
                }
            };
            let ms = time(&gpu, reps, || {
                let args = (c0, cx, cx, cx, dt2, &m, &damp, &mut a, &mut t, &b, &mask);
                Ok(gpu.run_with(&range, FwiWaveAdjoint, Some(strategy), args)?)
            });
            match ms {
                Ok(ms) => {
                    println!(
                        "| adjoint, {} | {ms:.3} | {:.2} | {:.2} | {same} |",
                        strategy.label(),
                        ms_of(ms),
                        ms_of(ms) / ms_of(fwd)
                    );
                    if strategy.is_two_pass() && best.is_none_or(|(_, b)| ms < b) {
                        best = Some((strategy, ms));
                    }
                }
                Err(e) => println!("| adjoint, {} | failed: {e} | | | {same} |", strategy.label()),
            }
        }
        if let Some((s, ms)) = best {
            println!("fastest two-pass: {s}, {:.2} GPts/s, {:.2}x the forward\n", ms_of(ms), ms_of(ms) / ms_of(fwd));
        }
    }
    println!("{n}^3 f64, 25-point FWI update (copy {copy:.0} GB/s):");
    println!("| stencil | ms | GPts/s | ratio to forward |");
    println!("|---|---:|---:|---:|");
    for (name, ms) in [
        ("forward (FwiWave)", fwd),
        ("adjoint (FwiWaveAdjoint)", adj),
        ("reverse step: zeroing copy + FwiWaveAdjoint", zeroed_adj),
        ("reverse step in one launch (FwiWaveAdjointStep)", step),
        ("reverse step in scaled cotangents (FwiWaveScaledAdjointStep)", scaled_step),
        ("m-gradient (FwiWaveGradient)", grad),
        ("m-gradient from scaled cotangents (FwiWaveScaledGradient)", scaled_grad),
    ] {
        println!("| {name} | {ms:.3} | {:.2} | {:.2} |", ms_of(ms), ms_of(ms) / ms_of(fwd));
    }
    drop((m, damp, u, u_prev, b, mask, next, a, t, m_bar, zeros, rho, mu_a, mu_b));
    if !differs.is_empty() {
        return Err(format!("strategies whose bits differ from the reference's: {differs:?}").into());
    }

    let mut survey = Survey::transmission(args.survey, args.steps, 1);
    let slots = (args.steps / 10).max(1);
    survey.slots = Some(slots);
    let fwi = Fwi::new(&gpu, survey.clone())?;
    let (w, schedule) = (survey.wavelet(), Schedule::binomial(args.steps, slots)?);
    let m_true = fwi.upload(&survey.slowness(true)?)?;
    let m0 = fwi.upload(&survey.slowness(false)?)?;
    let clock = std::time::Instant::now();
    let observed = fwi.traces(&m_true, 0, &w)?;
    println!(
        "\nthe observed traces: {:.2} s (the first forward run, kernels compiled and tuned)",
        clock.elapsed().as_secs_f64()
    );
    let mut m_bar = gpu.alloc::<f64, 3>(survey.shape())?;
    let mut run = None;
    let forward = time(&gpu, reps, || {
        fwi.traces(&m0, 0, &w)?;
        Ok(())
    })?;
    let gradient = time(&gpu, reps, || {
        run = Some(fwi.shot_gradient(&m0, 0, &w, &observed, &schedule, &mut m_bar, false)?.run);
        Ok(())
    })?;
    let run = run.expect("timed at least once");
    // The same gradient with the checkpoints in host memory: the same bits (one run of each into
    // zeroed fields: a gradient adds into its field), and the cost of the bus.
    let on_host = schedule.clone().held(Held::OnHost);
    let (mut g_device, mut g_host) = (gpu.alloc::<f64, 3>(survey.shape())?, gpu.alloc::<f64, 3>(survey.shape())?);
    fwi.shot_gradient(&m0, 0, &w, &observed, &schedule, &mut g_device, false)?;
    fwi.shot_gradient(&m0, 0, &w, &observed, &on_host, &mut g_host, false)?;
    let bits = |f: &DeviceField3<f64>| -> Result<Vec<u64>, Failure> {
        Ok(gpu.download(f)?.to_vec().iter().map(|x| x.to_bits()).collect())
    };
    if bits(&g_device)? != bits(&g_host)? {
        return Err("the gradient with checkpoints on the host differs from the one with them on the GPU".into());
    }
    let mut host_run = None;
    let gradient_host = time(&gpu, reps, || {
        host_run = Some(fwi.shot_gradient(&m0, 0, &w, &observed, &on_host, &mut m_bar, false)?.run);
        Ok(())
    })?;
    let host_run = host_run.expect("timed at least once");
    let field_mib = survey.shape().len() as f64 * 8.0 / (1u64 << 20) as f64;
    println!(
        "\nsurvey {0}^3 (+10 sponge, {1}^3 points with the halo), 1 shot, {2} steps, {3} checkpoint slots:",
        args.survey,
        survey.shape().extent()[0],
        args.steps,
        slots
    );
    println!("| run | ms | ratio to forward |");
    println!("|---|---:|---:|");
    println!("| forward (traces of one shot) | {forward:.1} | 1.00 |");
    println!("| gradient (forward + checkpointed adjoint) | {gradient:.1} | {:.2} |", gradient / forward);
    println!(
        "| gradient, checkpoints in host memory (same bits) | {gradient_host:.1} | {:.2} |",
        gradient_host / forward
    );
    println!(
        "forward steps recomputed: {} for {} adjoint steps; checkpoints held: {} slots x 2 fields = {:.0} MiB \
         ({:.1} MiB per field)",
        run.forward_steps,
        run.adjoint_steps,
        run.slots_allocated,
        run.slots_allocated as f64 * 2.0 * field_mib,
        field_mib
    );
    println!(
        "with checkpoints in host memory: {} slots, {:.0} MiB of host memory at most",
        host_run.slots_allocated,
        host_run.host_bytes as f64 / (1u64 << 20) as f64
    );
    Ok(())
}
