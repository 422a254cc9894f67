//! One fq_codel word at a time, as iproute2's `tc/q_fq_codel.c` (`fq_codel_parse_opt`) reads it.

use super::cake_words::cake_word;
use super::dir::{refused, tc_refuses, DirWords, Problem};
use super::tc_units::{bare, tc_time, tc_unsigned};
use crate::model::Direction;
use crate::options::Qdisc;
use crate::qdisc::cake::words::adds_overhead;
use unbloat_units::Size;

/// One fq_codel word (q_fq_codel.c `fq_codel_parse_opt`).
pub fn fq_codel_word(
    d: &mut DirWords,
    w: &str,
    value: Option<&str>,
    dir: Direction,
    origin: &str,
) -> Result<usize, Problem> {
    let need = || value.ok_or_else(|| tc_refuses(1, dir, format!("`{w}` needs a value after it")));
    let number = |v: &str| -> Result<u32, Problem> {
        tc_unsigned(v).ok_or_else(|| tc_refuses(2, dir, format!("`{w} {v}`: not a whole number")))
    };
    let o = &mut d.opts;
    let (key, used): (&'static str, usize) = match w {
        "limit" => {
            o.limit = Some(number(need()?)?);
            ("limit", 2)
        }
        "flows" => {
            o.flows = Some(number(need()?)?);
            ("flows", 2)
        }
        "quantum" => {
            o.quantum = Some(number(need()?)?);
            ("quantum", 2)
        }
        "target" | "interval" => {
            let v = need()?;
            let t = tc_time(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), t.to_string()));
            }
            let o = &mut d.opts;
            if w == "target" {
                o.target = Some(t);
                ("target", 2)
            } else {
                o.interval = Some(t);
                ("interval", 2)
            }
        }
        "memory_limit" => {
            let v = need()?;
            let s: Size = v
                .parse()
                .map_err(|e: unbloat_units::UnitError| tc_refuses(2, dir, e.to_string()))?;
            o.memory_limit = Some(s);
            ("memory-limit", 2)
        }
        "ecn" | "noecn" => {
            let on = w == "ecn";
            match dir {
                Direction::Egress => o.ecn_egress = Some(on),
                Direction::Ingress => o.ecn_ingress = Some(on),
            }
            (
                match dir {
                    Direction::Egress => "ecn-egress",
                    Direction::Ingress => "ecn-ingress",
                },
                1,
            )
        }
        "ce_threshold" | "ce_threshold_selector" | "drop_batch" => {
            return Err(
                refused(Qdisc::FqCodel, w, 2).unwrap_or_else(|| tc_refuses(2, dir, String::new()))
            )
        }
        _ => {
            let hint = if adds_overhead(w).is_some() || cake_only(w) {
                "a cake word, which fq_codel does not take"
            } else {
                "not an fq_codel word"
            };
            return Err(tc_refuses(
                1,
                dir,
                format!("{hint} (tc: \"What is \\\"{}\\\"?\")", crate::clip::clip(w)),
            ));
        }
    };
    let shown = match (used, value) {
        (2, Some(v)) => format!("{w} {v}"),
        _ => w.to_string(),
    };
    d.source(key, format!("{origin}: {shown}"));
    Ok(used)
}

fn cake_only(w: &str) -> bool {
    let mut d = DirWords::default();
    cake_word(&mut d, w, Some("1"), Direction::Egress, "").is_ok()
}
