//! One cake word at a time, as iproute2's `tc/q_cake.c` (`cake_parse_opt`) reads it.
//!
//! cake keeps the last of competing words, and its link-layer keywords *add* to the overhead said
//! before them (`overhead 44 pppoe-llcsnap` is 84; `ethernet` also sets mpu 84, `docsis` mpu 64):
//! the [`LinkState`] here follows q_cake.c line by line.

use super::dir::{refused, tc_refuses, DirWords, LinkState, Problem};
use super::model::NoteKind;
use super::tc_units::{bare, tc_rate, tc_time};
use crate::linklayer::Framing;
use crate::model::Direction;
use crate::options::Qdisc;
use crate::qdisc::cake::words::{self, Word};
use unbloat_units::Size;

/// One cake word (q_cake.c `cake_parse_opt`): how many words it used, or why it is left out.
pub fn cake_word(
    d: &mut DirWords,
    w: &str,
    value: Option<&str>,
    dir: Direction,
    origin: &str,
) -> Result<usize, Problem> {
    let src = |v: &str| format!("{origin}: {v}");
    let need = |what: &str| {
        value.ok_or_else(|| tc_refuses(1, dir, format!("`{w}` needs a {what} after it")))
    };
    let o = &mut d.opts;
    let key: &'static str;
    let link = |d: &mut DirWords, f: &dyn Fn(&mut LinkState)| {
        f(&mut d.link);
        d.link.touched = true;
    };
    match w {
        "bandwidth" => {
            let v = need("rate")?;
            let r = tc_rate(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), r.to_string()));
            }
            let key = match dir {
                Direction::Egress => {
                    d.opts.up = Some(r);
                    "up"
                }
                Direction::Ingress => {
                    d.opts.down = Some(r);
                    "down"
                }
            };
            d.source(key, src(&format!("bandwidth {v} = {r}")));
            return Ok(2);
        }
        "rtt" => {
            let v = need("time")?;
            let t = tc_time(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), t.to_string()));
            }
            let o = &mut d.opts;
            o.rtt = Some(t);
            d.source("rtt", src(&format!("rtt {v} = {t}")));
            return Ok(2);
        }
        "memlimit" => {
            let v = need("size")?;
            let s: Size = v
                .parse()
                .map_err(|e: unbloat_units::UnitError| tc_refuses(2, dir, e.to_string()))?;
            o.memlimit = Some(s);
            d.source("memlimit", src(&format!("memlimit {v}")));
            return Ok(2);
        }
        "overhead" | "mpu" => {
            let v = need("number")?;
            let (lo, hi) = if w == "overhead" {
                (-64, 256)
            } else {
                (0, 256)
            };
            let n: i64 = v
                .parse()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| {
                    tc_refuses(
                        2,
                        dir,
                        format!("`{w} {v}`: tc takes whole numbers {lo}..{hi}"),
                    )
                })?;
            if w == "overhead" {
                link(d, &|l| {
                    l.overhead = n;
                    l.overhead_set = true;
                });
            } else {
                link(d, &|l| l.mpu = n);
            }
            d.source(w_key(w), src(&format!("{w} {v}")));
            return Ok(2);
        }
        "fwmark" => {
            return Err(
                refused(Qdisc::Cake, w, 2).unwrap_or_else(|| tc_refuses(2, dir, String::new()))
            )
        }
        // The words without a value: cake's one table, shared with `--extra-*`.
        _ if words::word(w).is_some() => {
            key = match words::word(w) {
                Some(Word::Diffserv(v)) => {
                    o.diffserv = Some(v);
                    "diffserv"
                }
                Some(Word::FlowMode(m)) => {
                    o.isolation = Some(m.into());
                    "isolation"
                }
                Some(Word::Nat(v)) => {
                    o.nat = Some(v);
                    "nat"
                }
                Some(Word::Wash(v)) => {
                    o.wash = Some(v);
                    "wash"
                }
                Some(Word::SplitGso(v)) => {
                    o.split_gso = Some(v);
                    "split-gso"
                }
                Some(Word::AckFilter(v)) => {
                    o.ack_filter = Some(v);
                    "ack-filter"
                }
                Some(Word::Framing(f)) => {
                    link(d, &|l| l.framing = Some(f));
                    "framing"
                }
                Some(Word::Rtt(t)) => {
                    d.opts.rtt = Some(t);
                    "rtt"
                }
                None => "",
            };
        }
        "ingress" | "egress" if dir == Direction::Ingress => {
            o.ingress_keyword = Some(w == "ingress");
            key = "ingress-keyword";
        }
        // cake's default mode on an egress device: nothing to say.
        "egress" => key = "",
        "via-ethernet" => {
            return Err(Problem {
                used: 1,
                kind: NoteKind::Ignored,
                text: "tc ignores it (cake finds the Ethernet header itself)".to_string(),
            })
        }
        "raw" => {
            link(d, &|l| {
                l.framing = Some(Framing::None);
                l.overhead = 0;
                l.overhead_set = true;
                l.raw = true;
            });
            key = "link";
        }
        "conservative" => {
            link(d, &|l| {
                l.framing = Some(Framing::Atm);
                l.overhead = 48;
                l.overhead_set = true;
            });
            key = "overhead";
        }
        "ethernet" => {
            link(d, &|l| {
                l.overhead += 38;
                l.overhead_set = true;
                l.mpu = 84;
            });
            key = "overhead";
        }
        "docsis" => {
            link(d, &|l| {
                l.framing = Some(Framing::None);
                l.overhead += 18;
                l.overhead_set = true;
                l.mpu = 64;
            });
            key = "overhead";
        }
        "ether-vlan" => {
            link(d, &|l| {
                l.overhead += 4;
                l.overhead_set = true;
            });
            key = "overhead";
        }
        _ => {
            if let Some(add) = words::adds_overhead(w) {
                link(d, &|l| {
                    l.framing = Some(add.1);
                    l.overhead += add.0;
                    l.overhead_set = true;
                });
                key = "overhead";
            } else if let Some(p) =
                refused(Qdisc::Cake, w, 1).filter(|_| !matches!(w, "vdsl2" | "none"))
            {
                return Err(p);
            } else {
                return Err(tc_refuses(
                    1,
                    dir,
                    format!(
                        "not a cake word (tc: \"What is \\\"{}\\\"?\")",
                        crate::clip::clip(w)
                    ),
                ));
            }
        }
    }
    if !key.is_empty() {
        d.source(key, src(w));
    }
    Ok(1)
}

fn w_key(w: &str) -> &'static str {
    if w == "mpu" {
        "mpu"
    } else {
        "overhead"
    }
}
