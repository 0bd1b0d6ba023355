//! `STENCIL_PROFILE=1`: where a distributed run's time goes, per stencil. Each launch waits for
//! every subdomain before it starts, after its halos are settled (exchanges and boundary fills)
//! and after its parts ran, so the two shares are measured apart; the table is printed to
//! standard error when the executor (its last clone) is dropped. Waiting at every launch slows
//! the run: compare profiles with each other (one GPU against several), not with a run's own
//! throughput. With overlap the halos travel while the parts run: the table then gives the sum.

use std::collections::HashMap;
use std::time::Instant;

use super::super::World;
use super::auto;
use crate::cpu::Choice;
use crate::error::LaunchError;
use crate::executor::Executor;

/// `STENCIL_PROFILE`: whether launches are timed.
static PROFILE: Choice<bool> = Choice::new(
    "STENCIL_PROFILE",
    &[("1", true), ("0", false)],
    false,
    "1 (time each launch, its halos apart, and print a table per stencil at the end) or 0 (the default)",
);

/// Whether `STENCIL_PROFILE` asks for a profile (read once).
pub(super) fn wanted() -> Result<bool, LaunchError> {
    Ok(PROFILE.get()?)
}

/// One stencil's launches: how many, their seconds in all and in settling halos, and the
/// exchanges they ran.
#[derive(Default, Clone, Copy)]
struct Row {
    launches: usize,
    seconds: f64,
    settle: f64,
    exchanges: usize,
}

/// The rows of a run, in the order the stencils first ran.
#[derive(Default)]
pub(super) struct Profile {
    rows: HashMap<&'static str, Row>,
    order: Vec<&'static str>,
}

/// A launch being timed: its start, and the end of its settling (when known apart).
pub(super) struct Timing {
    start: Instant,
    settled: Option<Instant>,
    exchanges: usize,
}

/// Waits for every executor and starts timing a launch; `exchanges`: the count so far.
pub(super) fn start<E: Executor>(execs: &[E], exchanges: usize) -> Result<Timing, LaunchError> {
    Ok(Timing { start: auto::start(execs)?, settled: None, exchanges })
}

impl Timing {
    /// Waits for every executor: the halos of the launch are settled.
    pub(super) fn settled<E: Executor>(&mut self, execs: &[E]) -> Result<(), LaunchError> {
        self.settled = Some(auto::start(execs)?);
        Ok(())
    }
}

impl Profile {
    /// Waits for every executor and notes the launch of `stencil` timed by `t`; `exchanges`:
    /// the count now.
    pub(super) fn stop<E: Executor>(
        &mut self,
        execs: &[E],
        stencil: &'static str,
        t: Timing,
        exchanges: usize,
    ) -> Result<(), LaunchError> {
        let seconds = auto::stop(execs, t.start)?;
        if !self.rows.contains_key(stencil) {
            self.order.push(stencil);
        }
        let row = self.rows.entry(stencil).or_default();
        row.launches += 1;
        row.seconds += seconds;
        row.settle += t.settled.map_or(0.0, |s| (s - t.start).as_secs_f64());
        row.exchanges += exchanges - t.exchanges;
        Ok(())
    }

    /// Whether no launch was timed.
    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The table: one line per stencil (the slowest first) and their sum.
    pub(super) fn table(&self, world: &World, parts: usize) -> String {
        let mut out = format!(
            "stencil profile (rank {} of {}, {parts} local subdomains; every launch waited for):\n",
            world.rank(),
            world.size()
        );
        out += &format!(
            "{:<28} {:>9} {:>12} {:>12} {:>12} {:>10}\n",
            "stencil", "launches", "total ms", "halos ms", "launch ms", "exchanges"
        );
        let mut names = self.order.clone();
        names.sort_by(|a, b| self.rows[b].seconds.total_cmp(&self.rows[a].seconds));
        let mut sum = Row::default();
        let line = |name: &str, r: &Row| {
            format!(
                "{:<28} {:>9} {:>12.3} {:>12.3} {:>12.3} {:>10}\n",
                name,
                r.launches,
                1e3 * r.seconds,
                1e3 * r.settle,
                1e3 * (r.seconds - r.settle),
                r.exchanges
            )
        };
        for name in names {
            let r = self.rows[name];
            out += &line(name, &r);
            sum.launches += r.launches;
            sum.seconds += r.seconds;
            sum.settle += r.settle;
            sum.exchanges += r.exchanges;
        }
        out += &line("(all)", &sum);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Host;

    #[test]
    fn the_table_sums_the_launches_and_splits_the_halos() {
        let mut p = Profile::default();
        for (name, exchanges) in [("a", 0), ("b", 2), ("a", 3)] {
            let mut t = start(&[Host], 0).unwrap();
            t.settled(&[Host]).unwrap();
            p.stop(&[Host], name, t, exchanges).unwrap();
        }
        let table = p.table(&World::single(), 1);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 5, "{table}");
        let a = rows.iter().find(|l| l.starts_with("a ")).unwrap();
        assert!(a.split_whitespace().nth(1) == Some("2") && a.ends_with(" 3"), "{table}");
        let all = rows.last().unwrap();
        assert!(all.starts_with("(all)") && all.split_whitespace().nth(1) == Some("3") && all.ends_with(" 5"));
        assert!(PROFILE.parse(Some("yes")).is_err() && !PROFILE.parse(None).unwrap());
    }
}
