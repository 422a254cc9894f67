//! The argument vectors [`unbloat_shaper::invocation`] builds for the daemon's web page and the
//! test bench, read by this binary's own clap definition: what it reads back is what was built.
//! A flag renamed here, or a value format the parser no longer takes, fails these tests instead
//! of a lab run or a page's run.

use crate::{Cli, Command};
use clap::Parser;
use std::time::Duration;
use unbloat_shaper::invocation::{FarEnd, Invocation, SetRate, Start, Status, Stop, Test};
use unbloat_shaper::linklayer::{Framing, LinkPreset};
use unbloat_shaper::model::{AckFilter, Diffserv};
use unbloat_shaper::options::{Cli as Form, Isolation, Qdisc, ShapeOptions, OPTIONS};
use unbloat_units::{Rate, Size, Time};

fn parse(i: impl Into<Invocation>) -> Command {
    let argv = i.into().argv().expect("an argument vector");
    match Cli::try_parse_from(std::iter::once("unbloat".to_string()).chain(argv.clone())) {
        Ok(cli) => cli.command,
        Err(e) => panic!("unbloat {}: {e}", argv.join(" ")),
    }
}

fn wan0() -> unbloat_units::IfName {
    "wan0".parse().unwrap()
}

/// Every option a flag can say, at its declared example (a value unlike the default): an option
/// added to the declarations is in it by itself.
fn examples() -> ShapeOptions {
    let mut o = ShapeOptions::default();
    for opt in OPTIONS.iter().filter(|o| o.cli != Form::None) {
        opt.field
            .set(&mut o, opt.example)
            .unwrap_or_else(|e| panic!("{}: the example {:?}: {e}", opt.key, opt.example));
    }
    o
}

/// Every option a flag can say again, at values of other forms than the examples' (a negative
/// number, `--no-nat`, two rules).
fn every_option() -> ShapeOptions {
    ShapeOptions {
        down: Some(Rate::from_mbit(78)),
        up: Some(Rate::from_kbit(19_950)),
        qdisc: Some(Qdisc::FqCodel),
        tiers: Some(3),
        link: Some(LinkPreset::Vdsl2),
        overhead: Some(-4),
        mpu: Some(64),
        framing: Some(Framing::Atm),
        vlan: Some(2),
        isolation: Some(Isolation::DualHost),
        nat: Some(false),
        diffserv: Some(Diffserv::Diffserv4),
        wash: Some(true),
        ack_filter: Some(AckFilter::Aggressive),
        rtt: Some(Time::from_millis(50)),
        ingress_keyword: Some(false),
        fwmark: Some(0xff),
        target: Some(Time::from_micros(14_570)),
        interval: Some(Time::from_millis(150)),
        quantum: Some(300),
        limit: Some(2000),
        memory_limit: Some(Size::from_bytes(4 << 20)),
        ecn_egress: Some(true),
        ecn_ingress: Some(false),
        extra_egress: Some("mpu 64 ack-filter".into()),
        extra_ingress: Some("nat dual-dsthost ingress".into()),
        i_mean_it: Some(true),
        classify: Some(vec!["gaming".into(), "bulk lan-host 10.0.0.5".into()]),
        ..ShapeOptions::default()
    }
}

fn start_options(options: ShapeOptions) -> ShapeOptions {
    let start = Start {
        iface: Some(wan0()),
        options,
        config: Some("/etc/unbloat/lab.toml".into()),
        dry_run: true,
        json: true,
    };
    match parse(start) {
        Command::Start(a) => {
            assert_eq!(a.plan.iface.as_deref(), Some("wan0"));
            assert_eq!(a.plan.config, Some("/etc/unbloat/lab.toml".into()));
            assert!(a.plan.json && a.dry_run);
            a.plan.flags.to_options()
        }
        _ => panic!("not start"),
    }
}

#[test]
fn start_reads_back_the_options_it_was_built_with() {
    let examples = examples();
    assert_eq!(start_options(examples.clone()), examples);
    let every = every_option();
    assert_eq!(start_options(every.clone()), every);
    assert_eq!(
        start_options(ShapeOptions::default()),
        ShapeOptions::default()
    );
    // The other forms of the flags with two ways to be said.
    let other = ShapeOptions {
        nat: Some(true),
        ack_filter: Some(AckFilter::Enabled),
        ..ShapeOptions::default()
    };
    assert_eq!(start_options(other.clone()), other);
    let off = ShapeOptions {
        ack_filter: Some(AckFilter::Disabled),
        ..ShapeOptions::default()
    };
    assert_eq!(start_options(off.clone()), off);
}

#[test]
fn set_rate_stop_and_status_read_back() {
    let set_rate = SetRate {
        iface: wan0(),
        down: Some(Rate::from_mbit(70)),
        up: Some(Rate::from_kbit(18_500)),
        i_mean_it: true,
        json: true,
    };
    match parse(set_rate) {
        Command::SetRate(a) => {
            assert_eq!(a.iface, "wan0");
            assert_eq!(a.down, Some(Rate::from_mbit(70)));
            assert_eq!(a.up, Some(Rate::from_kbit(18_500)));
            assert!(a.i_mean_it && a.json);
        }
        _ => panic!("not set-rate"),
    }
    match parse(Stop {
        iface: None,
        json: true,
    }) {
        Command::Stop(a) => assert!(a.all && a.iface.is_none() && a.json),
        _ => panic!("not stop"),
    }
    match parse(Status {
        iface: Some(wan0()),
        json: false,
    }) {
        Command::Status(a) => assert!(a.iface.as_deref() == Some("wan0") && !a.json),
        _ => panic!("not status"),
    }
}

#[test]
fn test_reads_back_its_far_end_and_durations() {
    let test = Test {
        far_end: FarEnd {
            server: Some("https://far.example/nq.json".into()),
            load: Some("iperf3://10.77.4.2".into()),
            probe: Some("irtt://10.77.4.2".into()),
            ca_file: Some("/tmp/lab/ca.pem".into()),
        },
        max_connections: Some(4),
        profile: Some("rrul_be".into()),
        duration: Some(Time::from_secs(120)),
        streams: Some(8),
        idle: Some(Time::from_millis(3500)),
        probe_rate: Some(12.5),
        no_locate: true,
        out: Some("/tmp/lab/out".into()),
        json: true,
    };
    let Command::Test(a) = parse(test) else {
        panic!("not test")
    };
    let t = &a.test;
    assert_eq!(t.server.as_deref(), Some("https://far.example/nq.json"));
    assert_eq!(t.load.as_deref(), Some("iperf3://10.77.4.2"));
    assert_eq!(t.probe.as_deref(), Some("irtt://10.77.4.2"));
    assert_eq!(t.ca_file, Some("/tmp/lab/ca.pem".into()));
    assert_eq!(t.max_connections, Some(4));
    assert_eq!(t.profile, "rrul_be");
    assert_eq!(t.duration, Duration::from_secs(120));
    assert_eq!(t.streams, Some(8));
    assert_eq!(t.idle, Duration::from_millis(3500));
    assert_eq!(t.probe_rate, 12.5);
    assert!(t.no_locate);
    assert_eq!(a.out, Some("/tmp/lab/out".into()));
    assert!(a.json);
    // What the builder leaves out is the command's default.
    let Command::Test(d) = parse(Test::default()) else {
        panic!("not test")
    };
    assert_eq!(
        (d.test.profile.as_str(), d.test.duration, d.test.idle),
        ("rrul", Duration::from_secs(30), Duration::from_secs(5))
    );
}

/// A value that looks like a flag reaches the command as the value it is.
#[test]
fn values_that_look_like_flags_read_back_as_values() {
    let test = Test {
        far_end: FarEnd {
            server: Some("-x".into()),
            ..FarEnd::default()
        },
        profile: Some("--apply".into()),
        ..Test::default()
    };
    let Command::Test(a) = parse(test) else {
        panic!("not test")
    };
    assert_eq!(a.test.server.as_deref(), Some("-x"));
    assert_eq!(a.test.profile, "--apply");
}

#[cfg(feature = "tune")]
#[test]
fn tune_reads_back_its_budget_and_bound() {
    use unbloat_shaper::invocation::Tune;
    use unbloat_tune::run::MaxTime;
    let tune = Tune {
        iface: wan0(),
        far_end: FarEnd {
            server: Some("10.77.4.2:4420".into()),
            ca_file: Some("/tmp/ca.pem".into()),
            ..FarEnd::default()
        },
        max_time: Some(Time::from_secs(150)),
        bound: Some(Time::from_millis(15)),
        no_sweep: true,
        apply: true,
        out: Some("/tmp/tune".into()),
        json: true,
    };
    let Command::Tune(a) = parse(tune.clone()) else {
        panic!("not tune")
    };
    assert_eq!(a.iface, "wan0");
    assert_eq!(a.server.as_deref(), Some("10.77.4.2:4420"));
    assert_eq!(a.ca_file, Some("/tmp/ca.pem".into()));
    assert_eq!(a.max_time, MaxTime::At(Duration::from_secs(150)));
    assert_eq!(a.bound, Time::from_millis(15));
    assert!(a.no_sweep && a.apply && a.json);
    assert_eq!(a.out, Some("/tmp/tune".into()));
    let auto = Tune {
        max_time: None,
        bound: None,
        ..tune
    };
    let Command::Tune(a) = parse(auto) else {
        panic!("not tune")
    };
    assert_eq!(
        (a.max_time, a.bound),
        (MaxTime::Auto, Time::from_millis(10))
    );
}
