//! Automatic classes (issue 40): qosify's two heuristics, for the connections no rule and no
//! client mark placed, in the same nftables table.
//!
//! - **Bulk**: a connection whose packets one way run past `bulk_pps` for about `bulk_after`
//!   seconds is moved to the bulk tin, for the rest of its life. A token bucket per connection and
//!   direction does the counting (an nft set keyed by `ct id`, each element with `limit rate over
//!   N/second burst N*T packets`): a flow at twice the rate is moved after T seconds, one at the
//!   rate or under never, and a short burst (a web page's objects) drains the bucket only
//!   partly. qosify moves a flow back once it stays under the rate for its timeout; a connection
//!   here stays bulk, so a long-lived connection that was bulk once (a video stream between
//!   segments) stays below best effort: the price of needing no daemon.
//! - **Small packets**: a connection of at least [`MIN_PACKETS`] packets both ways that averages
//!   at most `small_bytes` a packet (`ct avgpkt`: a game, a voice call, an SSH session) goes to
//!   the video tin (qosify's `dscp_prio`), until the bulk bucket moves it to bulk.
//!
//! Both are stored in the connection mark as a rule's tin is, with [`super::MARK_AUTO`] beside
//! it so the chains keep watching the connection. `ct packets` and `ct avgpkt` need conntrack's
//! accounting: the kernel turns it on for the network namespace when a rule uses them
//! (`nft_ct_get_init`), for connections made after that.
//!
//! Off unless asked for (`--classify auto`): on the lab's household (docs/benchmarks.md) it is
//! measured against best effort like the presets.

use super::{Tin, MARK_AUTO, MARK_DSCP_MASK, MARK_KEEP, MARK_SET};
use serde::{Deserialize, Serialize};

/// A connection is judged by its packets' average size only after this many (the handshake and
/// a request are small whatever follows).
pub const MIN_PACKETS: u32 = 20;

/// The word that turns automatic classes on, alone or with its settings.
pub const WORD: &str = "auto";

/// The thresholds. qosify's defaults but for the rate: its 100 packets/s put a 1.5 Mbit/s video
/// call (150 a second each way) in bulk, and on the lab's 20/5 household the call's upload then
/// lost 60 % (docs/benchmarks.md); 500 a second spares a call up to about 5 Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auto {
    /// Packets a second one way past which a connection is bulk (qosify's `bulk_trigger_pps`).
    pub bulk_pps: u32,
    /// Seconds at twice that rate before it is moved.
    pub bulk_after_s: u32,
    /// Average bytes a packet at most for the video tin (qosify's `prio_max_avg_pkt_len`).
    pub small_bytes: u32,
}

impl Default for Auto {
    fn default() -> Auto {
        Auto {
            bulk_pps: 500,
            bulk_after_s: 5,
            small_bytes: 500,
        }
    }
}

/// `auto [bulk-pps N] [bulk-after Ns] [small-bytes N]`, already known to start with `auto`.
pub fn parse(line: &str) -> Result<Auto, String> {
    let mut a = Auto::default();
    let mut words = line.split_whitespace().skip(1);
    let mut seen = vec![];
    while let Some(w) = words.next() {
        if seen.contains(&w) {
            return Err(format!("{w:?} twice"));
        }
        seen.push(w);
        let (n, unit, range) = match w {
            "bulk-pps" => (&mut a.bulk_pps, "", 1..=1_000_000),
            "bulk-after" => (&mut a.bulk_after_s, "s", 1..=3600),
            "small-bytes" => (&mut a.small_bytes, "", 40..=1500),
            _ => {
                return Err(format!(
                    "unknown word {:?}; automatic classes take bulk-pps N, bulk-after Ns, small-bytes N",
                    crate::clip::clip(w)
                ))
            }
        };
        let v = words
            .next()
            .ok_or_else(|| format!("{w:?} needs a number after it"))?;
        let digits = v
            .strip_suffix(unit)
            .filter(|_| !unit.is_empty())
            .unwrap_or(v);
        *n = digits
            .parse()
            .ok()
            .filter(|x| range.contains(x))
            .ok_or_else(|| {
                format!(
                    "{w} {:?} is not a whole number {}..{}{unit}",
                    crate::clip::clip(v),
                    range.start(),
                    range.end()
                )
            })?;
    }
    Ok(a)
}

impl Auto {
    /// The words `plan` shows and `status` counts by: one per class.
    pub fn bulk_comment(&self) -> String {
        format!(
            "auto: bulk, past {} packets/s one way for {} s",
            self.bulk_pps, self.bulk_after_s
        )
    }

    pub fn small_comment(&self) -> String {
        format!(
            "auto: video, at most {} bytes a packet on average",
            self.small_bytes
        )
    }

    /// Both classes' words, in the order of their chains' lines.
    pub fn comments(&self) -> [String; 2] {
        [self.bulk_comment(), self.small_comment()]
    }

    /// The sets, the download's hook chain and the two watching chains, inside the table; the
    /// upload's jump is [`Auto::upload_jump`], in the postrouting chain.
    pub fn nft_text(&self, wan: &str) -> String {
        let mut s = String::new();
        for dir in ["up", "down"] {
            s.push_str(&format!(
                "\tset auto_{dir} {{\n\t\ttypeof ct id\n\t\tsize 65535\n\t\tflags dynamic,timeout\n\t\ttimeout 60s\n\t}}\n"
            ));
        }
        // After the ingress qdisc (and ctinfo's restore), so it counts what the IFB let through.
        s.push_str("\tchain prerouting {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n");
        s.push_str(&format!("\t\tiifname != \"{wan}\" return\n"));
        s.push_str(&format!("\t\t{}", self.jump("down")));
        s.push_str("\t}\n");
        for dir in ["up", "down"] {
            s.push_str(&format!("\tchain auto_{dir} {{\n"));
            for line in self.lines(dir) {
                s.push_str(&format!("\t\t{line}\n"));
            }
            s.push_str("\t}\n");
        }
        s
    }

    /// The postrouting chain's jump, after the rules and the client's marks.
    pub fn upload_jump(&self) -> String {
        self.jump("up")
    }

    /// Connections no rule or client mark set (SET clear) and those this set (AUTO too).
    fn jump(&self, dir: &str) -> String {
        format!(
            "ct mark & {:#010x} != {MARK_SET:#010x} jump auto_{dir}\n",
            MARK_SET | MARK_AUTO
        )
    }

    fn lines(&self, dir: &str) -> [String; 3] {
        let mark = |t: Tin| t.mark() | MARK_AUTO;
        let set = |t: Tin| {
            format!(
                "ct mark set ct mark & {MARK_KEEP:#010x} | {:#010x}",
                mark(t)
            )
        };
        [
            // Bulk already: nothing more to watch.
            format!(
                "ct mark & {:#010x} == {:#010x} return",
                MARK_DSCP_MASK | MARK_SET | MARK_AUTO,
                mark(Tin::Bulk)
            ),
            format!(
                "update @auto_{dir} {{ ct id limit rate over {}/second burst {} packets }} counter {} comment \"{}\"",
                self.bulk_pps,
                self.bulk_pps.saturating_mul(self.bulk_after_s),
                set(Tin::Bulk),
                self.bulk_comment()
            ),
            format!(
                "ct mark & {MARK_SET:#010x} == 0 ct packets >= {MIN_PACKETS} ct avgpkt <= {} counter {} comment \"{}\"",
                self.small_bytes,
                set(Tin::Video),
                self.small_comment()
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_with_their_units_and_bad_ones_say_why() {
        assert_eq!(parse("auto").unwrap(), Auto::default());
        let a = parse("auto bulk-pps 300 bulk-after 2s small-bytes 200").unwrap();
        assert_eq!((a.bulk_pps, a.bulk_after_s, a.small_bytes), (300, 2, 200));
        assert_eq!(parse("auto bulk-after 3").unwrap().bulk_after_s, 3);
        for (line, says) in [
            ("auto bulk-pps 0", "not a whole number 1..1000000"),
            ("auto bulk-pps 1.5", "not a whole number"),
            ("auto small-bytes 9000", "40..1500"),
            ("auto bulk-after 2h", "1..3600s"),
            ("auto bulk-pps", "needs a number"),
            ("auto bulk-pps 5 bulk-pps 6", "twice"),
            ("auto pps 5", "unknown word \"pps\""),
            ("auto fast", "unknown word \"fast\""),
        ] {
            let e = parse(line).expect_err(line);
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn each_direction_has_its_bucket_and_moves_a_connection_once() {
        let text = Auto::default().nft_text("wan0");
        assert!(
            text.contains("\tset auto_up {\n\t\ttypeof ct id\n"),
            "{text}"
        );
        assert!(
            text.contains("type filter hook prerouting priority mangle;"),
            "{text}"
        );
        assert!(text.contains("iifname != \"wan0\" return\n\t\tct mark & 0x01800000 != 0x01000000 jump auto_down\n"), "{text}");
        // CS1 (8 << 26), SET and AUTO: the bucket is not asked again.
        assert!(
            text.contains("ct mark & 0xfd800000 == 0x21800000 return\n"),
            "{text}"
        );
        assert!(text.contains(
            "update @auto_down { ct id limit rate over 500/second burst 2500 packets } counter ct mark set ct mark & 0x007fffff | 0x21800000 comment \"auto: bulk, past 500 packets/s one way for 5 s\"\n"
        ), "{text}");
        // AF41 (34 << 26): only a connection nothing placed yet.
        assert!(text.contains(
            "ct mark & 0x01000000 == 0 ct packets >= 20 ct avgpkt <= 500 counter ct mark set ct mark & 0x007fffff | 0x89800000 comment \"auto: video, at most 500 bytes a packet on average\"\n"
        ), "{text}");
    }
}
