//! The lab network for real: built in a kernel with every qdisc (the host's, or User-Mode Linux),
//! carrying traffic at the emulated link's rate, accepting every strategy's commands, and leaving
//! nothing behind after success, after a failure mid-build, and after SIGINT.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use unbloat_lab::cleanup::list_netns;
use unbloat_lab::profile::LinkProfile;
use unbloat_lab::strategies::{self, Strategy, UnbloatPlanner};
use unbloat_lab::topology::{LiveTopology, Node, Topology, TopologyError};
use unbloat_system::runner::{Cmd, CmdOutput, RunError, Runner, SystemRunner};
use unbloat_units::Rate;

fn leftovers(prefix: &str) -> Vec<String> {
    list_netns(&SystemRunner::plain())
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie still answers kill(0); /proc/PID/stat's state tells them apart.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// iperf3's received goodput in bit/s for one 4-second test (the first second omitted: slow start).
fn iperf3(live: &LiveTopology, reverse: bool) -> f64 {
    let server = live.topo.server_addr().to_string();
    let mut cmd = Cmd::new("iperf3").args(["-c", &server, "-t", "4", "-O", "1", "-J"]);
    if reverse {
        cmd = cmd.arg("-R");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = live.run_in(Node::Lan, &cmd).expect("run iperf3");
        // iperf3 3.12 with -J exits 0 even when it could not connect: the JSON's "error" says so.
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
            panic!("iperf3 printed no JSON ({e}): {}{}", out.stdout, out.stderr)
        });
        match v["error"].as_str() {
            None if out.success() => {
                return v["end"]["sum_received"]["bits_per_second"]
                    .as_f64()
                    .unwrap_or_else(|| {
                        panic!("no end.sum_received.bits_per_second in: {}", out.stdout)
                    });
            }
            // The server may not listen yet.
            Some(err) if err.contains("refused") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            _ => panic!("iperf3 failed: {}{}", out.stdout, out.stderr),
        }
    }
}

unbloat_testbed::real_kernel_test! {
    /// ADSL with PPPoE/LLC over ATM: the modem must deliver the ATM-framed goodput each way, not
    /// the Ethernet one (which is 12 % higher: that is what the stab is for).
    fn builds_carries_the_link_rate_and_leaves_nothing_after_success() needs ["htb", "netem", "pfifo"] {
        let profile = LinkProfile::shipped("adsl").expect("adsl");
        let runner = SystemRunner::from_env();
        let mut live = LiveTopology::build(Topology::new(&profile), &runner).expect("build");
        let prefix = live.topo.prefix.clone();
        assert_eq!(leftovers(&prefix).len(), 5, "{:?}", leftovers(&prefix));
        let server = live.topo.server_addr().to_string();
        let pid = live
            .spawn(Node::Server, &["iperf3".into(), "-s".into(), "-B".into(), server], Stdio::null(), Stdio::null())
            .expect("spawn iperf3 -s");
        for (reverse, line) in [(false, profile.up), (true, profile.down)] {
            let got = iperf3(&live, reverse);
            let theory = profile.theoretical_goodput(line).bits_per_sec() as f64;
            let share = got / theory;
            eprintln!("{} {}: {:.0} bit/s = {:.1} % of theoretical {:.0}", profile.name, if reverse { "down" } else { "up" }, got, share * 100.0, theory);
            assert!((0.85..=1.03).contains(&share), "goodput {got} is {:.1} % of the theoretical {theory}", share * 100.0);
        }
        assert!(live.is_running(pid));
        live.teardown().expect("teardown");
        assert!(leftovers(&prefix).is_empty(), "{:?}", leftovers(&prefix));
        assert!(!alive(pid), "iperf3 -s (pid {pid}) survived the teardown");
    }

    /// Every strategy's commands are accepted by a real kernel on every link framing, one after
    /// the other on the same router, with the teardown between them removing the last one.
    fn every_strategy_applies_and_tears_down_on_a_real_kernel() needs ["htb", "netem", "pfifo", "cake", "fq_codel", "sfq", "ingress", "ifb", "mirred", "u32"] {
        let runner = SystemRunner::from_env();
        for name in ["dsl-2002", "vdsl2", "docsis"] {
            let profile = LinkProfile::shipped(name).expect("profile");
            let live = LiveTopology::build(Topology::new(&profile), &runner).expect("build");
            let devs = live.topo.router_devs();
            for strategy in Strategy::ALL.into_iter().filter(|s| *s != Strategy::Unbloat) {
                let cmds = strategies::commands(&strategy, &profile, &devs, &NoPlanner).expect("commands");
                live.apply(Node::Router, &cmds).unwrap_or_else(|e| panic!("{strategy} on {name}: {e}"));
                for cmd in strategies::teardown_commands(&devs) {
                    live.run_in(Node::Router, &cmd).expect("teardown command");
                }
                let qdiscs = live.run_in(Node::Router, &Cmd::tc(["qdisc", "show", "dev", "wan0"])).expect("show");
                assert!(qdiscs.stdout.contains("noqueue"), "{strategy} left {}", qdiscs.stdout);
            }
            live.teardown().expect("teardown");
        }
    }

    /// A build that fails half-way (the modem's qdisc is refused) removes the namespaces it made.
    fn a_failure_mid_build_leaves_nothing() needs ["htb", "netem", "pfifo"] {
        let runner = FailOn { inner: SystemRunner::from_env(), needle: "cpe0 root handle 1:" };
        let topo = Topology::new(&LinkProfile::shipped("vdsl2").expect("vdsl2"));
        let prefix = topo.prefix.clone();
        let err = LiveTopology::build(topo, &runner).err().expect("the injected failure");
        assert!(matches!(err, TopologyError::Failed { .. }), "{err}");
        assert!(err.to_string().contains("injected"), "{err}");
        assert!(leftovers(&prefix).is_empty(), "{:?}", leftovers(&prefix));
    }

    /// SIGINT to a process in the middle of a lab run: its handler removes the namespaces and the
    /// processes it started, and it exits 130.
    fn sigint_to_a_lab_process_leaves_nothing() needs ["htb", "netem", "pfifo"] {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new(exe)
            .args(["signal_fixture_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(FIXTURE_ENV, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the fixture");
        let stdout = child.stdout.take().expect("stdout");
        let mut ready = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read fixture output");
            // libtest prints "test NAME ... " before the test's own output, on the same line.
            if let Some((_, rest)) = line.split_once("READY ") {
                ready = Some(rest.trim().to_string());
                break;
            }
        }
        let ready = ready.expect("the fixture never got ready");
        let (prefix, pid) = ready.split_once(' ').expect("READY PREFIX PID");
        let pid: u32 = pid.parse().expect("pid");
        assert_eq!(leftovers(prefix).len(), 5);
        assert!(alive(pid));
        // SAFETY: signals the fixture process we just started.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "the fixture did not exit after SIGINT");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(130), "{status:?}");
        assert!(leftovers(prefix).is_empty(), "{:?}", leftovers(prefix));
        assert!(!alive(pid), "the process in the lab (pid {pid}) survived SIGINT");
    }
}

const FIXTURE_ENV: &str = "UNBLOAT_LAB_SIGNAL_FIXTURE";

/// Not a test of its own: the process `sigint_to_a_lab_process_leaves_nothing` starts and
/// interrupts. It builds a lab, starts a process in it, says so, and waits to be interrupted. Run
/// without the variable it returns at once.
#[test]
fn signal_fixture_child() {
    if std::env::var_os(FIXTURE_ENV).is_none() {
        return;
    }
    let runner = SystemRunner::from_env();
    let mut live = LiveTopology::build(
        Topology::new(&LinkProfile::shipped("fiber").expect("fiber")),
        &runner,
    )
    .expect("build");
    let pid = live
        .spawn(
            Node::Lan,
            &["sleep".into(), "300".into()],
            Stdio::null(),
            Stdio::null(),
        )
        .expect("spawn");
    println!("READY {} {pid}", live.topo.prefix);
    std::thread::sleep(Duration::from_secs(60));
    panic!("SIGINT never came");
}

/// Runs everything for real except commands containing `needle`, which fail.
struct FailOn {
    inner: SystemRunner,
    needle: &'static str,
}

impl Runner for FailOn {
    fn run(&self, cmd: &Cmd) -> Result<CmdOutput, RunError> {
        if cmd.display().contains(self.needle) {
            return Ok(CmdOutput::failed(2, "injected failure"));
        }
        self.inner.run(cmd)
    }
}

/// The `unbloat` strategy is not applied here: it comes from the shaper and is tested with it.
struct NoPlanner;

impl UnbloatPlanner for NoPlanner {
    fn commands(
        &self,
        _: &strategies::RouterDevs,
        _: &LinkProfile,
        _: Rate,
        _: Rate,
    ) -> Result<Vec<Cmd>, String> {
        Err("not used".into())
    }
}
