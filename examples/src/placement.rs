//! The command-line options every example shares for where it runs (`--gpu N`, `--domains N`,
//! `--gpus N`, `--grid PX,PY,PZ`), what they resolve to, and the printout of a decomposition.

use stencil_runtime::Decomposition;

/// Where to run: flattened into each example's options (`#[command(flatten)]`).
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct PlacementArgs {
    /// Run on this GPU (needs a build with `--features cuda`).
    #[arg(long)]
    pub gpu: Option<usize>,
    /// Split the grid over N host subdomains (halo exchange between them).
    #[arg(long, value_name = "N")]
    pub domains: Option<usize>,
    /// Split the grid over N subdomains on GPUs, subdomain i on GPU i % (number of GPUs) (needs a
    /// build with `--features cuda`).
    #[arg(long, value_name = "N")]
    pub gpus: Option<usize>,
    /// Process grid of the subdomains, e.g. 2,2,1 (with --domains or --gpus; its product must be
    /// N). Chosen for the least halo surface when not given.
    #[arg(long, value_name = "PX,PY,PZ", value_parser = parse_grid)]
    pub grid: Option<[usize; 3]>,
}

/// Where a run goes: one executor, or subdomains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The host, one domain.
    Host,
    /// One GPU, one domain.
    Gpu(usize),
    /// N host subdomains.
    HostDomains(usize),
    /// N subdomains on GPUs.
    GpuDomains(usize),
}

impl Target {
    /// The number of subdomains, if the run is decomposed.
    pub fn domains(self) -> Option<usize> {
        match self {
            Target::HostDomains(n) | Target::GpuDomains(n) => Some(n),
            Target::Host | Target::Gpu(_) => None,
        }
    }
}

impl PlacementArgs {
    /// The target the options ask for, or why they contradict each other (`bin` names the
    /// example in the rebuild hint).
    pub fn target(&self, bin: &str) -> Result<Target, String> {
        match (self.gpu, self.domains, self.gpus) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                Err("--gpu runs on one GPU; to split the grid over GPUs use --gpus N alone".into())
            }
            (_, Some(_), Some(_)) => {
                Err("--domains N (host subdomains) and --gpus N (GPU subdomains) exclude each other: give one".into())
            }
            (None, None, None) if self.grid.is_some() => {
                Err("--grid gives the process grid of --domains N or --gpus N: give one of them too".into())
            }
            (None, None, Some(_)) if !cfg!(feature = "cuda") => Err(format!(
                "--gpus: this build has no GPU support: rebuild with `cargo run --release -p stencil-examples \
                 --features cuda --bin {bin} -- --gpus N`"
            )),
            (Some(g), None, None) => Ok(Target::Gpu(g)),
            (None, Some(n), None) => Ok(Target::HostDomains(n)),
            (None, None, Some(n)) => Ok(Target::GpuDomains(n)),
            (None, None, None) => Ok(Target::Host),
        }
    }
}

/// Parses `PX,PY,PZ`: three positive counts.
pub fn parse_grid(s: &str) -> Result<[usize; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let bad = || format!("`{s}` is not a process grid: give three positive counts, e.g. 2,2,1");
    if parts.len() != 3 {
        return Err(bad());
    }
    let mut grid = [0; 3];
    for (g, p) in grid.iter_mut().zip(parts) {
        *g = p.parse().ok().filter(|&v: &usize| v > 0).ok_or_else(bad)?;
    }
    Ok(grid)
}

/// Prints the process grid and every subdomain's place and extent.
pub fn print_decomposition(d: &Decomposition<3>) {
    let g = d.grid();
    let plural = if d.len() == 1 { "" } else { "s" };
    println!("process grid {}x{}x{} ({} subdomain{plural}):", g[0], g[1], g[2], d.len());
    for s in d.subdomains() {
        let (c, o, e) = (s.coords, s.offset, s.extent);
        println!(
            "  subdomain {} at ({}, {}, {}): offset ({}, {}, {}), extent {}x{}x{}",
            s.index, c[0], c[1], c[2], o[0], o[1], o[2], e[0], e[1], e[2]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_resolve_or_say_what_contradicts() {
        let p = |gpu, domains, gpus, grid| PlacementArgs { gpu, domains, gpus, grid };
        assert_eq!(p(None, None, None, None).target("x"), Ok(Target::Host));
        assert_eq!(p(Some(1), None, None, None).target("x"), Ok(Target::Gpu(1)));
        assert_eq!(p(None, Some(4), None, Some([2, 2, 1])).target("x"), Ok(Target::HostDomains(4)));
        assert!(p(Some(0), Some(2), None, None).target("x").unwrap_err().contains("--gpus N alone"));
        assert!(p(None, Some(2), Some(2), None).target("x").unwrap_err().contains("exclude each other"));
        assert!(p(None, None, None, Some([1, 1, 1])).target("x").unwrap_err().contains("give one of them"));
        assert_eq!(parse_grid(" 2, 1,3"), Ok([2, 1, 3]));
        assert!(parse_grid("2,0,1").is_err() && parse_grid("2,2").is_err() && parse_grid("a,b,c").is_err());
    }
}
