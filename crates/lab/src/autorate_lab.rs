//! The strategies of a variable link (issue 16): the rate controllers and the fixed rates they
//! are compared with, on the same cake setup.
//!
//! Every one starts the same way: `unbloat start --config` in the router, the profile's link
//! options at a starting rate, so the qdiscs are the ones a user of `unbloat` gets on a router.
//! Then:
//! - `unbloat-p10`, `unbloat-mean`: nothing more; the rate stays at the trace's 10th percentile
//!   (of its one-second rates) or its mean.
//! - `unbloat-autorate`: `unbloat autorate wan0` runs in the router for the whole test, with the
//!   [`bounds`] below and the server's [`reflectors`], logging every decision.
//! - `cake-autorate`: the real cake-autorate (`third_party/cake-autorate`, its ORIGIN.txt says
//!   how) runs there instead, with the same bounds and reflectors and its own defaults otherwise
//!   (fping, 6 pingers every 0.3 s). It changes the rates with a `tc` process per change. Its
//!   log must show `SHAPER` lines: a cake-autorate that exited at start would otherwise be
//!   measured as a fixed-rate cake.
//!
//! **Bounds**, the same for both controllers, from each traced direction's one-second rates:
//! min at half the 5th percentile (below the link's worst second: a minimum at the link's own
//! rate would hold a standing queue whenever the link is that slow), base at the 25th
//! percentile (what an idle link falls back to), max at the 95th; never under [`MIN_FLOOR`]. A
//! direction without a trace is fixed at 95 % of its rate.
//!
//! **CPU.** Each controller runs in a cgroup of its own (cgroup v2), so its CPU time counts every
//! process it started, including the ones that ended (cake-autorate's pingers, its `tc`
//! processes, its subshells): `cpu.stat`'s `usage_usec` over the controller's lifetime.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_units::Rate;

use crate::error::{io, LabError};
use crate::profile::LinkProfile;
use crate::strategy::{FixedRate, Strategy};
use crate::topology::{LiveTopology, Node};
use crate::trace::RateTrace;

/// The least rate either controller may set, and the least fixed rate.
pub const MIN_FLOOR: Rate = Rate::from_kbit(256);
/// How many addresses the server answers on for the controllers' probes.
pub const REFLECTORS: u8 = 8;

/// The server's extra addresses the controllers probe (10.77.4.10 and up, on its own link).
pub fn reflectors() -> Vec<Ipv4Addr> {
    (0..REFLECTORS)
        .map(|i| Ipv4Addr::new(10, 77, 4, 10 + i))
        .collect()
}

/// One direction's min, base and max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub min: Rate,
    pub base: Rate,
    pub max: Rate,
}

fn one_second(t: &RateTrace) -> RateTrace {
    t.coarsen(Duration::from_secs(1))
}

/// A traced direction's bounds (see the module's text).
pub fn trace_range(t: &RateTrace) -> Range {
    let s = one_second(t);
    let at = |p| s.percentile(p).max(MIN_FLOOR);
    Range {
        min: Rate::from_bits_per_sec(s.percentile(5.0).bits_per_sec() / 2).max(MIN_FLOOR),
        base: at(25.0),
        max: at(95.0),
    }
}

/// The controllers' bounds each way (see the module's text).
pub fn bounds(profile: &LinkProfile) -> (Range, Range) {
    let one = |trace: &Option<RateTrace>, line: Rate| match trace {
        Some(t) => trace_range(t),
        None => {
            let r = Rate::from_bits_per_sec(line.bits_per_sec() * 95 / 100);
            Range {
                min: r,
                base: r,
                max: r,
            }
        }
    };
    (
        one(&profile.traces.down, profile.down),
        one(&profile.traces.up, profile.up),
    )
}

/// The fixed strategy's rates each way.
pub fn fixed_rates(profile: &LinkProfile, which: FixedRate) -> (Rate, Rate) {
    let one = |trace: &Option<RateTrace>, line: Rate| match trace {
        Some(t) => match which {
            FixedRate::P10 => one_second(t).percentile(10.0),
            FixedRate::Mean => t.mean(),
        }
        .max(MIN_FLOOR),
        None => Rate::from_bits_per_sec(line.bits_per_sec() * 95 / 100),
    };
    (
        one(&profile.traces.down, profile.down),
        one(&profile.traces.up, profile.up),
    )
}

/// A controller's cost, for the table and lab.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControllerRun {
    pub bounds_down: Range,
    pub bounds_up: Range,
    /// CPU seconds of the controller and everything it started.
    pub cpu_s: f64,
    /// How long it ran.
    pub wall_s: f64,
    /// Rate changes it made (its log's).
    pub rate_changes: u64,
    /// When the trace began to play, in seconds after the controller started (its log's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_start_s: Option<f64>,
}

impl ControllerRun {
    /// CPU seconds per minute of running: the measure.
    pub fn cpu_s_per_min(&self) -> f64 {
        self.cpu_s / self.wall_s.max(1e-9) * 60.0
    }

    /// One line for the report's notes.
    pub fn summary(&self) -> String {
        let r = |x: &Range| format!("{}/{}/{}", x.min, x.base, x.max);
        format!(
            "min/base/max down {}, up {}; {} rate changes in {:.0} s; CPU {:.2} s per minute ({:.1} % of a core)",
            r(&self.bounds_down),
            r(&self.bounds_up),
            self.rate_changes,
            self.wall_s,
            self.cpu_s_per_min(),
            self.cpu_s / self.wall_s.max(1e-9) * 100.0
        )
    }
}

/// cake-autorate's source (given, or the vendored copy: [`unbloat_testbed::peer::peer_dir`]) and what it
/// needs to run: bash and fping.
pub fn check_cake_autorate(given: Option<&Path>) -> Result<PathBuf, LabError> {
    let src = match given {
        Some(d) if d.join("cake-autorate.sh").is_file() => std::path::absolute(d).unwrap_or(d.to_path_buf()),
        Some(d) => {
            return Err(LabError::SqmScripts(format!(
                "--cake-autorate {}: no cake-autorate.sh there",
                d.display()
            )))
        }
        None => unbloat_testbed::peer::peer_dir(unbloat_testbed::peer::CAKE_AUTORATE)
            .and_then(|d| match d.join("cake-autorate.sh").is_file() {
                true => Ok(d),
                false => Err(format!("{}: no cake-autorate.sh there", d.display())),
            })
            .map_err(|why| {
                LabError::SqmScripts(format!(
                    "cake-autorate: its vendored copy cannot be used ({why}); give --cake-autorate DIR"
                ))
            })?,
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    for program in ["bash", "fping"] {
        let found = std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
            .any(|d| d.join(program).is_file());
        if !found {
            return Err(LabError::SqmScripts(format!(
                "cake-autorate needs {program}, which is not installed: run scripts/install-deps (Debian package {program})"
            )));
        }
    }
    Ok(src)
}

/// A controller running in the router.
pub struct Controller {
    strategy: Strategy,
    cgroup: Cgroup,
    started: Instant,
    dir: PathBuf,
    bounds: (Range, Range),
}

/// Sets a variable-link strategy up: the shaping, then (for a controller) the controller,
/// which runs until the topology stops its processes. Returns the commands shown in the report.
pub fn set_up(
    live: &mut LiveTopology,
    strategy: &Strategy,
    profile: &LinkProfile,
    dir: &Path,
    exe: &Path,
    cake_autorate: Option<&Path>,
) -> Result<(Vec<String>, Option<Controller>), LabError> {
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    let b = bounds(profile);
    let (down, up) = match strategy {
        Strategy::UnbloatFixed(which) => fixed_rates(profile, *which),
        _ => (b.0.base, b.1.base),
    };
    let config = dir.join("unbloat.toml");
    let opts = profile.unbloat_options(down, up);
    let text = toml::to_string(&Interfaces {
        interface: [("wan0", &opts)].into(),
    })
    .map_err(|e| failed(strategy, "its config", &e.to_string()))?;
    std::fs::write(&config, &text).map_err(io("cannot write", &config))?;
    let run_dir = dir.join("run");
    let start = unbloat_shaper::invocation::Start {
        config: Some(config.clone()),
        json: true,
        ..Default::default()
    };
    crate::tune_lab::unbloat_json_in(live, exe, &run_dir, &start.into(), None)
        .map_err(|e| failed(strategy, "unbloat start", &e.to_string()))?;
    let mut shown = vec![format!(
        "unbloat start --config unbloat.toml  # {}",
        text.replace('\n', " ")
    )];
    if !strategy.is_controller() {
        return Ok((shown, None));
    }
    for a in reflectors() {
        live.apply(
            Node::Server,
            &[unbloat_system::runner::Cmd::ip([
                "addr",
                "add",
                &format!("{a}/24"),
                "dev",
                "eth0",
            ])],
        )?;
    }
    let cgroup = Cgroup::new(&format!("{}-{}", live.topo.prefix, strategy.dir_name()))
        .map_err(io("cannot make a cgroup for", dir))?;
    let argv = match strategy {
        Strategy::UnbloatAutorate => unbloat_argv(exe, &run_dir, dir, b),
        _ => {
            let src = cake_autorate.ok_or_else(|| {
                LabError::SqmScripts(
                    "cake-autorate: no source was given (--cake-autorate DIR)".into(),
                )
            })?;
            cake_autorate_argv(src, dir, b).map_err(io("cannot install cake-autorate into", dir))?
        }
    };
    shown.push(argv.join(" "));
    let wrapped: Vec<String> = [
        "sh".to_string(),
        "-c".into(),
        "echo $$ > \"$0\" && exec \"$@\"".into(),
        cgroup.procs().display().to_string(),
    ]
    .into_iter()
    .chain(argv)
    .collect();
    let err = std::fs::File::create(dir.join("stderr.txt")).map_err(io("cannot write", dir))?;
    let pid = live.spawn(Node::Router, &wrapped, Stdio::null(), Stdio::from(err))?;
    let started = Instant::now();
    // A controller that refuses its options exits at once: say so now, not after the test.
    std::thread::sleep(Duration::from_secs(3));
    if !live.is_running(pid) {
        let said = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
        return Err(failed(
            strategy,
            "the controller exited at its start",
            said.trim(),
        ));
    }
    Ok((
        shown,
        Some(Controller {
            strategy: strategy.clone(),
            cgroup,
            started,
            dir: dir.to_path_buf(),
            bounds: b,
        }),
    ))
}

#[derive(Serialize)]
struct Interfaces<'a> {
    interface: std::collections::BTreeMap<&'a str, &'a unbloat_shaper::options::ShapeOptions>,
}

fn failed(strategy: &Strategy, how: &str, detail: &str) -> LabError {
    LabError::Script {
        strategy: strategy.name(),
        how: how.into(),
        stderr: detail.into(),
    }
}

fn list(addrs: &[Ipv4Addr]) -> String {
    addrs
        .iter()
        .map(Ipv4Addr::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn unbloat_argv(exe: &Path, run_dir: &Path, dir: &Path, (d, u): (Range, Range)) -> Vec<String> {
    let r = |x: Rate| format!("{}kbit", x.bits_per_sec() / 1000);
    vec![
        "env".into(),
        format!("UNBLOAT_RUN_DIR={}", run_dir.display()),
        exe.display().to_string(),
        "autorate".into(),
        "wan0".into(),
        "--down-min".into(),
        r(d.min),
        "--down-base".into(),
        r(d.base),
        "--down-max".into(),
        r(d.max),
        "--up-min".into(),
        r(u.min),
        "--up-base".into(),
        r(u.base),
        "--up-max".into(),
        r(u.max),
        "--reflectors".into(),
        list(&reflectors()),
        "--log".into(),
        dir.join("autorate.log").display().to_string(),
    ]
}

/// cake-autorate's config for the lab: its defaults, with the router's devices, the bounds and
/// the server's reflectors (and the pitfalls of its ORIGIN.txt avoided: the log directory
/// exists, the idle threshold is under the minimum rates).
fn cake_autorate_config(dir: &Path, (d, u): (Range, Range)) -> String {
    let k = |x: Rate| x.bits_per_sec() / 1000;
    let active = (k(d.min).min(k(u.min)) / 2).clamp(50, 2000);
    let refl: Vec<String> = reflectors().iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "dl_if=ifb4wan0\nul_if=wan0\nadjust_dl_shaper_rate=1\nadjust_ul_shaper_rate=1\n\
         min_dl_shaper_rate_kbps={}\nbase_dl_shaper_rate_kbps={}\nmax_dl_shaper_rate_kbps={}\n\
         min_ul_shaper_rate_kbps={}\nbase_ul_shaper_rate_kbps={}\nmax_ul_shaper_rate_kbps={}\n\
         connection_active_thr_kbps={active}\nreflectors=({})\nrandomize_reflectors=0\n\
         output_cake_changes=1\nlog_file_path_override={}\nstartup_wait_s=0.0\n",
        k(d.min),
        k(d.base),
        k(d.max),
        k(u.min),
        k(u.base),
        k(u.max),
        refl.join(" "),
        dir.display()
    )
}

fn cake_autorate_argv(src: &Path, dir: &Path, b: (Range, Range)) -> std::io::Result<Vec<String>> {
    let copy = dir.join("cake-autorate");
    std::fs::create_dir_all(&copy)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name()))?;
        }
    }
    let config = copy.join("config.primary.sh");
    std::fs::write(&config, cake_autorate_config(dir, b))?;
    Ok(vec![
        "env".into(),
        format!("CAKE_AUTORATE_SCRIPT_PREFIX={}", copy.display()),
        format!("CAKE_AUTORATE_CONFIG_PREFIX={}", copy.display()),
        "bash".into(),
        copy.join("cake-autorate.sh").display().to_string(),
        config.display().to_string(),
    ])
}

impl Controller {
    /// After the test (whose end stopped the controller): its CPU time, its rate changes, its
    /// plot (unbloat's log drawn to `plot`); an error when it did not run for the whole test.
    pub fn finish(self, plot: &Path, trace: Option<Instant>) -> Result<ControllerRun, LabError> {
        let wall_s = self.started.elapsed().as_secs_f64();
        let trace_start_s = trace.map(|t| t.saturating_duration_since(self.started).as_secs_f64());
        let cpu_s = self
            .cgroup
            .cpu_seconds()
            .map_err(io("cannot read the cgroup of", &self.dir))?;
        let stderr = std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default();
        let tail = || stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        let rate_changes = match self.strategy {
            Strategy::UnbloatAutorate => {
                let log =
                    std::fs::read_to_string(self.dir.join("autorate.log")).unwrap_or_default();
                let stop = log.lines().rev().find(|l| l.contains("\"event\":\"stop\""));
                let Some(stop) = stop else {
                    return Err(failed(
                        &self.strategy,
                        "unbloat autorate ended before the test did",
                        &tail(),
                    ));
                };
                let v: serde_json::Value = serde_json::from_str(stop).unwrap_or_default();
                let ticks = unbloat_autorate::log::read_ticks(&log).unwrap_or_default();
                let svg = unbloat_autorate::log::plot("unbloat autorate during the test", &ticks);
                std::fs::write(plot, svg).map_err(io("cannot write", plot))?;
                v["summary"]["rate_changes"].as_u64().unwrap_or(0)
            }
            _ => {
                let log = std::fs::read_to_string(self.dir.join("cake-autorate.primary.log"))
                    .or_else(|_| std::fs::read_to_string(self.dir.join("cake-autorate.log")))
                    .unwrap_or_default();
                let n = log.lines().filter(|l| l.starts_with("SHAPER")).count() as u64;
                if n == 0 {
                    return Err(failed(
                        &self.strategy,
                        "cake-autorate changed no rate: it did not run (its log has no SHAPER line)",
                        &format!("{} {}", tail(), log.lines().rev().take(3).collect::<Vec<_>>().join(" | ")),
                    ));
                }
                n
            }
        };
        Ok(ControllerRun {
            bounds_down: self.bounds.0,
            bounds_up: self.bounds.1,
            cpu_s,
            wall_s,
            rate_changes,
            trace_start_s,
        })
    }
}

/// A cgroup v2 of its own, under the machine's cgroup2 mount or one made for it.
struct Cgroup {
    dir: PathBuf,
    /// A mount made here, removed with the cgroup.
    mounted: Option<PathBuf>,
}

impl Cgroup {
    fn new(name: &str) -> std::io::Result<Cgroup> {
        let mounts = std::fs::read_to_string("/proc/self/mounts")?;
        let existing = mounts
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.get(2) == Some(&"cgroup2"))
            .and_then(|f| f.get(1).map(PathBuf::from));
        let (root, mounted) = match existing {
            Some(root) => (root, None),
            None => {
                let root = std::env::temp_dir().join(format!("unbloat-cgroup-{name}"));
                std::fs::create_dir_all(&root)?;
                let st = std::process::Command::new("mount")
                    .args(["-t", "cgroup2", "none"])
                    .arg(&root)
                    .status()?;
                if !st.success() {
                    return Err(std::io::Error::other(format!(
                        "mount -t cgroup2 none {}: {st}",
                        root.display()
                    )));
                }
                (root.clone(), Some(root))
            }
        };
        let dir = root.join(format!("unbloat-{name}"));
        std::fs::create_dir_all(&dir)?;
        Ok(Cgroup { dir, mounted })
    }

    fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn cpu_seconds(&self) -> std::io::Result<f64> {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat"))?;
        let usec = text
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| std::io::Error::other("cpu.stat has no usage_usec"))?;
        Ok(usec as f64 / 1e6)
    }

    /// Kills what is left in it, and removes it (and the mount made for it).
    fn remove(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(m) = &self.mounted {
            let _ = std::process::Command::new("umount").arg(m).status();
            let _ = std::fs::remove_dir(m);
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.remove();
    }
}
