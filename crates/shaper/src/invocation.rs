//! The argument vectors of unbloat's own commands, for the programs that run `unbloat` as a
//! child: the daemon's web page (a `test` or `tune` run) and the test bench (`start`, `test`,
//! `tune`, ... in an emulated router). Each command is a typed value ([`Start`], [`SetRate`],
//! [`Test`], [`Tune`], [`Stop`], [`Status`]), and [`Invocation::argv`] writes it as the command
//! line reads it, so no caller spells a flag or formats a value by hand.
//!
//! `start`'s shaping flags come from the option declarations ([`OPTIONS`]): each set option is
//! written in the form its [`Cli`] says (`--down 78mbit`, `--nat`/`--no-nat`,
//! `--ack-filter=aggressive`, `--classify` once per rule), its value as a user types it
//! ([`Field::show`](crate::options::Field::show)); an option added to the declarations is
//! written here without a line of this file. An option the command line cannot say (a config
//! key without a flag, `wash = false`) is refused, never dropped: the child would shape
//! something else than asked.
//!
//! Values have their units (`78mbit`, `30s`, `2m`) and go as separate arguments, as a person
//! types them. A value that starts with `-` goes as `--flag=VALUE` and a positional one after
//! `--`, so the child cannot read either as a flag, whatever the caller passes.
//!
//! The binary's test (`crates/cli/src/invocation_tests.rs`) parses these vectors with the real
//! clap definition and checks that it reads back what was built.
//!
//! It lives here because `start`'s flags are the option table's, and this is the lowest crate
//! that has it which the daemon (a product crate: no test bench) and the lab both use; like
//! [`script`](crate::script)'s `ip` argv it is pure data and runs nothing.

use crate::options::{Cli, Opt, ShapeOptions, OPTIONS};
use std::path::{Path, PathBuf};
use unbloat_units::{IfName, Rate, Time};

/// One run of `unbloat`.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    Start(Start),
    Stop(Stop),
    Status(Status),
    SetRate(SetRate),
    Test(Test),
    Tune(Tune),
}

/// `unbloat start`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Start {
    /// None: every interface of the config file.
    pub iface: Option<IfName>,
    /// The shaping flags (over the config file's table, where both are given).
    pub options: ShapeOptions,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--dry-run`: print the commands, change nothing.
    pub dry_run: bool,
    /// `--json`.
    pub json: bool,
}

/// `unbloat stop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// None: `--all`.
    pub iface: Option<IfName>,
    pub json: bool,
}

/// `unbloat status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// None: every interface unbloat shapes.
    pub iface: Option<IfName>,
    pub json: bool,
}

/// `unbloat set-rate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetRate {
    pub iface: IfName,
    pub down: Option<Rate>,
    pub up: Option<Rate>,
    /// `--i-mean-it`: a rate that could cut the link off.
    pub i_mean_it: bool,
    pub json: bool,
}

/// Where `test` and `tune` measure against, as `unbloat test` names a far end (`HOST[:PORT]`,
/// `unbloat://`, `https://`, `irtt://`, `iperf3://`); the text is the child's to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FarEnd {
    /// test's SERVER, tune's `--server`.
    pub server: Option<String>,
    /// `--load`: where the load goes, when not to the server.
    pub load: Option<String>,
    /// `--probe`: where the latency probes go, when not to the server.
    pub probe: Option<String>,
    /// `--ca-file`: a web server's own certificate authorities.
    pub ca_file: Option<PathBuf>,
}

/// `unbloat test`. Unset values are the command's defaults (rrul, 30s of load, 5s idle).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Test {
    pub far_end: FarEnd,
    /// `--max-connections`: a web server's load connections per direction.
    pub max_connections: Option<u32>,
    /// `--profile`: rrul, upload, download, ...
    pub profile: Option<String>,
    /// `--duration`: the load's length.
    pub duration: Option<Time>,
    /// `--streams`: TCP streams per direction.
    pub streams: Option<u32>,
    /// `--idle`: the baseline before the load and the tail after it.
    pub idle: Option<Time>,
    /// `--probe-rate`: probes per second per class.
    pub probe_rate: Option<f64>,
    /// `--no-locate`: no gateway probes or egress backlog.
    pub no_locate: bool,
    pub out: Option<PathBuf>,
    pub json: bool,
}

/// `unbloat tune`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tune {
    pub iface: IfName,
    /// The far end; its server goes as `--server`.
    pub far_end: FarEnd,
    /// `--max-time`; None: `auto`, the command's default.
    pub max_time: Option<Time>,
    /// `--bound`: the steady-state p99 induced latency the rates must keep.
    pub bound: Option<Time>,
    /// `--no-sweep`: the framing as given (or the default), not measured.
    pub no_sweep: bool,
    /// `--apply`: shape with the result at the end.
    pub apply: bool,
    pub out: Option<PathBuf>,
    pub json: bool,
}

/// Why an invocation has no argument vector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsayable {
    #[error(
        "{key} = {value}: the command line cannot say it (no flag does); write it in the config file"
    )]
    NoFlag { key: &'static str, value: String },
    #[error("{}: not UTF-8, which an argument list of text cannot carry", .0.display())]
    NotText(PathBuf),
}

impl Invocation {
    /// The arguments after the program's name: `["start", "wan0", "--down", "78mbit", ...]`.
    pub fn argv(&self) -> Result<Vec<String>, Unsayable> {
        let mut a = Argv::default();
        match self {
            Invocation::Start(s) => {
                a.word("start");
                if let Some(i) = &s.iface {
                    a.positional(i.as_str());
                }
                if let Some(c) = &s.config {
                    a.value("config", path(c)?);
                }
                shaping_flags(&mut a, &s.options)?;
                a.switch("dry-run", s.dry_run);
                a.switch("json", s.json);
            }
            Invocation::Stop(s) => {
                a.word("stop");
                match &s.iface {
                    Some(i) => a.positional(i.as_str()),
                    None => a.switch("all", true),
                }
                a.switch("json", s.json);
            }
            Invocation::Status(s) => {
                a.word("status");
                if let Some(i) = &s.iface {
                    a.positional(i.as_str());
                }
                a.switch("json", s.json);
            }
            Invocation::SetRate(s) => {
                a.word("set-rate");
                a.positional(s.iface.as_str());
                a.option("down", s.down);
                a.option("up", s.up);
                a.switch("i-mean-it", s.i_mean_it);
                a.switch("json", s.json);
            }
            Invocation::Test(t) => {
                a.word("test");
                if let Some(s) = &t.far_end.server {
                    a.positional(s);
                }
                a.far_end(&t.far_end)?;
                a.option("max-connections", t.max_connections);
                a.option("profile", t.profile.as_deref());
                a.option("duration", t.duration.map(duration));
                a.option("streams", t.streams);
                a.option("idle", t.idle.map(duration));
                a.option("probe-rate", t.probe_rate);
                a.switch("no-locate", t.no_locate);
                a.option("out", t.out.as_deref().map(path).transpose()?);
                a.switch("json", t.json);
            }
            Invocation::Tune(t) => {
                a.word("tune");
                a.positional(t.iface.as_str());
                a.option("server", t.far_end.server.as_deref());
                a.far_end(&t.far_end)?;
                a.option("max-time", t.max_time.map(duration));
                a.option("bound", t.bound.map(duration));
                a.switch("no-sweep", t.no_sweep);
                a.switch("apply", t.apply);
                a.option("out", t.out.as_deref().map(path).transpose()?);
                a.switch("json", t.json);
            }
        }
        Ok(a.finish())
    }
}

macro_rules! into_invocation {
    ($($t:ident),*) => {$(
        impl From<$t> for Invocation {
            fn from(v: $t) -> Invocation {
                Invocation::$t(v)
            }
        }
    )*};
}
into_invocation!(Start, Stop, Status, SetRate, Test, Tune);

/// A duration as a person types it for `--duration`, `--idle`, `--max-time` and `--bound`
/// (every one of them takes [`Time`]'s words): whole minutes as `2m`, else [`Time`]'s own
/// `30s`, `500ms`.
pub fn duration(t: Time) -> String {
    const MINUTE: u64 = 60_000_000;
    match t.micros() {
        us if us != 0 && us % MINUTE == 0 => format!("{}m", us / MINUTE),
        _ => t.to_string(),
    }
}

fn path(p: &Path) -> Result<&str, Unsayable> {
    p.to_str()
        .ok_or_else(|| Unsayable::NotText(p.to_path_buf()))
}

/// `start`'s flags for the options `o` sets, in the declarations' order.
fn shaping_flags(a: &mut Argv, o: &ShapeOptions) -> Result<(), Unsayable> {
    for opt in OPTIONS {
        let Some(shown) = opt.field.show(o) else {
            continue;
        };
        let unsayable = || Unsayable::NoFlag {
            key: opt.key,
            value: shown.clone(),
        };
        match opt.cli {
            Cli::None => return Err(unsayable()),
            Cli::Value(_) => a.value(opt.key, &shown),
            Cli::Named(flag, _) => a.value(flag, &shown),
            Cli::Repeated(_) => {
                for item in opt.field.show_each(o) {
                    a.value(opt.key, &item);
                }
            }
            // The flag alone where it means the value, as a person writes it (`--ack-filter`).
            Cli::Optional(_, missing) if alone_means(opt, o, missing) => a.switch(opt.key, true),
            Cli::Optional(..) => a.word(&format!("--{}={shown}", opt.key)),
            Cli::Switch | Cli::Pair(..) if alone_means(opt, o, "true") => a.switch(opt.key, true),
            Cli::Off(off) | Cli::Pair(off, _) if alone_means(opt, o, "false") => {
                a.switch(off, true)
            }
            Cli::Switch | Cli::Off(_) | Cli::Pair(..) => return Err(unsayable()),
        }
    }
    Ok(())
}

/// Whether `opt`'s value in `o` is the one a flag alone gives it: `text`, read as the command
/// line reads it (the binary's flags set `"true"` for a switch, `"false"` for a `--no-` flag).
fn alone_means(opt: &Opt, o: &ShapeOptions, text: &str) -> bool {
    let mut alone = ShapeOptions::default();
    opt.field.set(&mut alone, text).is_ok() && opt.field.same(&alone, o)
}

/// An argument vector being written.
#[derive(Default)]
struct Argv {
    words: Vec<String>,
    /// Positional values that start with `-`: after `--`, at the end.
    after_dashes: Vec<String>,
}

impl Argv {
    fn word(&mut self, w: &str) {
        self.words.push(w.to_string());
    }

    fn positional(&mut self, v: &str) {
        match v.starts_with('-') {
            true => self.after_dashes.push(v.to_string()),
            false => self.word(v),
        }
    }

    fn value(&mut self, flag: &str, v: impl std::fmt::Display) {
        let v = v.to_string();
        if v.starts_with('-') {
            self.words.push(format!("--{flag}={v}"));
        } else {
            self.words.extend([format!("--{flag}"), v]);
        }
    }

    fn option(&mut self, flag: &str, v: Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.value(flag, v);
        }
    }

    fn switch(&mut self, flag: &str, on: bool) {
        if on {
            self.words.push(format!("--{flag}"));
        }
    }

    /// The far end's flags but its server, which each command places itself.
    fn far_end(&mut self, f: &FarEnd) -> Result<(), Unsayable> {
        self.option("load", f.load.as_deref());
        self.option("probe", f.probe.as_deref());
        self.option("ca-file", f.ca_file.as_deref().map(path).transpose()?);
        Ok(())
    }

    fn finish(mut self) -> Vec<String> {
        if !self.after_dashes.is_empty() {
            self.words.push("--".into());
            self.words.append(&mut self.after_dashes);
        }
        self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AckFilter;
    use crate::options::Isolation;

    fn wan0() -> IfName {
        "wan0".parse().unwrap()
    }

    fn argv(i: impl Into<Invocation>) -> Vec<String> {
        i.into().argv().unwrap()
    }

    #[test]
    fn start_writes_each_option_in_its_flags_form() {
        let options = ShapeOptions {
            down: Some(Rate::from_kbit(19_000)),
            up: Some(Rate::from_kbit(4_750)),
            isolation: Some(Isolation::Flows),
            nat: Some(false),
            ack_filter: Some(AckFilter::Enabled),
            overhead: Some(-4),
            classify: Some(vec!["gaming".into(), "bulk lan-host 10.0.0.5".into()]),
            ..ShapeOptions::default()
        };
        let start = Start {
            iface: Some(wan0()),
            options,
            json: true,
            ..Start::default()
        };
        assert_eq!(
            argv(start).join(" "),
            "start wan0 --down 19mbit --up 4750kbit --overhead=-4 --isolation flows --no-nat \
             --ack-filter --classify gaming --classify bulk lan-host 10.0.0.5 --json"
        );
        let aggressive = ShapeOptions {
            ack_filter: Some(AckFilter::Aggressive),
            ..ShapeOptions::default()
        };
        let start = Start {
            options: aggressive,
            config: Some("/etc/unbloat/unbloat.toml".into()),
            ..Start::default()
        };
        assert_eq!(
            argv(start),
            [
                "start",
                "--config",
                "/etc/unbloat/unbloat.toml",
                "--ack-filter=aggressive"
            ]
        );
    }

    #[test]
    fn what_no_flag_says_is_refused_naming_the_key() {
        for (options, key) in [
            (
                ShapeOptions {
                    split_gso: Some(false),
                    ..ShapeOptions::default()
                },
                "split-gso",
            ),
            (
                ShapeOptions {
                    wash: Some(false),
                    ..ShapeOptions::default()
                },
                "wash",
            ),
            (
                ShapeOptions {
                    ingress_keyword: Some(true),
                    ..ShapeOptions::default()
                },
                "ingress-keyword",
            ),
        ] {
            let start = Invocation::Start(Start {
                iface: Some(wan0()),
                options,
                ..Start::default()
            });
            match start.argv() {
                Err(Unsayable::NoFlag { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn test_and_tune_write_units_and_their_far_end() {
        let test = Test {
            far_end: FarEnd {
                server: Some("10.77.4.2:4420".into()),
                ..FarEnd::default()
            },
            profile: Some("rrul".into()),
            duration: Some(Time::from_secs(30)),
            idle: Some(Time::from_secs(3)),
            probe_rate: Some(20.0),
            out: Some("/tmp/out".into()),
            json: true,
            ..Test::default()
        };
        assert_eq!(
            argv(test).join(" "),
            "test 10.77.4.2:4420 --profile rrul --duration 30s --idle 3s --probe-rate 20 \
             --out /tmp/out --json"
        );
        let tune = Tune {
            iface: wan0(),
            far_end: FarEnd {
                server: Some("far.example".into()),
                ..FarEnd::default()
            },
            max_time: Some(Time::from_secs(120)),
            bound: Some(Time::from_millis(10)),
            no_sweep: false,
            apply: true,
            out: None,
            json: false,
        };
        assert_eq!(
            argv(tune).join(" "),
            "tune wan0 --server far.example --max-time 2m --bound 10ms --apply"
        );
    }

    /// Whatever text a caller passes, the child reads it as the value it is, never as a flag.
    #[test]
    fn values_that_look_like_flags_stay_values() {
        let test = Test {
            far_end: FarEnd {
                server: Some("-x".into()),
                ..FarEnd::default()
            },
            profile: Some("--apply".into()),
            ..Test::default()
        };
        assert_eq!(argv(test), ["test", "--profile=--apply", "--", "-x"]);
    }

    #[test]
    fn durations_read_as_typed() {
        assert_eq!(duration(Time::from_secs(180)), "3m");
        assert_eq!(duration(Time::from_secs(90)), "90s");
        assert_eq!(duration(Time::from_millis(1500)), "1500ms");
        assert_eq!(duration(Time::from_micros(0)), "0us");
    }
}
