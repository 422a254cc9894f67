//! `unbloat plan | start | stop | status | config check`: from flags or a config file to a
//! validated plan (pure, in unbloat-shaper), then applied, verified, read back and removed
//! through unbloat-system.

use crate::flags::ShapeFlags;
use crate::{invalid, Failure};
use anyhow::{anyhow, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;
use unbloat_shaper::config::ConfigFile;
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::{parse_iface, Spec};
use unbloat_shaper::status::{render_text, Status};
use unbloat_shaper::tcjson::{LiveState, LiveTexts};
use unbloat_system::apply::{Outcome, Request, Shaper};
use unbloat_system::planned::{self, Planned};
use unbloat_system::recover::Recovery;
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::StateDir;
use unbloat_units::{IfName, Rate};

use crate::flags::DEFAULT_CONFIG;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The WAN interface (eth0, eth0.2, pppoe-wan, ...). Without it: every interface of the
    /// config file.
    pub iface: Option<String>,
    /// Config file: one [interface.NAME] table per interface (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the plan as JSON (the typed operations) instead of shell commands.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub flags: ShapeFlags,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Print the exact commands that would run, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply on trial: unless `unbloat confirm` (or Enter on this terminal) comes within this
    /// time (60s, 2m, 90 = seconds; 2s to 1h), the previous setup comes back by itself, even if
    /// this SSH session is lost or unbloat is killed. The time is counted on the boot clock: a
    /// step of the wall clock (NTP) neither extends nor shortens it; a reboot during the trial
    /// counts as not confirmed.
    #[arg(long, value_name = "TIME", value_parser = parse_confirm)]
    pub confirm: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct ConfirmArgs {
    /// Internal: the watchdog of a change on trial (its journal id).
    #[arg(long, hide = true, value_name = "ID")]
    pub revert_at_id: Option<String>,
}

/// `--confirm`: a bare number is seconds (as `ping -w` and `iperf3 -t`), or `90s`, `2m`.
fn parse_confirm(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((t, ""), |i| t.split_at(i));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a time (60s, 2m, 90)"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "m" | "min" => n * 60.0,
        "ms" => n / 1000.0,
        other => return Err(format!("{text}: unknown unit {other:?} (use s or m)")),
    };
    if !(2.0..=3600.0).contains(&secs) {
        return Err(format!(
            "{text} is outside 2s to 1h: shorter leaves no time to check the link, longer leaves a bad change in place too long"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The interface to stop shaping.
    #[arg(required_unless_present = "all")]
    pub iface: Option<String>,
    /// Stop every interface unbloat shapes.
    #[arg(long, conflicts_with = "iface")]
    pub all: bool,
    /// Report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The interface; without it, every interface unbloat shapes.
    pub iface: Option<String>,
    /// The status as JSON.
    #[arg(long)]
    pub json: bool,
    /// Refresh every SECONDS (default 1, 0.1 to 3600) until interrupted.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "1", value_parser = parse_watch)]
    pub watch: Option<Duration>,
}

/// `--watch`: the units crate's rule for durations (a bare number is seconds), finite, and
/// neither a busy loop nor a screen that never refreshes.
fn parse_watch(text: &str) -> Result<Duration, String> {
    unbloat_units::duration::parse_test_duration(
        text,
        unbloat_units::Time::from_millis(100)..=unbloat_units::Time::from_secs(3600),
    )
    .map(unbloat_units::Time::as_duration)
    .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct SetRateArgs {
    /// The shaped interface.
    pub iface: String,
    /// The new download rate (tc units: 78mbit, 19950kbit).
    #[arg(long, value_name = "RATE")]
    pub down: Option<Rate>,
    /// The new upload rate.
    #[arg(long, value_name = "RATE")]
    pub up: Option<Rate>,
    /// Report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Apply on trial, as `start --confirm`.
    #[arg(long, value_name = "TIME", value_parser = parse_confirm)]
    pub confirm: Option<Duration>,
    /// Take a rate that could cut this link off (below 64 kbit/s, far below the interface's
    /// speed, directions over 1000:1 apart), as `start --i-mean-it`.
    #[arg(long)]
    pub i_mean_it: bool,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Forget an interrupted change that cannot be undone, after fixing the interfaces by hand.
    #[arg(long)]
    pub discard: bool,
    /// Report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The config file (default /etc/unbloat/unbloat.toml).
    pub file: Option<PathBuf>,
    /// Print the validated plans too.
    #[arg(long)]
    pub plans: bool,
}

/// The fairness defaults of this machine under `user`'s options, planned
/// ([`unbloat_system::planned::with_fairness`]); its errors are the user's (exit 2).
pub(crate) fn with_fairness(iface: IfName, user: &ShapeOptions) -> Result<Planned, Failure> {
    planned::with_fairness(&SystemRunner::from_env(), iface, user).map_err(invalid)
}

fn checked(spec: Spec) -> Result<Spec, Failure> {
    planned::checked(spec).map_err(invalid)
}

/// The plans asked for: one per interface, from flags over the config file, over the fairness
/// defaults of this machine.
fn plans(args: &PlanArgs) -> Result<Vec<Planned>, Failure> {
    let flag_opts = args.flags.to_options();
    let explicit = args.config.is_some();
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let config = if explicit
        || (args.iface.is_none() && path.exists())
        || (args.iface.is_some() && path.exists() && !args.flags.any())
    {
        Some(ConfigFile::load(&path).map_err(invalid)?)
    } else {
        None
    };
    let mut out = vec![];
    match &args.iface {
        Some(name) => {
            let iface = parse_iface(name).map_err(invalid)?;
            let base = config
                .as_ref()
                .and_then(|c| c.interface(&iface))
                .map(|i| i.options.clone())
                .unwrap_or_default();
            if config.is_some() && base == ShapeOptions::default() && !args.flags.any() {
                return Err(invalid(anyhow!(
                    "{} has no [interface.{iface}] table, and no rates were given",
                    path.display()
                )));
            }
            let opts = ShapeOptions::merge(&base, &flag_opts);
            // The user's options alone first: their errors name what the user said. The
            // link-speed check is with_fairness's (the fairness defaults add no rate).
            Spec::new(iface.clone(), &opts).map_err(invalid)?;
            out.push(with_fairness(iface, &opts)?);
        }
        None => {
            let Some(config) = config else {
                return Err(invalid(anyhow!(
                    "name an interface (unbloat start eth0 --down 78mbit --up 19950kbit), or write {}",
                    path.display()
                )));
            };
            if args.flags.any() {
                return Err(invalid(anyhow!("shaping flags need an interface name; for the whole config file, put them in the file")));
            }
            out = planned::of_config(&SystemRunner::from_env(), &config).map_err(invalid)?;
        }
    }
    Ok(out)
}

/// What `unbloat plan` prints for one interface: the fairness line, then the commands.
fn shell_text(p: &Planned) -> String {
    format!(
        "# {}: {}\n{}",
        p.plan.wan,
        p.fairness,
        p.plan.render_shell()
    )
}

/// `unbloat plan`'s text for `iface` with `opts`, as it would print it for a config table with
/// those options on this machine (its fairness defaults under them, the link-speed check).
#[cfg(feature = "import")]
pub fn plan_text(iface: IfName, opts: &ShapeOptions) -> Result<String, Failure> {
    Ok(shell_text(&with_fairness(iface, opts)?))
}

pub fn plan(args: &PlanArgs) -> Result<(), Failure> {
    for p in plans(args)? {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&p.plan)?);
            eprintln!("unbloat: {}: {}", p.plan.wan, p.fairness);
        } else {
            print!("{}", shell_text(&p));
        }
    }
    Ok(())
}

pub fn live_state(wan: &str, t: &LiveTexts) -> anyhow::Result<LiveState> {
    Ok(LiveState::parse(&parse_iface(wan)?, t)?)
}

pub fn start(args: &StartArgs) -> Result<(), Failure> {
    let plans = plans(&args.plan)?;
    if args.dry_run {
        for p in &plans {
            print!("{}", shell_text(p));
        }
        return Ok(());
    }
    let runner = SystemRunner::from_env();
    let mut shaper = Shaper::new(&runner, StateDir::from_env());
    shaper.confirm = args.confirm;
    let reqs: Vec<Request> = plans.iter().map(Planned::request).collect();
    let names: Vec<String> = reqs.iter().map(|r| r.plan.wan.to_string()).collect();
    let cannot = || format!("cannot shape {}", names.join(", "));
    for warning in shaper.check_offload(&reqs).with_context(cannot)? {
        eprintln!("unbloat: warning: {warning}");
    }
    // Every interface of the command in one transaction: all are shaped, or none is changed.
    let outcomes = shaper.start(&reqs).with_context(cannot)?;
    for (Planned { plan, fairness, .. }, outcome) in plans.iter().zip(&outcomes) {
        match outcome {
            Outcome::Applied { replaced, in_place } => {
                let how = match (replaced, in_place) {
                    (false, _) => "shaped".to_string(),
                    (true, 0) => "reshaped".to_string(),
                    (true, n) => format!(
                        "changed in place ({n} qdisc{})",
                        if *n == 1 { "" } else { "s" }
                    ),
                };
                eprintln!(
                    "unbloat: {} {how} and verified: {}",
                    plan.wan,
                    plan.summary().join("; ")
                );
            }
            Outcome::Unchanged => eprintln!(
                "unbloat: {} is already shaped exactly so; nothing changed",
                plan.wan
            ),
        }
        eprintln!("unbloat: {}: {fairness}", plan.wan);
        if args.plan.json {
            println!(
                "{}",
                serde_json::json!({"iface": plan.wan.to_string(), "plan": plan})
            );
        }
    }
    if args.confirm.is_some() && outcomes.iter().any(|o| *o != Outcome::Unchanged) {
        on_trial(&shaper)?;
    }
    Ok(())
}

/// After a change on trial: a watchdog process of its own session undoes it at the deadline
/// unless confirmed (so a lost terminal or a killed unbloat still ends with the old setup; if
/// the watchdog is killed too, the next unbloat command undoes it). On a terminal, Enter
/// confirms.
fn on_trial(shaper: &Shaper) -> Result<(), Failure> {
    use std::os::unix::process::CommandExt;
    let Some(journal) = shaper.state.read_journal()? else {
        return Ok(());
    };
    let left = unbloat_system::deadline::whole_secs(journal.left_now());
    let mut watchdog = std::process::Command::new(std::env::current_exe()?);
    watchdog
        .args(["confirm", "--revert-at-id", &journal.id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid in the child before exec: it leaves this session, so the terminal's hangup
    // does not reach it. No allocation or lock is touched between fork and exec.
    unsafe {
        watchdog.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = watchdog
        .spawn()
        .context("starting the watchdog of the change on trial")?;
    eprintln!(
        "unbloat: on trial for {left} s: `unbloat confirm` keeps it; otherwise the previous setup comes back by itself (watchdog pid {})",
        child.id()
    );
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(0) } != 1 {
        return Ok(());
    }
    eprintln!("unbloat: or press Enter here to keep it");
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut fds, 1, (left * 1000).min(i32::MAX as u64) as i32) };
    if ready == 1 {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let kept = shaper.confirm()?;
        if !kept.is_empty() {
            eprintln!("unbloat: confirmed; the change stays");
        }
    } else {
        eprintln!("unbloat: not confirmed in time; the watchdog puts the previous setup back");
    }
    Ok(())
}

/// `unbloat confirm`: keep a change on trial (or, as the hidden watchdog, undo it at its
/// deadline unless kept).
pub fn confirm(args: &ConfirmArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let shaper = Shaper::new(&runner, StateDir::from_env());
    if let Some(id) = &args.revert_at_id {
        // SAFETY: ignoring SIGHUP has no memory-safety preconditions.
        unsafe {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
        }
        shaper.revert_if_unconfirmed(id)?;
        return Ok(());
    }
    let kept = shaper.confirm()?;
    if kept.is_empty() {
        eprintln!("unbloat: no change is waiting for confirmation");
    } else {
        let names: Vec<String> = kept.iter().map(|i| i.to_string()).collect();
        eprintln!(
            "unbloat: confirmed: {} keep their new setup",
            names.join(", ")
        );
    }
    Ok(())
}

/// `unbloat set-rate IFACE --down R --up R`: the recorded options with new rates, re-planned, and
/// applied in place.
pub fn set_rate(args: &SetRateArgs) -> Result<(), Failure> {
    let iface = parse_iface(&args.iface).map_err(invalid)?;
    if args.down.is_none() && args.up.is_none() {
        return Err(invalid(anyhow!(
            "give --down, --up or both: set-rate changes only rates"
        )));
    }
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let Some(record) = state.load(&iface)? else {
        return Err(Failure::from(anyhow!(
            "{iface} is not shaped by unbloat; `unbloat start {iface} --down ... --up ...` shapes it"
        )));
    };
    let mut opts: ShapeOptions = record.options.clone();
    for (new, old, flag, on) in [
        (
            args.down,
            &mut opts.down,
            "--down",
            record.plan.ingress.is_some(),
        ),
        (args.up, &mut opts.up, "--up", record.plan.egress.is_some()),
    ] {
        if let Some(rate) = new {
            if !on || rate.bits_per_sec() == 0 {
                return Err(invalid(anyhow!(
                    "{flag} {rate}: {iface} does not shape that direction now, or the rate turns it off; set-rate changes rates only (use `unbloat start` to add or remove a direction)"
                )));
            }
            *old = Some(rate);
        }
    }
    if args.i_mean_it {
        opts.i_mean_it = Some(true);
    }
    let plan = Plan::build(&checked(Spec::new(iface.clone(), &opts).map_err(invalid)?)?);
    let mut shaper = Shaper::new(&runner, state);
    shaper.confirm = args.confirm;
    let req = Request {
        plan,
        options: opts.clone(),
        fairness: record.fairness.clone(),
    };
    let outcome = shaper
        .set_rate(&req)
        .with_context(|| format!("cannot change the rates of {iface}"))?;
    let changed = !matches!(outcome, Outcome::Unchanged);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"iface": iface.to_string(), "changed": changed, "down": opts.down, "up": opts.up})
        );
    } else if changed {
        eprintln!("unbloat: {iface}: {}", req.plan.summary().join("; "));
    } else {
        eprintln!("unbloat: {iface} already runs at these rates; nothing changed");
    }
    if args.confirm.is_some() && changed {
        on_trial(&shaper)?;
    }
    Ok(())
}

/// `unbloat recover`: finish or undo a change a dead process left.
pub fn recover(args: &RecoverArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let shaper = Shaper::new(&runner, StateDir::from_env());
    let r = shaper.recover(args.discard)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "undone": r.undone.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                "finished": r.finished.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                "namespaces": r.namespaces,
                "discarded": r.discarded,
                "reverted": r.reverted.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
            })
        );
    } else {
        say_recovery(&r);
    }
    Ok(())
}

fn say_recovery(r: &Recovery) {
    let names = |v: &[unbloat_units::IfName]| {
        v.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if r.is_empty() {
        eprintln!("unbloat: nothing to recover");
    }
    if !r.undone.is_empty() {
        eprintln!(
            "unbloat: an interrupted change was undone: {} as before it",
            names(&r.undone)
        );
    }
    if !r.finished.is_empty() {
        eprintln!(
            "unbloat: an interrupted change was finished: {} recorded",
            names(&r.finished)
        );
    }
    if !r.namespaces.is_empty() {
        eprintln!(
            "unbloat: removed the probe namespaces of dead processes: {}",
            r.namespaces.join(", ")
        );
    }
    if r.discarded {
        eprintln!("unbloat: the journal of an interrupted change was discarded");
    }
    if !r.reverted.is_empty() {
        eprintln!(
            "unbloat: a change on trial was not confirmed in time: {} as before it",
            names(&r.reverted)
        );
    }
}

pub fn stop(args: &StopArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    let ifaces = match &args.iface {
        Some(i) => vec![parse_iface(i).map_err(invalid)?],
        None => {
            // Finish or undo an interrupted change first, so the list is what is really shaped.
            shaper.recover(false)?;
            state.list()?
        }
    };
    let stopped = if ifaces.is_empty() {
        vec![]
    } else {
        let names: Vec<String> = ifaces.iter().map(|i| i.to_string()).collect();
        shaper
            .stop(&ifaces)
            .with_context(|| format!("cannot stop shaping {}", names.join(", ")))?
    };
    for s in &stopped {
        for why in &s.left_alone {
            eprintln!("unbloat: {}: left alone: {why}", s.iface);
        }
        eprintln!("unbloat: {} is no longer shaped", s.iface);
    }
    if args.json {
        let names: Vec<String> = stopped.iter().map(|s| s.iface.to_string()).collect();
        let left: Vec<_> = stopped
            .iter()
            .flat_map(|s| {
                s.left_alone.iter().map(
                    move |w| serde_json::json!({"iface": s.iface.to_string(), "left_alone": w}),
                )
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({ "stopped": names, "left_alone": left })
        );
    } else if ifaces.is_empty() {
        eprintln!("unbloat: no interface is shaped by unbloat");
    }
    Ok(())
}

pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let shaper = Shaper::new(&runner, state.clone());
    // Like every command, status first finishes or undoes a change a dead process left, so it
    // shows a whole setup; reading needs no root, so without root it only reads. Only when a
    // journal is there, and waiting at most 2 s for the lock: status must not make a change
    // beside it wait (an autorate controller's next rate), nor wait long for one itself.
    if unbloat_system::runner::is_root() {
        match shaper.recover_if_needed(std::time::Duration::from_secs(2)) {
            Ok(r) if !r.is_empty() => say_recovery(&r),
            Ok(_) => {}
            // Another unbloat is changing shaping right now: show what is there.
            Err(unbloat_system::apply::ApplyError::Lock(_)) => {}
            Err(e) => eprintln!("unbloat: warning: {e}"),
        }
    }
    // The daemon's own view first, when one runs (text only: --json stays the list of
    // interfaces it always was).
    #[cfg(feature = "daemon")]
    if !args.json {
        if let Some(text) = crate::daemon::status_text(&state) {
            print!("{text}");
        }
    }
    let ifaces = match &args.iface {
        Some(i) => {
            let name = parse_iface(i).map_err(invalid)?;
            shaper.check_interface(&name)?;
            vec![name]
        }
        None => state.list()?,
    };
    if ifaces.is_empty() {
        eprintln!("unbloat: no interface is shaped by unbloat; name one to see what is there (unbloat status eth0)");
        return Ok(());
    }
    loop {
        let mut all = vec![];
        for iface in &ifaces {
            all.push(status_of(&shaper, &state, iface)?);
        }
        if args.json {
            #[cfg(feature = "networks")]
            let all = with_networks(&all, &crate::daemon::networks(&state))?;
            println!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            if args.watch.is_some() {
                print!("\x1b[H\x1b[2J");
            }
            for s in &all {
                print!("{}", render_text(s));
            }
        }
        match args.watch {
            Some(every) => std::thread::sleep(every),
            None => return Ok(()),
        }
    }
}

/// Each interface's status with, when the daemon follows its network, a `network` member: the
/// network's name (null: unknown), the shaping it gets, the gateway and its MAC, and why.
#[cfg(feature = "networks")]
fn with_networks(
    all: &[Status],
    seen: &std::collections::BTreeMap<String, unbloat_daemon::seen::Seen>,
) -> Result<Vec<serde_json::Value>, Failure> {
    let mut out = vec![];
    for s in all {
        let mut v = serde_json::to_value(s)?;
        let iface = Some(s.device.clone());
        if let (Some(network), Some(obj)) = (iface.and_then(|i| seen.get(&i)), v.as_object_mut()) {
            obj.insert("network".into(), serde_json::to_value(network)?);
        }
        out.push(v);
    }
    Ok(out)
}

fn status_of(shaper: &Shaper, state: &StateDir, iface: &IfName) -> Result<Status, Failure> {
    let record = state.load(iface)?;
    let plan = record.as_ref().map(|r| &r.plan);
    let ifb = plan.and_then(|p| p.ingress.as_ref()).map(|i| i.ifb.clone());
    let texts = shaper.read_live(iface, ifb.as_ref())?;
    let live = live_state(iface.as_str(), &texts)?;
    let mut status = Status::from_live(&live, plan);
    if let Some(counted) = plan.and_then(|p| shaper.classify_counters(p)) {
        match counted {
            Ok(rules) => status.classify = Some(rules),
            Err(e) => eprintln!("unbloat: warning: {iface}: {e}"),
        }
    }
    status.fairness = record.and_then(|r| r.fairness);
    Ok(status)
}

/// `unbloat config check`.
pub fn config_check(args: &CheckArgs) -> Result<(), Failure> {
    let path: &Path = args.file.as_deref().unwrap_or(Path::new(DEFAULT_CONFIG));
    let config = ConfigFile::load(path).map_err(invalid)?;
    let specs = config.specs(&ShapeOptions::default()).map_err(invalid)?;
    let specs = specs
        .into_iter()
        .map(checked)
        .collect::<Result<Vec<_>, _>>()?;
    for spec in &specs {
        if args.plans {
            print!("{}", Plan::build(spec).render_shell());
        }
    }
    let n = specs.len();
    eprintln!(
        "{}: valid ({n} interface{})",
        path.display(),
        if n == 1 { "" } else { "s" }
    );
    Ok(())
}
