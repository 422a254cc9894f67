//! `unbloat autorate IFACE`: keeps cake's rates just under what a variable link carries, with
//! the controller of unbloat-autorate, until stopped.
//!
//! The interface is shaped by unbloat with cake at the base rates first (started here when it is
//! not shaped yet, with this machine's defaults: `unbloat start` before gives it a link layer and
//! other options). Each change of rate is `set-rate`'s transaction, cake's bandwidth over
//! rtnetlink: no process. cake's `ingress` mode is pinned from the base rate, since a mode that
//! flipped at 4 Mbit/s would make a change more than a rate. The achieved rates are the bytes the
//! IFB sent (download, after the shaper) and the WAN sent (upload), read over rtnetlink.
//!
//! SIGINT or SIGTERM (and the end of `--duration`) leave the shaping at the base rates, or
//! remove it with `--on-exit stop`: never at a stale low rate.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use unbloat_autorate::controller::Config;
use unbloat_autorate::direction::Bounds;
use unbloat_autorate::narrate::Narrator;
use unbloat_autorate::pinger::Probe;
use unbloat_autorate::run::Link;
use unbloat_autorate::shaped::{cake_both_ways, ShapedLink};
use unbloat_autorate::start::{self, Session};
use unbloat_shaper::autorate_config::pinned;
use unbloat_shaper::options::{Qdisc, ShapeOptions};
use unbloat_shaper::spec::{parse_iface, Spec};
use unbloat_system::apply::{Request, Shaper};
use unbloat_system::planned;
use unbloat_system::runner::SystemRunner;
use unbloat_system::state::StateDir;
use unbloat_system::stop;
use unbloat_units::{Rate, Time};

use crate::{invalid, Failure};

#[derive(Debug, Args)]
#[command(after_help = "Examples:
  unbloat autorate wwan0 --min 2mbit --base 10mbit --max 50mbit
  unbloat autorate eth0 --down-min 5mbit --down-base 40mbit --down-max 100mbit \\
      --up-min 1mbit --up-base 8mbit --up-max 20mbit --probe timestamp --log autorate.log
  unbloat plot autorate.log            (rates, achieved rates and delays over time)")]
pub struct AutorateArgs {
    /// The WAN interface (shaped by unbloat with cake, or started here at the base rates). The
    /// probes leave by it and only its answers are read, whatever the default route.
    pub iface: String,
    /// The lowest rate either direction is set to (tc units: 2mbit, 500kbit).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub min: Option<Rate>,
    /// The rate either direction starts at, returns to when idle or when no reflector answers,
    /// and is left at on exit.
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub base: Option<Rate>,
    /// The highest rate either direction is set to.
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub max: Option<Rate>,
    /// The download's minimum (over --min).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub down_min: Option<Rate>,
    /// The download's base (over --base).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub down_base: Option<Rate>,
    /// The download's maximum (over --max).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub down_max: Option<Rate>,
    /// The upload's minimum (over --min).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub up_min: Option<Rate>,
    /// The upload's base (over --base).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub up_base: Option<Rate>,
    /// The upload's maximum (over --max).
    #[arg(long, value_name = "RATE", help_heading = "Rates")]
    pub up_max: Option<Rate>,
    /// Hosts to measure the delay to (IP addresses, comma-separated), in order of preference;
    /// default: cake-autorate's public resolvers, 1.1.1.1, 1.0.0.1, 8.8.8.8, 8.8.4.4, 9.9.9.9,
    /// 9.9.9.10, 9.9.9.11, 94.140.14.15, 94.140.14.140, 94.140.14.141, 94.140.15.15,
    /// 94.140.15.16, 208.67.220.2, 208.67.220.123, 208.67.220.220, 208.67.222.2, 208.67.222.123,
    /// 185.228.168.9, 185.228.168.10. More than --pingers leaves spares for the ones that stop
    /// answering.
    #[arg(long, value_name = "A,B,..", default_value = unbloat_autorate::reflectors::DEFAULT_REFLECTORS, hide_default_value = true, value_delimiter = ',', value_parser = parse_reflectors, help_heading = "Probes")]
    pub reflectors: Vec<IpAddr>,
    /// How many reflectors are probed at once (each every 0.3 s; every 2 s when the link has
    /// been idle for 30 s).
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=32), help_heading = "Probes")]
    pub pingers: u16,
    /// auto: ICMP timestamps, a one-way delay each way, from the IPv4 reflectors that answer
    /// them (Linux hosts and most routers; many public resolvers do not), ICMP echo from the
    /// others (the round trip, blamed on the loaded direction); echo: echo only; timestamp:
    /// timestamps only.
    #[arg(
        long,
        value_name = "auto|echo|timestamp",
        default_value = "auto",
        help_heading = "Probes"
    )]
    pub probe: Probe,
    /// A sample this far over its reflector's baseline, plus a full packet's time at the
    /// current rate (25ms at 0.5mbit), counts as delayed; 3 of the last 6 is bloat
    /// (cake-autorate uses 30ms one way, compensated alike).
    #[arg(
        long,
        value_name = "TIME",
        default_value_t = unbloat_shaper::autorate_config::DEFAULT_THRESHOLD,
        help_heading = "Probes"
    )]
    pub threshold: Time,
    /// On exit (SIGINT, SIGTERM, the end of --duration): leave the shaping at the base rates
    /// (base) or remove it (stop).
    #[arg(long, value_name = "base|stop", default_value = "base", value_parser = ["base", "stop"])]
    pub on_exit: String,
    /// Stop after this long (a bare number is seconds); default: run until stopped.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub duration: Option<Time>,
    /// Write every decision as a JSON line (`unbloat plot FILE` draws it); FILE is emptied
    /// first, and refused if it is a symbolic link or not a regular file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Print the run's summary as JSON on exit.
    #[arg(long)]
    pub json: bool,
}

fn parse_reflectors(text: &str) -> Result<IpAddr, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address (reflectors are addresses, so no DNS lookup can stall the controller)"))
}

fn parse_duration(text: &str) -> Result<Time, String> {
    unbloat_units::duration::parse_test_duration(
        text,
        Time::from_secs(1)..=Time::from_secs(86_400 * 365),
    )
    .map_err(|e| e.to_string())
}

/// Each direction's bounds from `--min/--base/--max` and their per-direction forms.
fn bounds(a: &AutorateArgs) -> Result<(Bounds, Bounds), String> {
    let one = |name: &str, min: Option<Rate>, base: Option<Rate>, max: Option<Rate>| {
        let (Some(min), Some(base), Some(max)) = (min.or(a.min), base.or(a.base), max.or(a.max))
        else {
            return Err(format!(
                "the {name}load needs a minimum, a base and a maximum rate: --min, --base, --max (or --{name}-min, ...)"
            ));
        };
        Bounds::new(min, base, max).ok_or_else(|| {
            format!(
                "the {name}load's rates must be 0 < min <= base <= max, not {min}, {base}, {max}"
            )
        })
    };
    Ok((
        one("down", a.down_min, a.down_base, a.down_max)?,
        one("up", a.up_min, a.up_base, a.up_max)?,
    ))
}

pub fn autorate(args: &AutorateArgs) -> Result<(), Failure> {
    let iface = parse_iface(&args.iface).map_err(invalid)?;
    let (down, up) = bounds(args).map_err(|e| invalid(anyhow!(e)))?;
    if args.probe == Probe::Timestamp && args.reflectors.iter().any(IpAddr::is_ipv6) {
        return Err(invalid(anyhow!(
            "--probe timestamp needs IPv4 reflectors: ICMPv6 has no timestamp (--probe auto uses echo for IPv6 ones)"
        )));
    }
    let runner = SystemRunner::from_env();
    let state = StateDir::from_env();
    let record = state.load(&iface)?;
    // The options to shape with: the record's, or this machine's defaults; cake, with its
    // ingress mode pinned from the base rate.
    let mut opts: ShapeOptions = match &record {
        Some(r) => r.options.clone(),
        None => ShapeOptions::default(),
    };
    if opts.qdisc.unwrap_or_default() != Qdisc::Cake {
        return Err(invalid(anyhow!(
            "{iface} is shaped with HTB + fq_codel; autorate needs cake, whose rate changes in place over rtnetlink (`unbloat start {iface} --qdisc cake ...` first)"
        )));
    }
    opts = pinned(&ShapeOptions {
        down: Some(down.base),
        ..opts
    });
    // Every rate the run may set must plan: the bounds checked now, not at the first cut (the
    // crossed pairs too: one direction may sit at its minimum while the other is at its maximum).
    for (d, u) in [
        (down.min, up.min),
        (down.max, up.max),
        (down.base, up.base),
        (down.min, up.max),
        (down.max, up.min),
    ] {
        let o = ShapeOptions {
            down: Some(d),
            up: Some(u),
            ..opts.clone()
        };
        let spec = Spec::new(iface.clone(), &o).map_err(invalid)?;
        planned::checked(spec).map_err(invalid)?;
    }
    let shaper = Shaper::new(&runner, state.clone());
    // The interface's one controller, for the whole run (the daemon's `[autorate]` tables take
    // the same lock); refused before anything changes. A mistyped name leaves no lock file.
    shaper.check_interface(&iface)?;
    let _controller = start::claim(&state, &iface, "unbloat autorate")?;
    let cfg = Config::probing(
        down,
        up,
        args.reflectors.clone(),
        usize::from(args.pingers),
        args.probe,
        args.threshold,
    );
    // The probes leave by the interface whose rates they set, and only its answers are read.
    let mut session = Session::open(&iface, cfg, Narrator::default()).map_err(|e| anyhow!(e))?;
    let base_opts = ShapeOptions {
        down: Some(down.base),
        up: Some(up.base),
        ..opts.clone()
    };
    let fairness = match &record {
        Some(r) => {
            cake_both_ways(&iface, &r.plan).map_err(|e| invalid(anyhow!(e)))?;
            r.fairness.clone()
        }
        None => {
            let p = planned::with_fairness(&runner, iface.clone(), &base_opts).map_err(invalid)?;
            cake_both_ways(&iface, &p.plan).map_err(|e| invalid(anyhow!(e)))?;
            for warning in shaper.check_offload(&[p.request()])? {
                eprintln!("unbloat autorate: warning: {warning}");
            }
            shaper
                .start(&[p.request()])
                .with_context(|| format!("cannot shape {iface}"))?;
            eprintln!("unbloat autorate: {iface} shaped: {}", p.fairness);
            opts = p.opts;
            Some(p.fairness)
        }
    };
    // The base rates (and the pinned ingress mode) by an ordinary set-rate, which may need more
    // than a rate change once; every change after it is a rate alone.
    let base = Request::at_rates(&iface, &opts, fairness, down.base, up.base).map_err(invalid)?;
    shaper
        .set_rate(&base)
        .with_context(|| format!("cannot set {iface} to its base rates"))?;
    let mut link = ShapedLink::open(&shaper, &iface).map_err(|e| anyhow!(e))?;
    let mut log = match &args.log {
        Some(p) => Some(std::io::BufWriter::new(
            unbloat_autorate::log::create(p)
                .with_context(|| format!("cannot write the log {}", p.display()))?,
        )),
        None => None,
    };
    write_line(&mut log, &session.start_event())?;
    eprintln!(
        "unbloat autorate: {iface}: down {}..{} from {}, up {}..{} from {}; {} of {} reflectors probed ({}) every 0.3 s",
        down.min, down.max, down.base, up.min, up.max, up.base,
        session.config().active.min(args.reflectors.len()),
        args.reflectors.len(),
        match args.probe {
            Probe::Auto => "timestamps where answered, echo elsewhere",
            Probe::Echo => "echo",
            Probe::Timestamp => "timestamps",
        }
    );
    stop::catch();
    let until = args.duration.map(Time::as_duration);
    let result = session.run(&mut link, stop::flag(), until, log.as_mut(), &mut |line| {
        eprintln!("unbloat autorate: {line}")
    });
    // Whatever ended the run, the rates do not stay where the last tick left them.
    let left = match args.on_exit.as_str() {
        "stop" => shaper
            .stop(std::slice::from_ref(&iface))
            .map(|_| format!("{iface}'s shaping removed"))
            .map_err(|e| e.to_string()),
        _ => link.set_rates(down.base, up.base).map(|_| {
            format!(
                "{iface} left at its base rates, {} down and {} up",
                down.base, up.base
            )
        }),
    };
    let summary = result.map_err(|e| anyhow!("{e}"))?;
    let left = left.map_err(|e| anyhow!("the run ended, but {e}"))?;
    let why = match stop::caught() {
        None => "the time was up".to_string(),
        Some(s) => format!("signal {s}"),
    };
    write_line(
        &mut log,
        &serde_json::json!({"event": "stop", "why": why, "left": left, "summary": summary}),
    )?;
    if let Some(mut l) = log {
        l.flush()?;
    }
    // Replies that matched no probe: forged, or duplicated on the way; worth a word.
    let dropped = match summary.unmatched {
        0 => String::new(),
        n => format!(", {n} replies that answered no probe dropped"),
    };
    eprintln!(
        "unbloat autorate: stopped ({why}) after {:.0} s: {} rate changes, {} of {} probes answered{dropped}, {} reflectors replaced; {left}",
        summary.seconds, summary.rate_changes, summary.answers, summary.probes, summary.replaced
    );
    if args.json {
        println!(
            "{}",
            serde_json::json!({"iface": iface.to_string(), "summary": summary, "left": left})
        );
    }
    Ok(())
}

fn write_line(
    log: &mut Option<std::io::BufWriter<std::fs::File>>,
    v: &serde_json::Value,
) -> Result<(), Failure> {
    if let Some(l) = log.as_mut() {
        writeln!(l, "{v}")?;
    }
    Ok(())
}

/// `unbloat plot LOG`: when the file is an autorate log, its plot beside it (`LOG.svg`, or in
/// `--out DIR`); None when it is not one (a results file).
#[cfg(feature = "plot")]
pub fn plot_log(args: &unbloat_report::files::PlotArgs) -> Option<Result<(), Failure>> {
    let text = std::fs::read_to_string(&args.results).ok()?;
    let first: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
    if first.get("event")?.as_str()? != "start" || first.get("reflectors").is_none() {
        return None;
    }
    Some((|| {
        let ticks = unbloat_autorate::log::read_ticks(&text)
            .map_err(|e| invalid(anyhow!("{}: {e}", args.results.display())))?;
        let name = args
            .results
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        let dir = match &args.out {
            Some(d) => d.clone(),
            None => args.results.parent().map(PathBuf::from).unwrap_or_default(),
        };
        std::fs::create_dir_all(&dir).ok();
        let out = dir.join(format!("{name}.svg"));
        let iface = first.get("iface").and_then(|v| v.as_str()).unwrap_or("?");
        let svg =
            unbloat_autorate::log::plot(&format!("unbloat autorate on {iface}: {name}"), &ticks);
        std::fs::write(&out, svg).with_context(|| format!("cannot write {}", out.display()))?;
        println!("wrote {}", out.display());
        Ok(())
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help spells the default out (a list the man page can break), so it must keep up.
    #[test]
    fn the_help_lists_every_default_reflector() {
        let cmd = <AutorateArgs as Args>::augment_args(clap::Command::new("autorate"));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "reflectors")
            .expect("--reflectors");
        let help = arg.get_help().expect("its help").to_string();
        for r in unbloat_autorate::reflectors::DEFAULT_REFLECTORS.split(',') {
            assert!(
                help.contains(&format!(" {r},")) || help.contains(&format!(" {r}.")),
                "{r}: {help}"
            );
        }
    }
}
