//! A flent data file (`.flent.gz`) of a run, which flent 2.x opens, plots and combines.
//!
//! Heads up! The layout follows flent's own reader and test definitions (flent 2.1,
//! `flent/resultset.py` and `flent/tests/*.conf`), not a published spec:
//! - The file is gzip'd JSON with the keys `version` (flent's `FILEFORMAT_VERSION`, 4),
//!   `metadata`, `x_values`, `results` and `raw_values`.
//! - `x_values` is one time axis in seconds from the start, every `STEP_SIZE` (our 0.2 s
//!   sample interval); every `results` series has exactly one value (or `null`) per x value,
//!   like flent's timeseries aggregator produces by interpolating onto that grid.
//! - `raw_values` holds, per measured series, `{"t": unix time, "val": value}` points, the
//!   unaligned measurements; `metadata.T0` (ISO time) is the unix time of x = 0.
//! - Series names are the ones the test's plots look up: for `rrul`, "TCP upload BE" ...
//!   "TCP download EF", "Ping (ms) UDP BE|EF|BK", "Ping (ms) ICMP"; for `rrul_be`, "TCP
//!   upload BE", "BE2".."BE4" and "Ping (ms) UDP BE1".."BE3"; for `tcp_nup`/`tcp_ndown`,
//!   "TCP upload::1".. with the stream count in `TEST_PARAMETERS`; for `ping`, "Ping (ms)
//!   ICMP" and "Ping (ms) UDP". Throughput is in Mbits/s and latency in ms, flent's units.
//! - The computed series flent's own files carry ("TCP upload sum"/"avg", "TCP download
//!   sum"/"avg", "TCP totals", "Ping (ms) avg") are computed here the way flent's sum and
//!   average runners do: per x value, over the series that have a value there.
//! - When flent loads a file it executes `tests/<NAME>.conf` with the metadata as settings,
//!   so `NAME`, `HOST(S)`, `LENGTH`, `TOTAL_LENGTH`, `DELAY`, `STEP_SIZE`, `IP_VERSION` and
//!   `TEST_PARAMETERS` must be present and consistent.
//!
//! unbloat's own metadata travels in extra `UNBLOAT_*` keys, which flent ignores.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Map, Value};

pub use crate::format::iso_utc;
use crate::model::{Direction, ProbeKind, Results};
use crate::ReportError;

/// flent's `resultset.FILEFORMAT_VERSION` that this writer produces.
pub const FLENT_FILE_VERSION: u32 = 4;

/// The flent tests whose data files we can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlentTest {
    Rrul,
    RrulBe,
    TcpNup,
    TcpNdown,
    Ping,
}

impl FlentTest {
    /// The flent test that shows an unbloat profile, if there is one. `upload` and `download`
    /// map onto tcp_nup and tcp_ndown (the same shape: N streams one way plus ping); `bidir` has
    /// no flent counterpart with the same series.
    pub fn for_profile(profile: &str) -> Option<FlentTest> {
        match profile {
            "rrul" => Some(FlentTest::Rrul),
            "rrul_be" => Some(FlentTest::RrulBe),
            "tcp_nup" | "upload" => Some(FlentTest::TcpNup),
            "tcp_ndown" | "download" => Some(FlentTest::TcpNdown),
            "ping" => Some(FlentTest::Ping),
            _ => None,
        }
    }

    /// flent's name for the test (`tests/<name>.conf`).
    pub fn name(self) -> &'static str {
        match self {
            FlentTest::Rrul => "rrul",
            FlentTest::RrulBe => "rrul_be",
            FlentTest::TcpNup => "tcp_nup",
            FlentTest::TcpNdown => "tcp_ndown",
            FlentTest::Ping => "ping",
        }
    }
}

/// The class name flent's RRUL uses for a DSCP code point.
fn class_name(dscp: u8) -> String {
    match dscp {
        0 => "BE".into(),
        8 => "BK".into(),
        40 => "CS5".into(),
        46 => "EF".into(),
        d if d % 8 == 0 => format!("CS{}", d / 8),
        d => format!("DSCP{d}"),
    }
}

/// Names series after flent's conventions, numbering repeats the way `rrul_be` does ("BE",
/// "BE2", ... or "BE1", "BE2", ... when `number_first`).
struct Namer {
    seen: BTreeMap<String, usize>,
}

impl Namer {
    fn new() -> Namer {
        Namer {
            seen: BTreeMap::new(),
        }
    }

    fn name(&mut self, base: &str, number_first: bool) -> String {
        let n = self.seen.entry(base.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 && !number_first {
            base.to_string()
        } else {
            format!("{base}{n}")
        }
    }
}

/// A measured series: its flent name, units and (seconds since start, value) points.
struct Series {
    name: String,
    units: &'static str,
    points: Vec<(f64, f64)>,
}

fn measured_series(results: &Results, test: FlentTest) -> Vec<Series> {
    let mut out = Vec::new();
    let mut namer = Namer::new();
    let mut numbers = std::collections::HashMap::<Direction, usize>::new();
    for s in &results.streams {
        let word = match s.direction {
            Direction::Up => "upload",
            Direction::Down => "download",
        };
        let name = match test {
            FlentTest::TcpNup | FlentTest::TcpNdown => {
                let n = numbers.entry(s.direction).or_insert(0);
                *n += 1;
                format!("TCP {word}::{n}")
            }
            _ => namer.name(&format!("TCP {word} {}", class_name(s.dscp)), false),
        };
        let points = s.samples.iter().map(|x| (x.t, x.bps / 1e6)).collect();
        out.push(Series {
            name,
            units: "Mbits/s",
            points,
        });
    }
    let mut first_udp = true;
    for p in &results.probes {
        let name = match (p.kind, test) {
            (ProbeKind::Icmp, _) => namer.name("Ping (ms) ICMP", false),
            (ProbeKind::Udp, FlentTest::RrulBe) => namer.name("Ping (ms) UDP BE", true),
            (ProbeKind::Udp, FlentTest::Ping) if first_udp => namer.name("Ping (ms) UDP", false),
            (ProbeKind::Udp, _) => {
                namer.name(&format!("Ping (ms) UDP {}", class_name(p.dscp)), false)
            }
            // A web server's probes: flent has no name of its own for them.
            _ => namer.name(&format!("Ping (ms) {}", p.name), false),
        };
        if p.kind == ProbeKind::Udp {
            first_udp = false;
        }
        let points = p
            .samples
            .iter()
            .filter_map(|x| x.rtt_ms.map(|r| (x.t, r)))
            .collect();
        out.push(Series {
            name,
            units: "ms",
            points,
        });
    }
    out
}

/// Values of `points` (sorted by time) on the grid `x`, the way flent's timeseries aggregator
/// aligns measurements: linear interpolation between the neighbours around each x when they are
/// at most `max_gap` apart, the nearest point when it is within half a step, else `null`.
fn align(points: &[(f64, f64)], x: &[f64], step: f64) -> Vec<Option<f64>> {
    let max_gap = step * 5.0;
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    x.iter()
        .map(|&xi| {
            let i = sorted.partition_point(|p| p.0 < xi);
            let next = sorted.get(i).copied();
            let prev = i.checked_sub(1).and_then(|j| sorted.get(j)).copied();
            match (prev, next) {
                (_, Some((tn, vn))) if (tn - xi).abs() < 1e-9 => Some(vn),
                (Some((tp, vp)), Some((tn, vn))) if tn - tp <= max_gap => {
                    Some(vp + (vn - vp) * (xi - tp) / (tn - tp))
                }
                (Some((tp, vp)), _) if xi - tp <= step / 2.0 => Some(vp),
                (_, Some((tn, vn))) if tn - xi <= step / 2.0 => Some(vn),
                _ => None,
            }
        })
        .collect()
}

/// Per x value, `f` over the values present in `columns` (flent's ComputingRunner).
fn compute(columns: &[&Vec<Option<f64>>], len: usize, f: fn(&[f64]) -> f64) -> Vec<Option<f64>> {
    (0..len)
        .map(|i| {
            let vals: Vec<f64> = columns
                .iter()
                .filter_map(|c| c.get(i).copied().flatten())
                .collect();
            (!vals.is_empty()).then(|| f(&vals))
        })
        .collect()
}

fn sum(v: &[f64]) -> f64 {
    v.iter().sum()
}

fn avg(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// `HOST` for flent: the remote without its port (and without IPv6 brackets).
fn host_of(remote: &str) -> (String, u8) {
    if let Some(rest) = remote.strip_prefix('[') {
        let host = rest.split(']').next().unwrap_or(rest);
        return (host.to_string(), 6);
    }
    match remote.matches(':').count() {
        0 => (remote.to_string(), 4),
        1 => (remote.split(':').next().unwrap_or(remote).to_string(), 4),
        _ => (remote.to_string(), 6),
    }
}

/// The flent document (before gzip) for `results` shown as flent's `test`.
pub fn flent_json(results: &Results, test: FlentTest, data_filename: &str) -> Value {
    let step = f64::from(results.metadata.sample_interval_ms.max(1)) / 1000.0;
    let measured = measured_series(results, test);
    let last_t = measured
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(results.phases.total(), f64::max);
    let n = (last_t / step).ceil().max(0.0) as usize + 1;
    // Multiply rather than accumulate so the grid does not drift (0.2 * 3 != 0.2 + 0.2 + 0.2).
    let x: Vec<f64> = (0..n)
        .map(|i| (i as f64 * step * 1e6).round() / 1e6)
        .collect();
    let t0 = results.metadata.started_at_unix;

    let mut results_map = Map::new();
    let mut raw = Map::new();
    let mut series_meta = Map::new();
    let mut columns: Vec<(String, &'static str, Vec<Option<f64>>)> = Vec::new();
    for s in &measured {
        columns.push((s.name.clone(), s.units, align(&s.points, &x, step)));
        let points: Vec<Value> = s
            .points
            .iter()
            .map(|&(t, v)| json!({"t": t0 + t, "val": v}))
            .collect();
        raw.insert(s.name.clone(), Value::Array(points));
    }

    let pick = |prefix: &str| -> Vec<&Vec<Option<f64>>> {
        columns
            .iter()
            .filter(|c| c.0.starts_with(prefix))
            .map(|c| &c.2)
            .collect()
    };
    let mut computed: Vec<(String, &'static str, Vec<Option<f64>>)> = Vec::new();
    let has_tcp = columns.iter().any(|c| c.0.starts_with("TCP "));
    if has_tcp {
        for word in ["upload", "download"] {
            let cols = pick(&format!("TCP {word}"));
            if cols.is_empty() {
                continue;
            }
            computed.push((format!("TCP {word} sum"), "Mbits/s", compute(&cols, n, sum)));
            computed.push((format!("TCP {word} avg"), "Mbits/s", compute(&cols, n, avg)));
        }
        if matches!(test, FlentTest::Rrul | FlentTest::RrulBe) {
            computed.push((
                "TCP totals".into(),
                "Mbits/s",
                compute(&pick("TCP "), n, sum),
            ));
        }
    }
    if matches!(test, FlentTest::Rrul | FlentTest::RrulBe) {
        let pings = pick("Ping (ms)");
        if !pings.is_empty() {
            computed.push(("Ping (ms) avg".into(), "ms", compute(&pings, n, avg)));
        }
    }

    for (name, units, values) in columns.into_iter().chain(computed) {
        let present: Vec<f64> = values.iter().flatten().copied().collect();
        let mean = (!present.is_empty()).then(|| avg(&present));
        series_meta.insert(name.clone(), json!({"UNITS": units, "MEAN_VALUE": mean}));
        results_map.insert(name, json!(values));
    }

    let md = &results.metadata;
    let (host, ip_version) = host_of(&md.remote);
    let mut test_parameters = Map::new();
    let count = |d| results.streams.iter().filter(|s| s.direction == d).count();
    match test {
        FlentTest::TcpNup => {
            test_parameters.insert(
                "upload_streams".into(),
                json!(count(Direction::Up).to_string()),
            );
        }
        FlentTest::TcpNdown => {
            test_parameters.insert(
                "download_streams".into(),
                json!(count(Direction::Down).to_string()),
            );
        }
        _ => {}
    }
    // flent's DELAY is the idle time before (and after) the load; its TOTAL_LENGTH is
    // LENGTH + 2 * DELAY. Ours may differ before and after, so TOTAL_LENGTH is the real one.
    let metadata = json!({
        "NAME": test.name(),
        "TITLE": format!("unbloat {} to {}", md.profile, md.remote),
        "NOTE": md.notes.join("; "),
        "HOST": host,
        "HOSTS": [host],
        "LOCAL_HOST": md.hostname,
        "TIME": iso_utc(t0),
        "T0": iso_utc(t0),
        "LENGTH": results.phases.load_s,
        "TOTAL_LENGTH": results.phases.total(),
        "DELAY": results.phases.idle_before_s,
        "STEP_SIZE": step,
        "IP_VERSION": ip_version,
        "TEST_PARAMETERS": test_parameters,
        "KERNEL_NAME": "Linux",
        "KERNEL_RELEASE": md.kernel,
        "DATA_FILENAME": data_filename,
        "SERIES_META": series_meta,
        "FAILED_RUNNERS": 0,
        "EGRESS_INFO": {"iface": md.egress_iface},
        "UNBLOAT_VERSION": md.unbloat_version,
        "UNBLOAT_COMMAND_LINE": md.command_line,
        "UNBLOAT_PROFILE": md.profile,
        "UNBLOAT_PARTIAL": md.partial,
        "UNBLOAT_PARTIAL_REASON": md.partial_reason,
        // tc's words whole, counters and all: flent's metadata carries the system's context.
        "UNBLOAT_QDISCS": md.qdiscs.tc_json(),
    });
    json!({
        "version": FLENT_FILE_VERSION,
        "metadata": metadata,
        "x_values": x,
        "results": results_map,
        "raw_values": raw,
    })
}

/// Writes `results` as a gzip'd flent data file at `path` (which should end in `.flent.gz`).
pub fn write_flent_file(
    results: &Results,
    test: FlentTest,
    path: &Path,
) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let doc = flent_json(results, test, &name);
    let text = serde_json::to_vec(&doc).map_err(|e| ReportError::Json(e.to_string()))?;
    let io = |source| ReportError::Io {
        action: "writing flent file",
        path: path.to_path_buf(),
        source,
    };
    let file = unbloat_safefs::create(path, crate::FILE_MODE).map_err(io)?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    gz.write_all(&text).map_err(io)?;
    gz.finish().map_err(io)?.sync_all().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests;
