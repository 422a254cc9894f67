//! The shaping flags of `unbloat plan` and `unbloat start`, and their translation into the same
//! [`ShapeOptions`] a config file's `[interface.NAME]` table produces: two ways to say it, one
//! meaning. Every value is parsed by its own type here, so a bad value is reported by clap with
//! the flag's name (`invalid value '78mbitz' for '--down <RATE>': invalid rate ...`).
//!
//! Units are never guessed (the units crate's rule, issue 19): a rate needs its unit (`--down
//! 20000` is refused with "write 20000kbit (SQM's unit) or 20mbit"), `mbps` and its kin are
//! refused as bits-or-bytes, and a qdisc time needs its unit (`--rtt 100`: "write 100ms"). `0`
//! still turns a direction off.

use clap::Args;
use unbloat_shaper::linklayer::{Framing, LinkPreset};
use unbloat_shaper::options::{parse_rtt, Isolation, Qdisc, ShapeOptions};
use unbloat_shaper::plan::{AckFilter, Diffserv};
use unbloat_units::{Rate, Size, Time};

/// The config file `start --config` and the daemon read when none is named.
pub const DEFAULT_CONFIG: &str = "/etc/unbloat/unbloat.toml";

#[derive(Debug, Clone, Default, Args)]
#[command(
    next_help_heading = "Rates (in bits, with a unit: 78mbit, 19950kbit, 20M, 20Mbit/s; no unit \
                         or mbps is refused, not guessed; 0 turns a direction off)"
)]
pub struct ShapeFlags {
    /// Download shaper rate (ingress, through an IFB). Set it to ~95 % of a measured speed test,
    /// or ~85 % of the advertised rate. SQM's 20000 (kbit/s) is 20000kbit or 20mbit here.
    #[arg(long, value_name = "RATE")]
    pub down: Option<Rate>,
    /// Upload shaper rate (egress, on the interface itself).
    #[arg(long, value_name = "RATE")]
    pub up: Option<Rate>,
    /// Confirm rates that could cut you off from a remote box: below 64kbit, or one direction
    /// over 1000 times the other (config key i-mean-it = true).
    #[arg(long)]
    pub i_mean_it: bool,

    /// Queueing: cake (default), or fq_codel (HTB + fq_codel, where cake is missing).
    #[arg(long, value_name = "QDISC", help_heading = "Queueing")]
    pub qdisc: Option<Qdisc>,
    /// fq_codel only: 1 class, or 3 classes by DSCP (priority, best effort, bulk) like simple.qos.
    #[arg(long, value_name = "1|3", help_heading = "Queueing")]
    pub tiers: Option<u8>,
    /// cake's DSCP tins: besteffort (default: one tin), diffserv3, diffserv4, diffserv8, precedence.
    #[arg(long, value_name = "MODE", help_heading = "Queueing")]
    pub diffserv: Option<Diffserv>,
    /// Flow isolation: dual-host (fair per LAN host: dual-srchost up, dual-dsthost down; the
    /// default on a machine that forwards), triple-isolate (the default on one that does not),
    /// hosts, flows, srchost, dsthost, dual-srchost, dual-dsthost, flowblind.
    #[arg(long, value_name = "MODE", help_heading = "Queueing")]
    pub isolation: Option<Isolation>,
    /// Look up NAT to find the real LAN hosts. The default: on when this machine masquerades or
    /// source-NATs out of the interface (nftables or iptables), off otherwise.
    #[arg(long, help_heading = "Queueing", conflicts_with = "no_nat")]
    pub nat: bool,
    /// Never look up NAT, even where this machine masquerades.
    #[arg(long, help_heading = "Queueing")]
    pub no_nat: bool,
    /// Put traffic in tins, both ways: a preset (gaming, video-calls) or a rule, TIN (voice,
    /// video, besteffort, bulk) then what it matches: udp|tcp, port P[-Q][,...] and addr
    /// PREFIX[,...] (the far end's), lan-host PREFIX[,...]. Repeat it; the first rule that matches
    /// a connection wins; where none does, a LAN host's own mark (EF, CS1, ...) is kept and its
    /// tin restored on the download. `auto` adds automatic classes for the rest: past 500
    /// packets/s one way for 5 s to bulk, at most 500 bytes a packet on average to video (`auto
    /// bulk-pps N bulk-after Ns small-bytes N`). Needs nftables and tc's ctinfo action; sets
    /// --diffserv diffserv4 (or --tiers 3) unless chosen.
    #[arg(long, value_name = "RULE", help_heading = "Queueing")]
    pub classify: Vec<String>,
    /// Clear DSCP marks of incoming traffic (the ISP's marks mean nothing on your LAN).
    #[arg(long, help_heading = "Queueing")]
    pub wash: bool,
    /// Drop redundant TCP ACKs on egress (more upload on very asymmetric links, burstier
    /// downloads); `--ack-filter=aggressive`.
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "enabled", help_heading = "Queueing")]
    pub ack_filter: Option<String>,
    /// cake's rtt: a time with its unit (100ms) or internet, regional, metro, lan, oceanic,
    /// satellite...
    #[arg(long, value_name = "TIME", value_parser = parse_rtt, help_heading = "Queueing")]
    pub rtt: Option<Time>,
    /// Do not set cake's `ingress` mode on the download side (on by default from 4 Mbit/s).
    #[arg(long, help_heading = "Queueing")]
    pub no_ingress_keyword: bool,

    /// Link layer: ethernet, ether-vlan, docsis, vdsl2, bridged-ptm, pppoe-ptm, the ADSL presets
    /// (pppoa-vcmux, pppoa-llc, pppoe-vcmux, pppoe-llcsnap, bridged-vcmux, bridged-llcsnap,
    /// ipoa-vcmux, ipoa-llcsnap), conservative, raw. See `unbloat plan --help`.
    #[arg(long, value_name = "PRESET", help_heading = "Link layer")]
    pub link: Option<LinkPreset>,
    /// Per-packet overhead in bytes on top of the IP packet (-64..256); overrides the preset.
    #[arg(
        long,
        value_name = "BYTES",
        allow_hyphen_values = true,
        help_heading = "Link layer"
    )]
    pub overhead: Option<i64>,
    /// Minimum packet unit in bytes (0..256); overrides the preset.
    #[arg(long, value_name = "BYTES", help_heading = "Link layer")]
    pub mpu: Option<i64>,
    /// Cell framing: atm (ADSL), ptm (VDSL2), none.
    #[arg(long, value_name = "FRAMING", help_heading = "Link layer")]
    pub framing: Option<Framing>,
    /// Extra 802.1Q VLAN tags (4 bytes each) on top of the preset.
    #[arg(long, value_name = "N", help_heading = "Link layer")]
    pub vlan: Option<u32>,

    /// fq_codel target delay, with its unit (default max(5ms, 1.5 packet times at the rate)).
    #[arg(long, value_name = "TIME", help_heading = "fq_codel")]
    pub target: Option<Time>,
    /// fq_codel interval, with its unit (default 100ms + target - 5ms).
    #[arg(long, value_name = "TIME", help_heading = "fq_codel")]
    pub interval: Option<Time>,
    /// fq_codel quantum in bytes (300 at low rates).
    #[arg(long, value_name = "BYTES", help_heading = "fq_codel")]
    pub quantum: Option<u32>,
    /// fq_codel queue limit in packets.
    #[arg(long, value_name = "PACKETS", help_heading = "fq_codel")]
    pub limit: Option<u32>,
    /// fq_codel memory limit.
    #[arg(long, value_name = "SIZE", help_heading = "fq_codel")]
    pub memory_limit: Option<Size>,
    /// ECN on the upload side: on or off (default off at low rates).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, help_heading = "fq_codel")]
    pub ecn_egress: Option<bool>,
    /// ECN on the download side: on or off (default on).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, help_heading = "fq_codel")]
    pub ecn_ingress: Option<bool>,

    /// More options for the upload qdisc in its own words ("nat dual-srchost ack-filter");
    /// each word is validated like a flag.
    #[arg(long, value_name = "WORDS", help_heading = "Advanced")]
    pub egress_options: Option<String>,
    /// More options for the download qdisc in its own words ("nat dual-dsthost ingress").
    #[arg(long, value_name = "WORDS", help_heading = "Advanced")]
    pub ingress_options: Option<String>,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("{s:?}: use on or off")),
    }
}

fn parse_ack_filter(s: &str) -> Result<AckFilter, String> {
    match s {
        "enabled" | "on" | "true" | "yes" => Ok(AckFilter::Enabled),
        "aggressive" => Ok(AckFilter::Aggressive),
        "disabled" | "off" | "false" | "no" => Ok(AckFilter::Disabled),
        _ => Err(format!("invalid value {s:?} for --ack-filter: use --ack-filter, --ack-filter=aggressive or --ack-filter=off")),
    }
}

impl ShapeFlags {
    /// The options these flags say; unset flags are `None`, so they do not override a file.
    pub fn to_options(&self) -> Result<ShapeOptions, String> {
        let on = |b: bool| if b { Some(true) } else { None };
        Ok(ShapeOptions {
            down: self.down,
            up: self.up,
            qdisc: self.qdisc,
            tiers: self.tiers,
            link: self.link,
            overhead: self.overhead,
            mpu: self.mpu,
            framing: self.framing,
            vlan: self.vlan,
            isolation: self.isolation,
            nat: if self.no_nat {
                Some(false)
            } else {
                on(self.nat)
            },
            diffserv: self.diffserv,
            wash: on(self.wash),
            ack_filter: self
                .ack_filter
                .as_deref()
                .map(parse_ack_filter)
                .transpose()?,
            rtt: self.rtt,
            ingress_keyword: if self.no_ingress_keyword {
                Some(false)
            } else {
                None
            },
            target: self.target,
            interval: self.interval,
            quantum: self.quantum,
            limit: self.limit,
            memory_limit: self.memory_limit,
            ecn_egress: self.ecn_egress,
            ecn_ingress: self.ecn_ingress,
            extra_egress: self.egress_options.clone(),
            extra_ingress: self.ingress_options.clone(),
            i_mean_it: on(self.i_mean_it),
            classify: (!self.classify.is_empty()).then(|| self.classify.clone()),
            ..ShapeOptions::default()
        })
    }

    /// Whether any shaping flag was given (they make no sense with a whole config file).
    pub fn any(&self) -> bool {
        self.to_options()
            .map(|o| o != ShapeOptions::default())
            .unwrap_or(true)
    }
}
