//! Shaping that follows the network (issue 56), in a real kernel: a laptop's `wlan0` (a veth)
//! whose gateway is its peer in a second namespace. Moving to another network is what a laptop
//! sees: the link's neighbours forgotten, another gateway address with another MAC (the peer's
//! MAC set to that network's), the default route replaced, and the first packet resolving the
//! gateway by ARP. The daemon reads the gateway and its MAC over rtnetlink and re-shapes.
//!
//! - Home, the office (two MACs, two rates) and back: each one's rates, read back from the
//!   kernel; the time from the route change to the rates in the kernel is printed.
//! - An unknown gateway gets `unknown_network`: the interface's own table, or no shaping.
//! - A VPN's routes on top (a tun device with a default route of a lower metric, and OpenVPN's
//!   0/1 + 128/1) change nothing; the next move is followed through them.
//! - `unbloat status`, `--json` and the web page's status name the network and the gateway's MAC.
//! - Bad network entries: `config check` and a reload refuse them with the line and the table,
//!   and the kernel keeps what it had.
//! - `unbloat tune --save-as`: the gateway's MAC read from the kernel into a `[network.NAME]`
//!   the daemon then recognises; each refusal changes nothing (the run's result handed over by
//!   the test knob `UNBLOAT_TUNE_RESULT`).
#![cfg(feature = "networks")]

mod common;

use common::daemon::Daemon;
use common::{must, wait_until, Netns};
use std::time::{Duration, Instant};
use unbloat_testbed::real_kernel_test;

const HOME: &str = "02:00:00:00:00:0a";
const OFFICE: &str = "02:00:00:00:00:0b";
const CAFE: &str = "02:00:00:00:00:0c";
/// The daemon's web page, in the laptop's namespace.
const WEB: &str = "127.0.0.1:19943";

fn config(unknown: &str) -> String {
    format!(
        "[interface.wlan0]\ndown = \"20mbit\"\nup = \"5mbit\"\nunknown_network = \"{unknown}\"\n\n\
         [network.home]\ngateway = \"{HOME}\"\ndown = \"30mbit\"\nup = \"6mbit\"\n\n\
         [network.office]\ngateway = [\"{OFFICE}\", \"02:00:00:00:00:1b\"]\ninterface = \"wlan0\"\ndown = \"40mbit\"\nup = \"7mbit\"\n"
    )
}

/// The second namespace, the networks' side: removed on drop.
struct Net(String);

impl Drop for Net {
    fn drop(&mut self) {
        let _ = common::sh(&format!("ip netns del {}", self.0));
    }
}

/// The laptop's namespace with `wlan0` up, its peer `gw0` up in the networks' namespace, and
/// where its config goes (the run directory made).
fn laptop() -> (Netns, Net, std::path::PathBuf) {
    let ns = Netns::new();
    let net = Net(format!("{}-net", ns.name));
    must(&format!("ip netns add {}", net.0));
    ns.must("ip link add wlan0 type veth peer name gw0");
    ns.must(&format!("ip link set gw0 netns {}", net.0));
    must(&format!("ip -n {} link set gw0 up", net.0));
    ns.must("ip link set wlan0 up");
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    let path = ns.run_dir.join("unbloat.toml");
    (ns, net, path)
}

/// The laptop moves to the network whose gateway is `.1` of 192.168.`n`.0/24 with `mac`.
fn move_to(ns: &Netns, net: &Net, n: u8, mac: &str) {
    let net = &net.0;
    must(&format!("ip -n {net} link set gw0 address {mac}"));
    must(&format!(
        "ip -n {net} addr replace 192.168.{n}.1/24 dev gw0"
    ));
    ns.must("ip neigh flush dev wlan0");
    ns.must(&format!("ip addr replace 192.168.{n}.2/24 dev wlan0"));
    ns.must(&format!(
        "ip route replace default via 192.168.{n}.1 dev wlan0"
    ));
    // The first packet resolves the gateway, as any traffic of the laptop's would.
    ns.must(&format!("ping -c 1 -W 2 192.168.{n}.1"));
}

/// `wlan0`'s egress and ingress rates: `Some(("6Mbit", "30Mbit"))`.
fn rates(ns: &Netns) -> Option<(String, String)> {
    common::rates(ns, "wlan0")
}

fn shaped_at(ns: &Netns, up: &str, down: &str, limit: Duration) -> Option<Duration> {
    common::shaped_at(ns, "wlan0", (up, down), limit)
}

real_kernel_test! {
    fn the_daemon_shapes_each_network_with_its_rates_and_unknown_ones_with_the_fallback() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let (ns, net, path) = laptop();
        let path_s = path.to_str().unwrap().to_string();
        std::fs::write(&path, config("interface")).unwrap();
        move_to(&ns, &net, 1, HOME);

        let _daemon = Daemon::start(&ns, &[&path_s, "--web", WEB], &[]);
        assert!(shaped_at(&ns, "6Mbit", "30Mbit", Duration::from_secs(20)).is_some(),
            "home's rates at start: {:?}", rates(&ns));

        // Home -> office -> an unknown café -> home: each one's shaping, timed from the move.
        let mut times = vec![];
        for (n, mac, up, down) in [(2, OFFICE, "7Mbit", "40Mbit"), (3, CAFE, "5Mbit", "20Mbit"), (1, HOME, "6Mbit", "30Mbit")] {
            let t0 = Instant::now();
            move_to(&ns, &net, n, mac);
            let got = shaped_at(&ns, up, down, Duration::from_secs(10));
            assert!(got.is_some(), "gateway {mac}: wanted {up} up, {down} down, the kernel has {:?}", rates(&ns));
            times.push((mac, t0.elapsed()));
        }
        eprintln!("from the move (neighbours flushed, route replaced, one ping) to the new rates in the kernel: {times:?}");

        // Status names the network and why.
        let status = common::text(&ns.unbloat(&["status"]));
        assert!(status.contains(&format!("wlan0: on network home (gateway 192.168.1.1 is {HOME}, [network.home]'s)")), "{status}");
        let json: serde_json::Value = serde_json::from_slice(&ns.unbloat(&["status", "--json"]).stdout).expect("status --json");
        let wlan0 = json.as_array().and_then(|a| a.iter().find(|s| s["device"] == "wlan0")).expect("wlan0 in status --json");
        assert_eq!(wlan0["network"]["network"], "home", "{wlan0}");
        assert_eq!(wlan0["network"]["mac"], HOME, "{wlan0}");
        // The web page's status, which its cards show: the same network, and why.
        let page = common::in_ns(&ns.name, || {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(WEB).expect("the web page");
            write!(s, "GET /api/status HTTP/1.0\r\nHost: {WEB}\r\n\r\n").unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text
        });
        let body = page.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        let page: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {page}"));
        let seen = &page["daemon"]["networks"]["wlan0"];
        assert_eq!((&seen["network"], &seen["mac"]), (&serde_json::json!("home"), &serde_json::json!(HOME)), "{page}");

        // A VPN on top: a tun device with a default route of a lower metric and 0/1 + 128/1.
        ns.must("ip tuntap add dev tun0 mode tun");
        ns.must("ip addr add 10.8.0.2/24 dev tun0");
        ns.must("ip link set tun0 up");
        ns.must("ip route add default dev tun0 metric 10");
        ns.must("ip route add 0.0.0.0/1 dev tun0");
        ns.must("ip route add 128.0.0.0/1 dev tun0");
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(rates(&ns), Some(("6Mbit".into(), "30Mbit".into())), "the VPN changed the shaping");
        let status = common::text(&ns.unbloat(&["status"]));
        assert!(status.contains("wlan0: on network home"), "{status}");
        // Under it, the laptop still moves, and the daemon follows.
        move_to(&ns, &net, 2, OFFICE);
        assert!(shaped_at(&ns, "7Mbit", "40Mbit", Duration::from_secs(10)).is_some(),
            "the office's rates under a VPN: {:?}", rates(&ns));

        // Bad entries: refused with the line and the table; the kernel keeps what it had.
        let before = ns.snapshot();
        for (bad, says) in [
            (config("interface").replace(OFFICE, "02:00:00:00:0b"), ":12:12: [network.office]: key `gateway`: \"02:00:00:00:0b\" is not a MAC address"),
            (config("interface").replace("interface = \"wlan0\"", "interface = \"wwan0\""), ":13:13: [network.office]: interface wwan0: the file has no [interface.wwan0] table"),
            (config("interface").replace(HOME, OFFICE), ":12:12: [network.office]: gateway 02:00:00:00:00:0b is [network.home]'s too, on wlan0"),
            (config("interface").replace(&format!("\"{HOME}\""), "\"\""), ":7:11: [network.home]: key `gateway`: empty"),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let out = ns.unbloat(&["config", "check", &path_s]);
            let text = common::text(&out);
            assert_eq!(out.status.code(), Some(2), "{text}");
            assert!(text.contains(&format!("{path_s}{says}")), "{text}");
            let out = ns.unbloat(&["reload"]);
            let text = common::text(&out);
            assert_eq!(out.status.code(), Some(2), "{text}");
            assert!(text.contains("running setup stays") && text.contains(says), "{text}");
            assert_eq!(ns.snapshot(), before, "a refused network entry changed the kernel");
        }

        // unknown_network = "none": an unknown network is left unshaped, a known one shaped again.
        std::fs::write(&path, config("none")).unwrap();
        let out = ns.unbloat(&["reload"]);
        assert!(out.status.success(), "{}", common::text(&out));
        move_to(&ns, &net, 3, CAFE);
        let bare = wait_until(Duration::from_secs(10), || !ns.tc("qdisc show dev wlan0 root").contains("cake"));
        assert!(bare.is_some(), "an unknown network with unknown_network = \"none\": {}", ns.tc("qdisc show dev wlan0"));
        let status = common::text(&ns.unbloat(&["status"]));
        assert!(status.contains("wlan0: not shaped: an unknown network"), "{status}");
        move_to(&ns, &net, 1, HOME);
        assert!(shaped_at(&ns, "6Mbit", "30Mbit", Duration::from_secs(10)).is_some(),
            "home again after an unshaped network: {:?}", rates(&ns));
    }
}

/// A finished tune run's result (`tune.json`), handed to `unbloat tune` through the test knob
/// `UNBLOAT_TUNE_RESULT` in place of minutes of load: what follows the run is what is tested.
#[cfg(feature = "tune")]
fn tune_json(down: &str, up: &str) -> String {
    let cap = serde_json::json!({"goodput": "50mbit", "line": "55mbit"});
    serde_json::json!({
        "idle_rtt_ms": 1.0, "capacity_down": cap, "capacity_up": cap, "framing": null,
        "link": {}, "bound_down_ms": 10.0, "bound_up_ms": 10.0, "steps_down": [], "steps_up": [],
        "down": down, "up": up,
        "options": {"down": down, "up": up, "framing": "ptm", "overhead": 30, "mpu": 0},
        "seconds": 1.0, "ending": "the shaping from before the run was put back",
    })
    .to_string()
}

real_kernel_test! {
    /// `unbloat tune --save-as`: refused, naming why and changing nothing, without a gateway,
    /// with one the kernel has not resolved, with a bad name, a gateway another network has, a
    /// link at the file; then saved as [network.home] with the MAC read from the kernel, and
    /// the daemon shapes home with the saved rates.
    #[cfg(feature = "tune")]
    fn tune_save_as_records_the_gateway_the_kernel_shows() needs ["cake", "ingress", "ifb", "mirred", "u32"] {
        let (ns, net, path) = laptop();
        let path_s = path.to_str().unwrap().to_string();
        let file = format!(
            "# the laptop's\n[interface.wlan0]\ndown = \"20mbit\" # a café\nup = \"5mbit\"\n\n\
             [network.office]\ngateway = \"{OFFICE}\"\ndown = \"40mbit\"\n"
        );
        std::fs::write(&path, &file).unwrap();
        let result = ns.run_dir.join("tune.json");
        std::fs::write(&result, tune_json("33mbit", "8mbit")).unwrap();
        let out_dir = ns.run_dir.join("tune-out");
        let tune = |name: &str, config: &str| {
            let out = ns.unbloat_env(
                &["tune", "wlan0", "--server", "192.168.1.1", "--out", out_dir.to_str().unwrap(),
                  "--save-as", name, "--config", config],
                &[("UNBLOAT_TUNE_RESULT", result.to_str().unwrap())],
            );
            (out.status.code(), common::text(&out))
        };

        // No default route: no network to recognise.
        let (code, text) = tune("home", &path_s);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("--save-as home: wlan0 has no default route through a gateway"), "{text}");
        assert!(text.contains("nothing was measured or changed"), "{text}");
        // A route, but the gateway's MAC not resolved yet.
        must(&format!("ip -n {} link set gw0 address {HOME}", net.0));
        must(&format!("ip -n {} addr add 192.168.1.1/24 dev gw0", net.0));
        ns.must("ip addr add 192.168.1.2/24 dev wlan0");
        ns.must("ip route add default via 192.168.1.1 dev wlan0");
        let (code, text) = tune("home", &path_s);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("gateway 192.168.1.1 has no MAC in the neighbour table yet (`ping -c1 192.168.1.1`"), "{text}");
        ns.must("ping -c 1 -W 2 192.168.1.1");
        // A bad name; the gateway of another network; a link planted at the file.
        let (code, text) = tune("my home", &path_s);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("--save-as \"my home\": a network's name is 1 to 32 letters"), "{text}");
        must(&format!("ip -n {} link set gw0 address {OFFICE}", net.0));
        ns.must("ip neigh flush dev wlan0");
        ns.must("ping -c 1 -W 2 192.168.1.1");
        let (code, text) = tune("home", &path_s);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains(&format!("the gateway {OFFICE} is [network.office]'s already; re-tune it with --save-as office")), "{text}");
        let link = ns.run_dir.join("link.toml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let (code, text) = tune("home", link.to_str().unwrap());
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("is a symbolic link"), "{text}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), file, "a refusal changed the file");

        // Behind home's gateway: saved, the rest of the file as it was.
        must(&format!("ip -n {} link set gw0 address {HOME}", net.0));
        ns.must("ip neigh flush dev wlan0");
        ns.must("ping -c 1 -W 2 192.168.1.1");
        let (code, text) = tune("home", &path_s);
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains(&format!("saved [network.home] in {path_s}: wlan0 behind {HOME}")), "{text}");
        let saved = std::fs::read_to_string(&path).unwrap();
        assert!(saved.starts_with(&file), "{saved}");
        assert!(saved.ends_with(&format!(
            "[network.home]\ngateway = \"{HOME}\"\ninterface = \"wlan0\"\ndown = \"33000kbit\"\nup = \"8000kbit\"\noverhead = 30\nmpu = 0\nframing = \"ptm\"\n"
        )), "{saved}");
        assert!(out_dir.join("unbloat.toml").exists(), "the run's own files are written too");
        let out = ns.unbloat(&["config", "check", &path_s]);
        assert!(out.status.success(), "{}", common::text(&out));
        // Saved again: re-tuned in place, the file the same.
        let (code, text) = tune("home", &path_s);
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains("re-tuned [network.home]"), "{text}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), saved);

        // The daemon recognises home by the saved gateway and shapes with the saved rates.
        let _daemon = Daemon::start(&ns, &[&path_s], &[]);
        assert!(shaped_at(&ns, "8Mbit", "33Mbit", Duration::from_secs(20)).is_some(),
            "the saved rates: {:?}", rates(&ns));
    }
}
