//! The `column3d` program as a user runs it: on one domain and over host subdomains it prints a
//! water budget that closes to round-off and the same rain at the ground, and writes a PNG of
//! that rain; a process grid that splits the columns is refused with the grid to use.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_column3d")).args(args).output().expect("column3d runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
}

/// The number after `label` in the printout.
fn number(text: &str, label: &str) -> f64 {
    let rest = &text[text.find(label).unwrap_or_else(|| panic!("no `{label}` in:\n{text}")) + label.len()..];
    rest.split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn column3d_closes_its_budget_on_one_and_on_four_subdomains() {
    let dir = std::env::temp_dir().join(format!("column3d-cli-{}", std::process::id()));
    let mut rain = Vec::new();
    for domains in ["1", "4"] {
        let out = dir.join(domains);
        let args =
            ["--size", "24", "--levels", "30", "--steps", "60", "--domains", domains, "--out", out.to_str().unwrap()];
        let (ok, text) = run(&args);
        assert!(ok, "{text}");
        assert!(number(&text, "start) / start =").abs() < 1e-12, "{text}");
        rain.push(number(&text, "rain at the ground:"));
        let png = std::fs::read(out.join("rain.png")).expect("the PNG is written");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG file");
    }
    assert!(rain[0] > 0.0, "it rains");
    assert!((rain[0] - rain[1]).abs() <= 1e-12 * rain[0], "one domain {} and four {} differ", rain[0], rain[1]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_grid_that_splits_the_columns_is_refused() {
    let (ok, text) = run(&["--size", "8", "--levels", "8", "--steps", "1", "--domains", "2", "--grid", "1,1,2"]);
    assert!(!ok && text.contains("sweeps its columns along axis 2") && text.contains("1 along axis 2"), "{text}");
}

#[test]
fn the_placement_can_come_from_the_environment() {
    let out = std::env::temp_dir().join(format!("column3d-env-{}", std::process::id()));
    let args = ["--size", "12", "--levels", "8", "--steps", "2", "--out", out.to_str().unwrap()];
    let run_with = |vars: &[(&str, &str)], extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_column3d"));
        cmd.args(args).args(extra).envs(vars.iter().copied());
        let out = cmd.output().expect("column3d runs");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, text) = run_with(&[("STENCIL_DOMAINS", "4"), ("STENCIL_GRID", "2,2,1")], &[]);
    assert!(ok && text.contains("process grid [2, 2, 1]"), "{text}");
    // The command line wins over the environment.
    let (ok, text) = run_with(&[("STENCIL_DOMAINS", "4")], &["--domains", "3"]);
    assert!(ok && text.contains("process grid [1, 3, 1]"), "{text}");
    // A malformed value is a message and a non-zero exit.
    let (ok, text) = run_with(&[("STENCIL_GPUS", "two")], &[]);
    assert!(!ok && text.contains("invalid value 'two'"), "{text}");
    std::fs::remove_dir_all(&out).ok();
}
