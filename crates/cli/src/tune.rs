//! `unbloat tune`: the arguments, the shaping through unbloat's own transactions (the same
//! plans, fairness defaults and verification as `unbloat start`), and the run's output.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use unbloat_measure::TestArgs;
use unbloat_shaper::linklayer::{Framing, LinkPreset};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::spec::parse_iface;
use unbloat_system::apply::{Request, Shaper};
use unbloat_system::lock::ControllerLock;
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::{ShapedState, StateDir};
use unbloat_tune::interrupt::{self, Shared};
use unbloat_tune::run::{self, MaxTime, Report, Settings};
use unbloat_tune::shaping::Shaping;
use unbloat_units::{IfName, Rate, Time};

use crate::shape::with_fairness;
use crate::{invalid, Failure};

#[cfg(feature = "networks")]
mod save;

const AFTER: &str = "\
Phases: idle baseline; unshaped capacity each way; framing (round trips over packet sizes: ATM's
48-byte cells make a staircase whose steps give the overhead, PTM/DOCSIS/Ethernet a straight line);
then a rate search each way (shape, load 8 s, judge the steady state's p99 induced latency, the
first 3 s left out; the start-up peak is reported beside it).

It saturates the link for its whole duration. Ctrl-C at any phase puts back what was there before.
Without --apply the old shaping is put back at the end too; the result is in DIR/unbloat.toml
(`unbloat start --config DIR/unbloat.toml`), DIR/tune.json and DIR/index.html.

With --save-as NAME the result is also written into the config file (--config, by default
/etc/unbloat/unbloat.toml) as [network.NAME], recognised by the MAC of IFACE's default gateway:
the daemon shapes with these rates whenever IFACE is behind that gateway again, and with
IFACE's own table elsewhere. The file must have an [interface.IFACE] table; the rest of it
(comments, order, other tables) stays as it is, and it is replaced atomically. A NAME already
there is re-tuned in place (its rate and link keys are replaced, the gateway added to its
list). Refused before any load, and then changing nothing: a NAME other than 1 to 32 letters,
digits, `-` or `_`; a file that does not read as a config; no default route through a gateway
on IFACE, or a gateway whose MAC the kernel has not resolved; a gateway another network of
IFACE has. After the run the gateway is read again: if it changed, nothing is saved.

Examples:
  unbloat tune eth0 --server far.example.net
  unbloat tune wlan0 --server far.example.net --save-as home && unbloat reload
  unbloat tune eth0 --server https://nq.example.net --apply
  unbloat tune eth0 --load iperf3://far.example.net --probe irtt://far.example.net --link vdsl2";

/// `unbloat tune`: find the link's framing and shaper rates by measuring it.
#[derive(Debug, Clone, Args)]
#[command(after_help = AFTER)]
pub struct TuneArgs {
    /// The WAN interface to tune.
    #[arg(value_name = "IFACE")]
    pub iface: String,
    /// The far end, as `unbloat test` takes it: HOST or unbloat://HOST (`unbloat serve`),
    /// https://HOST (a web server with the responsiveness endpoints), or with --load/--probe.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Where the load goes, when not to --server (`iperf3://HOST`, `https://HOST`).
    #[arg(long, value_name = "URL")]
    pub load: Option<String>,
    /// Where the latency probes go, when not to --server (`irtt://HOST`).
    #[arg(long, value_name = "URL")]
    pub probe: Option<String>,
    /// Web server: also trust the certificate authorities in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// The steady-state p99 induced latency the rates must keep (two full packets' time at the
    /// link's rate is added: no shaper keeps less).
    #[arg(long, value_name = "TIME", default_value = "10ms")]
    pub bound: Time,
    /// The longest the run may take. `auto`: 3 minutes, longer on a slow line (its framing
    /// sweep must space the echoes; at most 6 minutes), said once the capacity is measured. A
    /// time: at least 2m20s (2m with --no-sweep), what the phases with 3 search steps each way
    /// and one both-ways check need; longer runs search more steps.
    #[arg(long, value_name = "TIME|auto", default_value = "auto", value_parser = MaxTime::parse)]
    pub max_time: MaxTime,
    /// The link's framing preset, when you know it (the sweep then only confirms ATM or not).
    #[arg(long, value_name = "PRESET")]
    pub link: Option<LinkPreset>,
    /// Per-packet overhead in bytes, when you know it.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    pub overhead: Option<i64>,
    /// Minimum packet unit in bytes.
    #[arg(long, value_name = "BYTES")]
    pub mpu: Option<i64>,
    /// atm, ptm or none.
    #[arg(long, value_name = "FRAMING")]
    pub framing: Option<Framing>,
    /// Leave out the framing sweep: the link options given (or unbloat's default) stand.
    #[arg(long)]
    pub no_sweep: bool,
    /// Shape with the result at the end (otherwise the old shaping is put back).
    #[arg(long)]
    pub apply: bool,
    /// Where the config, JSON and report go (default: tune-IFACE).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print everything found as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also record the result in the config file as `[network.NAME]`, recognised by IFACE's
    /// default gateway's MAC, for the daemon (1 to 32 letters, digits, `-`, `_`).
    #[cfg(feature = "networks")]
    #[arg(long, value_name = "NAME")]
    pub save_as: Option<String>,
    /// The config file --save-as edits.
    #[cfg(feature = "networks")]
    #[arg(long, value_name = "FILE", default_value = crate::flags::DEFAULT_CONFIG, requires = "save_as")]
    pub config: PathBuf,
}

impl TuneArgs {
    fn test_args(&self) -> TestArgs {
        TestArgs {
            server: None,
            server_flag: self.server.clone(),
            load: self.load.clone(),
            probe: self.probe.clone(),
            small_url: None,
            large_url: None,
            upload_url: None,
            ca_file: self.ca_file.clone(),
            max_connections: None,
            profile: "download".into(),
            duration: run::STEP_LOAD,
            streams: None,
            idle: Duration::from_secs(3),
            probe_rate: 20.0,
            connect_timeout: Duration::from_secs(5),
            // tune judges the far end's probes alone.
            locate: false,
        }
    }

    fn link_options(&self) -> ShapeOptions {
        ShapeOptions {
            link: self.link,
            overhead: self.overhead,
            mpu: self.mpu,
            framing: self.framing,
            ..ShapeOptions::default()
        }
    }
}

/// Shapes through unbloat's transactions and remembers what to put back.
struct CliShaping {
    iface: IfName,
    /// unbloat's record from before the run, if it shaped the interface then.
    prior: Option<ShapedState>,
    touched: bool,
}

fn text(f: Failure) -> String {
    f.error.to_string()
}

impl Shaping for CliShaping {
    fn shape(&mut self, opts: &ShapeOptions) -> Result<(), String> {
        let planned = with_fairness(self.iface.clone(), opts).map_err(text)?;
        let runner = SystemRunner::from_env();
        let shaper = Shaper::new(&runner, StateDir::from_env());
        self.touched = true;
        let req = Request {
            plan: planned.plan,
            options: planned.opts,
            fairness: Some(planned.fairness),
        };
        shaper.start(&[req]).map(|_| ()).map_err(|e| e.to_string())
    }

    fn unshape(&mut self) -> Result<(), String> {
        let state = StateDir::from_env();
        if state
            .load(&self.iface)
            .map_err(|e| e.to_string())?
            .is_none()
        {
            return Ok(());
        }
        let runner = SystemRunner::from_env();
        self.touched = true;
        let shaper = Shaper::new(&runner, state);
        shaper
            .stop(std::slice::from_ref(&self.iface))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn restore(&mut self) -> Result<String, String> {
        if !self.touched {
            return Ok(format!("{} was not changed", self.iface));
        }
        match &self.prior {
            Some(rec) => {
                let runner = SystemRunner::from_env();
                let shaper = Shaper::new(&runner, StateDir::from_env());
                let req = Request {
                    plan: rec.plan.clone(),
                    options: rec.options.clone(),
                    fairness: rec.fairness.clone(),
                };
                shaper.start(&[req]).map_err(|e| e.to_string())?;
                Ok(format!(
                    "{}'s shaping from before the run is back: {}",
                    self.iface,
                    rec.plan.summary().join("; ")
                ))
            }
            None => {
                self.unshape()?;
                Ok(format!(
                    "{} is back as it was before the run (unbloat had not shaped it; anything else there was left alone)",
                    self.iface
                ))
            }
        }
    }
}

struct Terminal;

impl Report for Terminal {
    fn phase(&mut self, number: usize, name: &str, detail: &str) {
        eprintln!("unbloat tune [{number}/6] {name}: {detail}");
    }
}

pub fn tune(args: &TuneArgs) -> Result<(), Failure> {
    let iface = parse_iface(&args.iface).map_err(invalid)?;
    let mut test = args.test_args().plan().map_err(invalid)?;
    if test.far_ends.load.is_none() {
        return Err(invalid(anyhow!(
            "tune needs a far end that takes load (--server, or --load)"
        )));
    }
    test.command_line = std::env::args().collect();
    let bound_ms = args.bound.secs_f64() * 1000.0;
    if !(0.5..=1000.0).contains(&bound_ms) {
        return Err(invalid(anyhow!(
            "--bound {}: between 0.5ms and 1s",
            args.bound
        )));
    }
    let floor = unbloat_tune::run::min_time(args.no_sweep);
    let out_of_range = |max: &Duration| *max < floor || *max > Duration::from_secs(3600);
    if let Some(max) = args.max_time.fixed().filter(out_of_range) {
        return Err(invalid(anyhow!(
            "--max-time {}: auto, or between {} and 60m{}: the idle and capacity phases, {}3 search steps each way and one both-ways check take that long",
            fmt_duration(max),
            fmt_duration(floor),
            if args.no_sweep { "" } else { " (with --no-sweep less)" },
            if args.no_sweep { "" } else { "the framing sweep, " },
        )));
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("tune-{iface}")));
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    shaper.check_interface(&iface)?;
    #[cfg(feature = "networks")]
    let save_as = match &args.save_as {
        Some(name) => Some(save::before(name, &args.config, &iface)?),
        None => None,
    };
    // A qdisc someone else put there would be measured as the link and then refused at the first
    // search step, minutes later: refused now. The rates only give the plan its shape.
    let sample = ShapeOptions {
        down: Some(Rate::from_mbit(10)),
        up: Some(Rate::from_mbit(10)),
        ..args.link_options()
    };
    let sample = with_fairness(iface.clone(), &sample)?;
    shaper.check_free(&sample.plan)?;
    for warning in shaper.check_offload(&[sample.request()])? {
        eprintln!("unbloat: warning: {warning}");
    }
    // Tune moves the rates for minutes, as a controller does: it holds the interface's controller
    // lock, so no autorate controller runs beside it (each would spoil the other's work), and the
    // daemon's checks leave the interface to it instead of putting the configured rates back
    // under its steps. Held until the process ends, an interrupted one too.
    state.ensure()?;
    let _controller = ControllerLock::acquire(state.path(), iface.as_str(), "unbloat tune")
        .map_err(|e| anyhow!("tune {iface}: {e}; nothing was measured or changed"))?;
    let prior = state.load(&iface)?;
    let shaping: Shared = Arc::new(Mutex::new(Box::new(CliShaping {
        iface: iface.clone(),
        prior,
        touched: false,
    })));
    let stop = interrupt::watch(shaping.clone());
    eprintln!(
        "unbloat: tune saturates {iface}'s link both ways for up to {}s against {}; Ctrl-C puts the old shaping back",
        args.max_time.most().as_secs(),
        test.remote
    );
    let settings = Settings {
        test,
        bound_ms,
        max_time: args.max_time,
        link: args.link_options(),
        skip_sweep: args.no_sweep,
        apply: args.apply,
    };
    let tuned = match unbloat_system::knobs::var("UNBLOAT_TUNE_RESULT") {
        Some(file) => result_of(&file)?,
        None => run::run(&settings, &shaping, &stop, &mut Terminal).map_err(|e| Failure {
            code: e.exit_code(),
            error: anyhow!("tune {iface}: {e}"),
        })?,
    };
    let note = format!(
        "unbloat tune {iface} against {}: steady-state p99 bound {}, {:.0} s",
        settings.test.remote, args.bound, tuned.seconds
    );
    let files =
        unbloat_tune::output::write(&out, iface.as_str(), &tuned, &note).map_err(|e| anyhow!(e))?;
    eprintln!(
        "unbloat: {}; {}",
        tuned.ending,
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rate = |r: Option<unbloat_units::Rate>| r.map_or("not set".to_string(), |r| r.to_string());
    eprintln!(
        "unbloat: {iface}: down {} up {}",
        rate(tuned.down),
        rate(tuned.up)
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tuned)?);
    }
    #[cfg(feature = "networks")]
    if let Some(to) = &save_as {
        save::after(to, &tuned.options, &note)?;
    }
    Ok(())
}

/// The test knob `UNBLOAT_TUNE_RESULT` (builds with `test-knobs` only): a `tune.json` taken as
/// the run's result, so what follows a run (its files, `--save-as` against the real kernel's
/// gateway) is tested without minutes of load.
fn result_of(file: &std::ffi::OsStr) -> Result<run::Tuned, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow!("UNBLOAT_TUNE_RESULT {}: {e}", file.to_string_lossy()))?;
    Ok(serde_json::from_str(&text)
        .map_err(|e| anyhow!("UNBLOAT_TUNE_RESULT {}: {e}", file.to_string_lossy()))?)
}

/// `2m10s`, `3m`, `45s`: how `--max-time` is written.
fn fmt_duration(d: Duration) -> String {
    let (m, s) = (d.as_secs() / 60, d.as_secs() % 60);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}
