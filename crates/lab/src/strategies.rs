//! The strategies the lab compares, in one place: each one is the exact list of `tc`/`ip` commands
//! it would run on the router's WAN device (egress) and for its ingress, given a link profile.
//!
//! - `none`: nothing; the modem's deep FIFO is the bottleneck queue.
//! - `wondershaper`: the 2002 HTB script of seed 000 with its own semantics: HTB classes with
//!   `burst 6k`, `sfq perturb 10` leaves, IPv4-only u32 filters (TOS minimum-delay, ICMP and small
//!   ACKs to the interactive class 1:10), and an IPv4-only ingress policer, no IFB.
//! - `sqm-simple`: sqm-scripts' simple.qos with fq_codel, as /work/shared/PEERS.md describes it.
//!   Its three tiers are chosen by iptables marks that sqm-scripts sets from DSCP; the lab's router
//!   has no iptables rules, so every unmarked packet takes the fw filters' miss and lands in the
//!   default class 1:12 (ICMP in 1:13), which is exactly what simple.qos does with unmarked
//!   traffic. Its `squash_ingress` DSCP wash is an iptables rule too and is likewise absent.
//! - `sqm-piece-of-cake`: sqm-scripts' piece_of_cake.qos (cake, `besteffort` last so it wins).
//! - `unbloat`: what `unbloat start` applies with its recommended settings for the link type, built
//!   by the shaper crate (see [`UnbloatPlanner`]).
//!
//! The strategies that run a program in the router instead (`sqm-scripts:RECIPE`, the real
//! sqm-scripts, and `script:PATH`, the user's own) have no command list here: [`crate::script`]
//! runs them, with the same rates and overhead in their environment.
//!
//! Rates: every shaping strategy shapes at 95 % of the link's rate (seed 001: 95 % of a measured
//! speed), in whole kbit/s because that is what the peers' scripts are configured in.
//!
//! Overhead: the sqm recipes get the link's overhead as an OpenWrt user following the SQM guide
//! would set it: `linklayer atm` on ATM links, otherwise `linklayer ethernet`, with the profile's
//! overhead and `mpu 0` (sqm-scripts' default). sqm-scripts has no PTM keyword; its users leave
//! the 64/65 encoding (1.5 %) to the 95 % margin, and so does the lab. wondershaper has no
//! overhead compensation at all (it predates HTB's linklayer code).
//!
//! The commands name devices as seen inside the router (`wan0`, `ifb4wan0`); the topology runs them
//! there with `-n NAMESPACE` (see [`in_netns`]).

use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::{parse_iface, Spec};
use unbloat_system::runner::Cmd;
use unbloat_units::Rate;

use crate::profile::LinkProfile;
pub use crate::strategy::{parse_list, SqmRecipe, Strategy};

/// The share of the link rate every shaping strategy shapes at, in percent.
pub const SHAPE_PERCENT: u64 = 95;

/// The router's devices, as named inside its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterDevs {
    /// The WAN device, towards the modem.
    pub wan: String,
    /// The IFB device that carries the WAN's ingress through a qdisc (sqm's `ifb4<dev>` name).
    pub ifb: String,
}

impl RouterDevs {
    pub fn new(wan: &str) -> RouterDevs {
        RouterDevs {
            wan: wan.to_string(),
            ifb: format!("ifb4{wan}"),
        }
    }
}

/// Builds the `unbloat` strategy's commands. The lab does not copy unbloat's choices: it asks the
/// shaper crate, so the strategy is literally what `unbloat start` would apply.
pub trait UnbloatPlanner {
    /// The commands `unbloat start WAN --down DOWN --up UP --link PRESET` would run (IFB creation,
    /// ingress redirect, qdiscs), in order.
    fn commands(
        &self,
        devs: &RouterDevs,
        profile: &LinkProfile,
        down: Rate,
        up: Rate,
    ) -> Result<Vec<Cmd>, String>;
}

/// The real planner: `unbloat start WAN --down DOWN --up UP --link PRESET [--vlan 1]
/// [--overhead N] [--mpu N]` with every other option at unbloat's default, through the shaper
/// crate's `ShapeOptions` -> `Spec::new` -> `Plan::build` -> `Plan::script`: the `ip` steps, one
/// `tc -batch -` with the plan's batch text, then the `ip` steps that follow it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShaperPlanner;

impl UnbloatPlanner for ShaperPlanner {
    fn commands(
        &self,
        devs: &RouterDevs,
        profile: &LinkProfile,
        down: Rate,
        up: Rate,
    ) -> Result<Vec<Cmd>, String> {
        let opts = profile.unbloat_options(down, up);
        let wan = parse_iface(&devs.wan).map_err(|e| e.to_string())?;
        let spec = Spec::new(wan, &opts).map_err(|e| e.to_string())?;
        Ok(unbloat_testbed::commands::script_commands(
            &Plan::build(&spec).script(),
        ))
    }
}

/// Why a strategy could not be built for a profile.
#[derive(Debug, thiserror::Error)]
#[error("cannot build strategy {strategy} for link profile {profile}: {message}")]
pub struct StrategyError {
    pub strategy: Strategy,
    pub profile: String,
    pub message: String,
}

/// The shaper rates a strategy uses on `profile`: 95 % of the link, whole kbit/s.
pub fn shaper_rates(profile: &LinkProfile) -> (Rate, Rate) {
    let kbit = |r: Rate| Rate::from_kbit(r.bits_per_sec() * SHAPE_PERCENT / 100 / 1000);
    (kbit(profile.down), kbit(profile.up))
}

/// The commands that set `strategy` up on the router, in order. A strategy that runs a program
/// (`sqm-scripts:RECIPE`, `script:PATH`) has none: it is an error to ask, and
/// [`crate::script::set_up`] runs it instead.
pub fn commands(
    strategy: &Strategy,
    profile: &LinkProfile,
    devs: &RouterDevs,
    unbloat: &dyn UnbloatPlanner,
) -> Result<Vec<Cmd>, StrategyError> {
    let (down, up) = shaper_rates(profile);
    let (down_k, up_k) = (down.bits_per_sec() / 1000, up.bits_per_sec() / 1000);
    Ok(match strategy {
        Strategy::None => Vec::new(),
        Strategy::Wondershaper => wondershaper(&devs.wan, down_k, up_k),
        Strategy::SqmSimple => sqm(
            devs,
            &sqm_stab_words(profile),
            |dev, stab| simple_qos_egress(dev, stab, up_k),
            |ifb, stab| simple_qos_ingress(ifb, stab, down_k),
        ),
        Strategy::SqmPieceOfCake => {
            let oh = cake_overhead_words(profile);
            sqm(
                devs,
                &oh,
                |dev, oh| {
                    let mut w = words(&format!(
                        "qdisc add dev {dev} root cake bandwidth {up_k}kbit"
                    ));
                    w.extend(oh.iter().cloned());
                    w.extend(words("diffserv3 nat besteffort"));
                    vec![Cmd::tc(w)]
                },
                |ifb, oh| {
                    let mut w = words(&format!(
                        "qdisc add dev {ifb} root cake bandwidth {down_k}kbit"
                    ));
                    w.extend(oh.iter().cloned());
                    w.extend(words("diffserv3 nat besteffort wash"));
                    vec![Cmd::tc(w)]
                },
            )
        }
        Strategy::Unbloat => unbloat
            .commands(devs, profile, down, up)
            .map_err(|message| StrategyError {
                strategy: strategy.clone(),
                profile: profile.name.clone(),
                message,
            })?,
        Strategy::SqmScripts(_)
        | Strategy::Script(_)
        | Strategy::UnbloatTuned
        | Strategy::UnbloatAutorate
        | Strategy::CakeAutorate
        | Strategy::UnbloatFixed(_) => {
            return Err(StrategyError {
                strategy: strategy.clone(),
                profile: profile.name.clone(),
                message: "it runs a program in the router, not commands the lab writes".into(),
            })
        }
    })
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(String::from).collect()
}

fn tc(text: &str) -> Cmd {
    Cmd::tc(words(text))
}

/// seed 000, verbatim in meaning: rates in kbit/s, `$[9*$UPLINK/10]` is integer arithmetic.
fn wondershaper(dev: &str, down_k: u64, up_k: u64) -> Vec<Cmd> {
    vec![
        tc(&format!("qdisc add dev {dev} root handle 1: htb default 20")),
        tc(&format!("class add dev {dev} parent 1: classid 1:1 htb rate {up_k}kbit burst 6k")),
        tc(&format!("class add dev {dev} parent 1:1 classid 1:10 htb rate {up_k}kbit burst 6k prio 1")),
        tc(&format!("class add dev {dev} parent 1:1 classid 1:20 htb rate {}kbit burst 6k prio 2", 9 * up_k / 10)),
        tc(&format!("class add dev {dev} parent 1:1 classid 1:30 htb rate {}kbit burst 6k prio 2", 8 * up_k / 10)),
        tc(&format!("qdisc add dev {dev} parent 1:10 handle 10: sfq perturb 10")),
        tc(&format!("qdisc add dev {dev} parent 1:20 handle 20: sfq perturb 10")),
        tc(&format!("qdisc add dev {dev} parent 1:30 handle 30: sfq perturb 10")),
        tc(&format!("filter add dev {dev} parent 1:0 protocol ip prio 10 u32 match ip tos 0x10 0xff flowid 1:10")),
        tc(&format!("filter add dev {dev} parent 1:0 protocol ip prio 10 u32 match ip protocol 1 0xff flowid 1:10")),
        tc(&format!(
            "filter add dev {dev} parent 1: protocol ip prio 10 u32 match ip protocol 6 0xff \
             match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10"
        )),
        tc(&format!("filter add dev {dev} parent 1: protocol ip prio 18 u32 match ip dst 0.0.0.0/0 flowid 1:20")),
        tc(&format!("qdisc add dev {dev} handle ffff: ingress")),
        tc(&format!(
            "filter add dev {dev} parent ffff: protocol ip prio 50 u32 match ip src 0.0.0.0/0 \
             police rate {down_k}kbit burst 10k drop flowid :1"
        )),
    ]
}

/// sqm-scripts' frame around every recipe: the IFB before, the redirect of all ingress after.
fn sqm(
    devs: &RouterDevs,
    link_words: &[String],
    egress: impl Fn(&str, &[String]) -> Vec<Cmd>,
    ingress: impl Fn(&str, &[String]) -> Vec<Cmd>,
) -> Vec<Cmd> {
    let (dev, ifb) = (devs.wan.as_str(), devs.ifb.as_str());
    let mut cmds = vec![Cmd::ip(words(&format!("link add name {ifb} type ifb")))];
    cmds.extend(egress(dev, link_words));
    cmds.push(tc(&format!("qdisc add dev {dev} handle ffff: ingress")));
    cmds.extend(ingress(ifb, link_words));
    cmds.push(Cmd::ip(words(&format!("link set dev {ifb} up"))));
    cmds.push(tc(&format!(
        "filter add dev {dev} parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 \
         action mirred egress redirect dev {ifb}"
    )));
    cmds
}

/// piece_of_cake's overhead words: `[atm] overhead OH mpu 0`.
fn cake_overhead_words(profile: &LinkProfile) -> Vec<String> {
    let link = profile.link_layer();
    let mut w = Vec::new();
    if link.framing == Framing::Atm {
        w.push("atm".to_string());
    }
    w.extend(words(&format!("overhead {} mpu 0", link.overhead)));
    w
}

/// simple.qos's stab: `stab mtu 2047 tsize 512 mpu 0 overhead OH linklayer atm|ethernet`.
fn sqm_stab_words(profile: &LinkProfile) -> Vec<String> {
    let link = profile.link_layer();
    let ll = if link.framing == Framing::Atm {
        "atm"
    } else {
        "ethernet"
    };
    words(&format!(
        "stab mtu 2047 tsize 512 mpu 0 overhead {} linklayer {ll}",
        link.overhead
    ))
}

/// simple.qos's HTB burst and quantum: one millisecond at the rate, at least 1749 bytes
/// (sqm-scripts `get_htb_quantum`/`get_burst`, per PEERS.md).
pub fn sqm_quantum(rate_kbit: u64) -> u64 {
    (rate_kbit * 1000 / 8000).max(1749)
}

/// simple.qos's fq_codel target and interval in microseconds: target grows at low rates so that
/// one MTU fits, `max(5000, 13_992_000 / kbit)`; interval is 95 ms + target.
pub fn sqm_target_interval_us(rate_kbit: u64) -> (u64, u64) {
    let target = (13_992_000 / rate_kbit.max(1)).max(5000);
    (target, 95_000 + target)
}

fn simple_qos_egress(dev: &str, stab: &[String], up_k: u64) -> Vec<Cmd> {
    let q = sqm_quantum(up_k);
    let (target, interval) = sqm_target_interval_us(up_k);
    let mut root = words(&format!("qdisc add dev {dev} root handle 1:"));
    root.extend(stab.iter().cloned());
    root.extend(words("htb default 12"));
    let class = |id: &str, rate: String, ceil: u64, prio: u32| {
        tc(&format!(
            "class add dev {dev} parent 1:1 classid 1:{id} htb quantum {q} rate {rate} ceil {ceil}kbit burst {q} cburst {q} prio {prio}"
        ))
    };
    let leaf = |id: &str| {
        tc(&format!(
            "qdisc add dev {dev} parent 1:{id} handle {id}0: fq_codel limit 1001 target {target}us interval {interval}us ecn quantum 300 flows 1024"
        ))
    };
    let fw = |prio: u32, mark: u32, class: &str| {
        tc(&format!(
            "filter add dev {dev} parent 1:0 protocol all prio {prio} handle {mark}/0xff fw classid 1:{class}"
        ))
    };
    vec![
        Cmd::tc(root),
        tc(&format!(
            "class add dev {dev} parent 1: classid 1:1 htb quantum {q} rate {up_k}kbit ceil {up_k}kbit burst {q} cburst {q}"
        )),
        class("11", "128kbit".into(), up_k / 3, 1),
        class("12", format!("{}kbit", up_k / 6), up_k.saturating_sub(16), 2),
        class("13", format!("{}kbit", up_k / 6), up_k.saturating_sub(16), 3),
        leaf("11"),
        leaf("12"),
        leaf("13"),
        // Marks 1/2/3 come from sqm-scripts' iptables rules (DSCP -> tier); the lab has none, so
        // these never match and traffic falls through to the u32 rules below.
        fw(1, 1, "11"),
        fw(2, 2, "12"),
        fw(3, 3, "13"),
        tc(&format!("filter add dev {dev} parent 1:0 protocol arp prio 4 u32 match u32 0 0 flowid 1:11")),
        tc(&format!("filter add dev {dev} parent 1:0 protocol ip prio 5 u32 match ip protocol 1 0xff flowid 1:13")),
        tc(&format!("filter add dev {dev} parent 1:0 protocol ipv6 prio 6 u32 match ip6 protocol 58 0xff flowid 1:13")),
        tc(&format!("filter add dev {dev} parent 1:0 protocol all prio 999 u32 match ip protocol 0 0x00 flowid 1:12")),
    ]
}

fn simple_qos_ingress(ifb: &str, stab: &[String], down_k: u64) -> Vec<Cmd> {
    let q = sqm_quantum(down_k);
    let (target, interval) = sqm_target_interval_us(down_k);
    let mut root = words(&format!("qdisc add dev {ifb} root handle 1:"));
    root.extend(stab.iter().cloned());
    root.extend(words("htb default 10"));
    vec![
        Cmd::tc(root),
        tc(&format!(
            "class add dev {ifb} parent 1: classid 1:1 htb quantum {q} rate {down_k}kbit ceil {down_k}kbit burst {q} cburst {q}"
        )),
        tc(&format!(
            "class add dev {ifb} parent 1:1 classid 1:10 htb quantum {q} rate {down_k}kbit ceil {down_k}kbit burst {q} cburst {q} prio 0"
        )),
        tc(&format!(
            "qdisc add dev {ifb} parent 1:10 handle 110: fq_codel limit 1001 target {target}us interval {interval}us ecn flows 1024"
        )),
    ]
}

/// What removes any strategy from the router: both root qdiscs and the IFB. Some of these fail
/// when the strategy did not create that piece (`none` creates nothing); callers ignore failures
/// and check the result with `tc qdisc show` instead.
pub fn teardown_commands(devs: &RouterDevs) -> Vec<Cmd> {
    vec![
        tc(&format!("qdisc del dev {} root", devs.wan)),
        tc(&format!("qdisc del dev {} ingress", devs.wan)),
        Cmd::ip(words(&format!("link del {}", devs.ifb))),
    ]
}

/// The same command run inside network namespace `ns`: `tc -n NS ...` / `ip -n NS ...`; any other
/// program through `ip netns exec NS ...`.
pub fn in_netns(cmd: &Cmd, ns: &str) -> Cmd {
    match cmd.program.as_str() {
        "tc" | "ip" => {
            let mut out = Cmd::new(cmd.program.clone())
                .args(["-n", ns])
                .args(cmd.args.iter().cloned());
            out.stdin = cmd.stdin.clone();
            out.timeout = cmd.timeout;
            out
        }
        _ => {
            let mut out = Cmd::ip(["netns", "exec", ns])
                .arg(cmd.program.clone())
                .args(cmd.args.iter().cloned());
            out.stdin = cmd.stdin.clone();
            out.timeout = cmd.timeout;
            out
        }
    }
}

#[cfg(test)]
#[path = "strategies_tests.rs"]
mod tests;
