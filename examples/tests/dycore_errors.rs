//! Bad input is refused with a message that says what to change: a spacing (`--dx`, `--dz`) that
//! does not divide the domain, one that leaves too few cells, a non-positive one, an unknown case
//! name, options out of range (`--beta`, `--sponge-rate`, `--nu`, `--precision`), terrain that
//! folds the coordinate (the `dycore` binary), a bad `STENCIL_PROFILE`.

use std::process::Command;
use stencil_examples::dycore::{Case, Dycore};

fn err(dx: f64) -> String {
    Dycore::new(Case::Straka, dx, 1).err().map(|e| e.to_string()).unwrap_or_default()
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dycore")).args(args).output().expect("dycore runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn sizes_that_do_not_fit_are_refused() {
    let m = err(333.0);
    assert!(m.contains("does not divide") && m.contains("51200 m"), "{m}");
    let m = err(3200.0);
    assert!(m.contains("leaves 16 × 1 × 2 cells") && m.contains("at least 4"), "{m}");
    for bad in [0.0, -100.0, f64::NAN] {
        assert!(err(bad).contains("must be positive"), "{bad}: {}", err(bad));
    }
    assert!(Dycore::new(Case::Straka, 400.0, 0).is_err());
    // A vertical spacing of its own: it must divide the height (6400 m) into at least 4 cells.
    let straka = || Dycore::new(Case::Straka, 400.0, 1).unwrap();
    let d = straka().with_dz(100.0).unwrap();
    assert_eq!((d.n[2], d.h[2], d.top()), (64, 100.0, 6400.0));
    for bad in [300.0, 3200.0, 0.0, -50.0, f64::NAN] {
        let m = straka().with_dz(bad).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(m.contains("--dz") && m.contains("6400 m"), "{bad}: {m}");
    }
}

#[test]
fn the_binary_refuses_bad_options_and_runs_a_short_case() {
    let (ok, text) = run(&["--case", "hurricane"]);
    assert!(!ok && text.contains("invalid value 'hurricane'") && text.contains("straka"), "{text}");
    let (ok, text) = run(&["--dx", "333"]);
    assert!(!ok && text.contains("does not divide"), "{text}");
    let (ok, text) = run(&["--dz", "300"]);
    assert!(!ok && text.contains("--dz 300 m does not divide"), "{text}");
    let (ok, text) = run(&["--beta", "2"]);
    assert!(!ok && text.contains("0 <= --beta <= 1"), "{text}");
    // Terrain higher than the lid folds the Gal-Chen coordinate; --mountain on a flat case.
    let (ok, text) = run(&["--case", "rest", "--dx", "1000", "--mountain", "30000", "--t-end", "10"]);
    assert!(!ok && text.contains("GalChen coordinate surfaces cross") && text.contains("lower the mountain"), "{text}");
    let (ok, text) = run(&["--case", "rest", "--dx", "4000", "--t-end", "10", "--sponge-rate=-0.1"]);
    assert!(!ok && text.contains("--sponge-rate must be a finite rate >= 0"), "{text}");
    for nu in ["-1", "inf", "NaN"] {
        let (ok, text) = run(&["--case", "rest", "--dx", "4000", "--t-end", "10", &format!("--nu={nu}")]);
        assert!(!ok && text.contains(&format!("--nu must be a finite diffusivity >= 0 (m²/s), not {nu}")), "{text}");
    }
    let (ok, text) = run(&["--precision", "f16"]);
    assert!(!ok && text.contains("invalid value 'f16'") && text.contains("f32"), "{text}");
    let (ok, text) = run(&["--case", "moist-bubble", "--dx", "2000", "--t-end", "10", "--reference", "none"]);
    assert!(!ok && text.contains("needs a dry case"), "{text}");
    let flat = std::env::temp_dir().join(format!("dycore-flat-{}", std::process::id()));
    let args = ["--case", "mountain-wave", "--mountain", "0", "--dx", "4000", "--t-end", "10", "--out"];
    let (ok, text) = run(&[&args[..], &[flat.to_str().unwrap()]].concat());
    assert!(!ok && text.contains("the linear solution is zero"), "{text}");
    let (ok, text) = run(&["--case", "straka", "--mountain", "100"]);
    assert!(!ok && text.contains("--mountain needs --case rest or mountain-wave"), "{text}");
    // An f64 checkpoint restarted in f32 is refused, naming the element types.
    let ck = std::env::temp_dir().join(format!("dycore-ck-{}", std::process::id()));
    let base = ["--case", "bubble", "--dx", "2000", "--t-end", "40", "--out", ck.to_str().unwrap()];
    let (ok, text) = run(&[&base[..], &["--checkpoint-every", "2", "--checkpoint-dir", ck.to_str().unwrap()]].concat());
    assert!(ok, "{text}");
    let first = ck.join("dycore-00000002.ckpt");
    let (ok, text) = run(&[&base[..], &["--precision", "f32", "--restart", first.to_str().unwrap()]].concat());
    assert!(!ok && text.contains("is f64, but this run's is f32"), "{text}");
    let _ = std::fs::remove_dir_all(&ck);
    let out = std::env::temp_dir().join(format!("dycore-cli-{}", std::process::id()));
    let dir = out.to_str().unwrap();
    let (ok, text) = run(&["--case", "bubble", "--dx", "1000", "--t-end", "60", "--domains", "2", "--out", dir]);
    assert!(ok && text.contains("mass relative change") && out.join("theta_xz.png").exists(), "{text}");
    // STENCIL_PROFILE: a value it does not take is refused at the first launch; `1` prints a
    // table per stencil with the exchanges of the decomposed run.
    let args = ["--case", "bubble", "--dx", "1000", "--t-end", "60", "--domains", "2", "--out", dir];
    let (ok, text) = run_with_env(&args, ("STENCIL_PROFILE", "yes"));
    assert!(!ok && text.contains("STENCIL_PROFILE") && text.contains("S0113"), "{text}");
    let (ok, text) = run_with_env(&args, ("STENCIL_PROFILE", "1"));
    let explicit = text.lines().find(|l| l.starts_with("dycore_explicit ")).unwrap_or_default();
    let exchanges: usize = explicit.split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(ok && text.contains("stencil profile") && exchanges > 0, "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

fn run_with_env(args: &[&str], (key, value): (&str, &str)) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dycore")).args(args).env(key, value).output().expect("dycore runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
}
