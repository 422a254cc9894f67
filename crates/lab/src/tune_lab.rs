//! `unbloat tune` in the lab: the binary runs in the router's namespace against `unbloat serve`
//! in the server's, and what it finds is set beside the profile's truth (`bench tune`); and the
//! exhaustive sweep the search is judged against (`bench tune --exhaustive`): every rate on a
//! grid, each shaped with `unbloat start` and measured with `unbloat test`, the best being the
//! highest whose steady-state p99 keeps the same bound.
//!
//! Both go through the binary, as a user would: the lab checks the product, not a library call.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use unbloat_shaper::invocation::{FarEnd, Invocation, Start, Test, Tune, Unsayable};
use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::{Rate, Time};

use crate::farend::FarEndKind;
use crate::profile::LinkProfile;
use crate::topology::{router_wan, LiveTopology, Node, Topology};
use unbloat_system::runner::Runner;
use unbloat_system::sqm::workdir::WorkDir;

/// Why a tune lab could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneLabError {
    #[error("the lab network: {0}")]
    Build(String),
    #[error("`unbloat {args}` in the router failed (exit status {status}): {detail}")]
    Unbloat {
        args: String,
        status: i32,
        detail: String,
    },
    #[error("`unbloat {args}` printed no JSON: {detail}")]
    Output { args: String, detail: String },
    #[error("unbloat's arguments: {0}")]
    Argv(#[from] Unsayable),
}

/// What tune found on one profile, beside the truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    pub profile: String,
    /// `atm`, `ptm` or `none`: the profile's framing.
    pub family_truth: String,
    /// `atm`, `straight` or `undecided` (`-` without a sweep).
    pub family_found: String,
    pub overhead_truth: i32,
    pub overhead_found: Option<i64>,
    /// The sweep's confidence (0.5 at its decision threshold), and the framing the searches
    /// assumed when it could not decide (issue 55).
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub assumed: Option<String>,
    pub down_line: Rate,
    pub up_line: Rate,
    pub down_found: Option<Rate>,
    pub up_found: Option<Rate>,
    /// Each search's own result, the highest rate its one-way steps passed: before the
    /// download's drain margin and the both-ways check lower it.
    #[serde(default)]
    pub down_searched: Option<Rate>,
    #[serde(default)]
    pub up_searched: Option<Rate>,
    pub seconds: f64,
    /// The round trip's bound with both directions loaded (the user's bound and each
    /// direction's packets of slack), which the lab's rrul is held to.
    #[serde(default)]
    pub both_bound_ms: Option<f64>,
    /// The bounds tune's result does not keep, as tune said.
    #[serde(default)]
    pub missed: Vec<unbloat_tune::run::Missed>,
    /// The exhaustive sweep's best rates, when it ran.
    pub down_best: Option<Rate>,
    pub up_best: Option<Rate>,
}

impl TuneRow {
    /// Whether the framing family is right: ATM found on ATM, a straight line on anything else.
    pub fn family_right(&self) -> bool {
        match self.family_truth.as_str() {
            "atm" => self.family_found == "atm",
            _ => self.family_found == "straight",
        }
    }

    /// Whether the lab's test through tune's result kept tune's both-ways bound, in a line:
    /// `the test's steady p95 +42.0 ms is over tune's 28.5 ms bound by 13.5 ms`. `None` without
    /// either figure.
    pub fn held(&self, row: &crate::table::Row) -> Option<String> {
        let bound = self.both_bound_ms?;
        let steady = row.probe(row.primary.as_deref()?)?.steady_p95_ms?;
        Some(if steady <= bound {
            format!("the test's steady p95 +{steady:.1} ms is within tune's {bound:.1} ms bound")
        } else {
            format!(
                "the test's steady p95 +{steady:.1} ms is over tune's {bound:.1} ms bound by {:.1} ms",
                steady - bound
            )
        })
    }

    /// What tune found against the truth, in a line: `tune found down 38504kbit (96 % of the
    /// line's 40mbit), up ...; framing straight overhead - (truth: ptm overhead 22); it took 115 s`.
    pub fn summary(&self) -> String {
        let pct = |found: Option<Rate>, line: Rate| {
            found.map_or("-".to_string(), |f| {
                format!(
                    "{f} ({:.0} % of the line's {line})",
                    f.bits_per_sec() as f64 * 100.0 / line.bits_per_sec() as f64
                )
            })
        };
        let missed: String = self
            .missed
            .iter()
            .map(|m| {
                format!(
                    "; the {} missed its {:.1} ms bound by {:.1} ms",
                    m.phase,
                    m.bound_ms,
                    m.over_ms()
                )
            })
            .collect();
        let confidence = self
            .confidence
            .map(|c| format!(", confidence {c:.2}"))
            .unwrap_or_default();
        let assumed = self
            .assumed
            .as_ref()
            .map(|a| format!(", searched with {a}"))
            .unwrap_or_default();
        format!(
            "tune found down {}, up {}; framing {} overhead {}{confidence}{assumed} (truth: {} overhead {}); it took {:.0} s{missed}",
            pct(self.down_found, self.down_line),
            pct(self.up_found, self.up_line),
            self.family_found,
            self.overhead_found.map_or("-".into(), |o| o.to_string()),
            self.family_truth,
            self.overhead_truth,
            self.seconds
        )
    }
}

/// A lab network with `unbloat serve` running, and the run directory unbloat's records go to
/// (removed with the lab).
pub struct TuneLab<'r> {
    pub live: LiveTopology<'r>,
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub server: String,
    /// Removes `dir` when the lab goes, whether the caller finished, failed or panicked.
    _cleanup: WorkDir,
}

impl<'r> TuneLab<'r> {
    pub fn build(
        profile: &LinkProfile,
        runner: &'r dyn Runner,
        exe: &Path,
        dir: &Path,
    ) -> Result<TuneLab<'r>, TuneLabError> {
        let mut live = LiveTopology::build(Topology::new(profile), runner)
            .map_err(|e| TuneLabError::Build(e.to_string()))?;
        // The server runs on after `Started` goes: it stops with the lab's namespaces.
        let (_started, server) = start_serve(&mut live, dir, exe)?;
        Ok(TuneLab {
            live,
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            server,
            _cleanup: WorkDir(dir.to_path_buf()),
        })
    }

    /// `run` in the router with the lab's run directory; its stdout as JSON.
    pub fn unbloat_json(
        &self,
        run: impl Into<Invocation>,
    ) -> Result<serde_json::Value, TuneLabError> {
        unbloat_json_in(
            &self.live,
            &self.exe,
            &self.dir.join("run"),
            &run.into(),
            None,
        )
    }

    /// The lab's `unbloat serve`, as `test` and `tune` name it.
    pub fn far_end(&self) -> FarEnd {
        FarEnd {
            server: Some(self.server.clone()),
            ..FarEnd::default()
        }
    }

    /// Runs `unbloat tune wan0` against the lab's server within `max_time` (None: tune's
    /// `auto`) and to `bound` (None: tune's default), and sets what it found beside `profile`.
    pub fn tune(
        &self,
        profile: &LinkProfile,
        max_time: Option<Time>,
        bound: Option<Time>,
    ) -> Result<TuneRow, TuneLabError> {
        let tune = Tune {
            iface: router_wan(),
            far_end: self.far_end(),
            max_time,
            bound,
            no_sweep: false,
            apply: false,
            out: Some(self.dir.join("tune")),
            json: true,
        };
        tune_in(&self.live, &self.exe, &self.dir.join("run"), &tune, profile)
    }

    /// The steady state ([`Steady`]) of one `unbloat test` (`download`, `upload` or `rrul`) of
    /// `load` with the link shaped at `down`/`up` (whole kbit/s, as tune writes them) and the
    /// `link` options (link, framing, overhead, mpu) as tune found them.
    pub fn steady_at(
        &self,
        down: Rate,
        up: Rate,
        link: &ShapeOptions,
        profile: &str,
        load: std::time::Duration,
    ) -> Result<Steady, TuneLabError> {
        let kbit = |r: Rate| Rate::from_kbit(r.bits_per_sec() / 1000);
        self.unbloat_json(Start {
            iface: Some(router_wan()),
            options: ShapeOptions {
                down: Some(kbit(down)),
                up: Some(kbit(up)),
                ..link.clone()
            },
            json: true,
            ..Start::default()
        })?;
        let v = self.unbloat_json(Test {
            far_end: self.far_end(),
            profile: Some(profile.to_string()),
            duration: Some(Time::from_secs(load.as_secs())),
            idle: Some(Time::from_secs(3)),
            probe_rate: Some(20.0),
            json: true,
            ..Test::default()
        })?;
        let primary = v["primary_probe"].as_str().unwrap_or("");
        let p = v["probes"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == primary));
        let f = |key: &str| p.and_then(|p| p[key].as_f64());
        Ok(Steady {
            p99_ms: f("steady_induced_p99_ms").unwrap_or(f64::NAN),
            late_p99_ms: f("steady_late_induced_p99_ms"),
            growth_ms_per_s: f("steady_growth_ms_per_s"),
        })
    }
}

/// A test's steady state, as tune reads it from the primary probe: p99 induced latency, its
/// second half's, and its trend (ms/s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steady {
    pub p99_ms: f64,
    pub late_p99_ms: Option<f64>,
    pub growth_ms_per_s: Option<f64>,
}

/// `unbloat serve` in the server's namespace (its log in `dir`), and the address tune names.
fn start_serve(
    live: &mut LiveTopology,
    dir: &Path,
    exe: &Path,
) -> Result<(crate::farend::Started, String), TuneLabError> {
    let err = |e: &dyn std::fmt::Display| TuneLabError::Build(e.to_string());
    std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    let started = FarEndKind::Unbloat
        .start(live, dir, exe)
        .map_err(|e| err(&e))?;
    let server = started
        .far_end
        .server
        .clone()
        .ok_or_else(|| TuneLabError::Build("no server address".into()))?;
    Ok((started, server))
}

/// `run` in `live`'s router with `run_dir` as its run directory; its stdout as JSON.
/// Its stderr is kept for the error; with `progress`, each line is also printed as it comes,
/// after that prefix (tune's phases, which take minutes).
pub fn unbloat_json_in(
    live: &LiveTopology,
    exe: &Path,
    run_dir: &Path,
    run: &Invocation,
    progress: Option<&str>,
) -> Result<serde_json::Value, TuneLabError> {
    use std::io::{BufRead, Read};
    let args = run.argv()?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", &live.topo.ns(Node::Router), "env"])
        .arg(format!("UNBLOAT_RUN_DIR={}", run_dir.display()))
        .arg(exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| TuneLabError::Build(e.to_string()))?;
    let stderr = child.stderr.take().expect("piped stderr");
    let prefix = progress.map(String::from);
    // A thread reads stderr while this one reads stdout, so neither pipe can fill and stall it.
    let reader = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(p) = &prefix {
                eprintln!("{p}{line}");
            }
            kept.push_str(&line);
            kept.push('\n');
        }
        kept
    });
    let mut text = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut text);
    }
    let status = child
        .wait()
        .map_err(|e| TuneLabError::Build(e.to_string()))?;
    let err_text = reader.join().unwrap_or_default();
    let joined = args.join(" ");
    if !status.success() {
        return Err(TuneLabError::Unbloat {
            args: joined,
            status: status.code().unwrap_or(-1),
            detail: err_text.trim().to_string(),
        });
    }
    // `start --json` prints one object per line; the last is the one that matters.
    let last = text.trim().rsplit('\n').next().unwrap_or("");
    serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(last))
        .map_err(|e| TuneLabError::Output {
            args: joined,
            detail: format!("{e}: {text}"),
        })
}

/// `tune` (with `--json`: its findings are read from it) in the router, and what it found set
/// beside `profile`'s truth.
pub fn tune_in(
    live: &LiveTopology,
    exe: &Path,
    run_dir: &Path,
    tune: &Tune,
    profile: &LinkProfile,
) -> Result<TuneRow, TuneLabError> {
    let tune = Invocation::Tune(Tune {
        json: true,
        ..tune.clone()
    });
    let t0 = Instant::now();
    let v = unbloat_json_in(live, exe, run_dir, &tune, Some("  tune: "))?;
    let rate = |k: &str| v[k].as_str().and_then(|s| s.parse::<Rate>().ok());
    let framing = profile.link_layer();
    Ok(TuneRow {
        profile: profile.name.clone(),
        family_truth: match framing.framing {
            Framing::Atm => "atm",
            Framing::Ptm => "ptm",
            Framing::None => "none",
        }
        .into(),
        family_found: v["framing"]["family"].as_str().unwrap_or("-").into(),
        overhead_truth: framing.overhead,
        overhead_found: v["framing"]["overhead"].as_i64(),
        confidence: v["framing"]["confidence"].as_f64(),
        assumed: v["framing"]["assumed"].as_str().map(String::from),
        down_line: profile.down,
        up_line: profile.up,
        down_found: rate("down"),
        up_found: rate("up"),
        down_searched: highest_pass(&v["steps_down"]),
        up_searched: highest_pass(&v["steps_up"]),
        seconds: t0.elapsed().as_secs_f64(),
        both_bound_ms: v["bound_both_ms"].as_f64(),
        missed: serde_json::from_value(v["missed"].clone()).unwrap_or_default(),
        down_best: None,
        up_best: None,
    })
}

/// The highest rate of a search's steps (tune's JSON) that passed.
fn highest_pass(steps: &serde_json::Value) -> Option<Rate> {
    steps
        .as_array()?
        .iter()
        .filter(|s| s["pass"].as_bool() == Some(true))
        .filter_map(|s| s["rate"].as_str()?.parse::<Rate>().ok())
        .max()
}

/// The `unbloat-tuned` strategy's setup: `unbloat serve` started in the server namespace for the
/// tune alone, `unbloat tune wan0 --apply --max-time MAX` run in the router against it (its
/// report in `dir/tune`, its records in a run directory that goes with the call), the server
/// stopped again so the strategy's test starts its own far end on a quiet link. The shaping
/// tune applied stays for the test. Returns what the report shows of the setup and the row of
/// what tune found beside the truth.
pub fn tune_and_apply(
    live: &mut LiveTopology,
    profile: &LinkProfile,
    exe: &Path,
    dir: &Path,
    max_time: unbloat_tune::run::MaxTime,
) -> Result<(Vec<String>, TuneRow), TuneLabError> {
    let run_dir = WorkDir::new("tuned").map_err(|e| TuneLabError::Build(e.to_string()))?;
    let (started, server) = start_serve(live, dir, exe)?;
    let max = max_time.to_string();
    let tune = Tune {
        iface: router_wan(),
        far_end: FarEnd {
            server: Some(server.clone()),
            ..FarEnd::default()
        },
        max_time: max_time.fixed().map(time),
        bound: None,
        no_sweep: false,
        apply: true,
        out: Some(dir.join("tune")),
        json: true,
    };
    let row = tune_in(live, exe, &run_dir.0, &tune, profile);
    live.stop_all();
    drop(started);
    let row = row?;
    let shown = vec![
        format!("unbloat tune wan0 --server {server} --apply --max-time {max} --out tune"),
        format!("# {}", row.summary()),
    ];
    Ok((shown, row))
}

/// A duration as the invocations take it (whole microseconds).
fn time(d: std::time::Duration) -> Time {
    Time::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The grid of the exhaustive sweep, in percent of the line rate.
pub const GRID_PERCENT: [u64; 13] = [80, 82, 84, 86, 88, 90, 92, 94, 96, 98, 100, 102, 104];

/// The highest grid rate that passes (`passes` measures one rate and judges it as tune judges
/// its steps), going up the grid; two failures in a row after a pass end it (the rates above
/// are over the line: their runs would only cost time, and a lucky pass there is noise).
pub fn best_on_grid(
    line: Rate,
    mut passes: impl FnMut(Rate) -> Result<bool, TuneLabError>,
) -> Result<Option<Rate>, TuneLabError> {
    let mut best = None;
    let mut failed_in_a_row = 0;
    for pct in GRID_PERCENT {
        let r = line.percent(pct);
        if passes(r)? {
            best = Some(r);
            failed_in_a_row = 0;
        } else {
            failed_in_a_row += 1;
            if best.is_some() && failed_in_a_row == 2 {
                break;
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid as `best_on_grid` would run it, with the percents it measured.
    fn walk(pass_at: impl Fn(u64) -> bool) -> (Option<Rate>, Vec<u64>) {
        let line = Rate::from_kbit(10_000);
        let mut seen = vec![];
        let best = best_on_grid(line, |r| {
            let pct = r.bits_per_sec() / 100_000;
            seen.push(pct);
            Ok(pass_at(pct))
        })
        .unwrap();
        (best, seen)
    }

    #[test]
    fn the_grid_stops_two_failures_above_its_best_and_ignores_a_lucky_pass_beyond() {
        let (best, seen) = walk(|p| p <= 90 || p == 100);
        assert_eq!(best, Some(Rate::from_kbit(9_000)));
        assert_eq!(seen, vec![80, 82, 84, 86, 88, 90, 92, 94]);
        // One failure between passes does not end it.
        let (best, _) = walk(|p| p != 86 && p <= 94);
        assert_eq!(best, Some(Rate::from_kbit(9_400)));
        // Failures before any pass do not end it either.
        let (best, seen) = walk(|p| (90..=96).contains(&p));
        assert_eq!(best, Some(Rate::from_kbit(9_600)));
        assert_eq!(seen.len(), 11);
        assert_eq!(walk(|_| false), (None, GRID_PERCENT.to_vec()));
    }
}
