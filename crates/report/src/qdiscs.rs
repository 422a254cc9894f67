//! The qdiscs on the interface a test's traffic left by, as a results file records them: what
//! `tc -j -s qdisc show dev EGRESS` printed when the run started, read into the shaper's model of
//! tc's output ([`unbloat_shaper::tcjson::Qdisc`]: kind, handle, parent, counters, and cake's,
//! fq_codel's and HTB's options as the kernel holds them).
//!
//! The shape, and why: [`EgressQdiscs`] keeps tc's output word for word and writes exactly that
//! back, so the results file (and the flent file's `UNBLOAT_QDISCS`) are what they were before
//! the qdiscs were typed, byte for byte, and a file written before reads as it is; it reads that
//! output once, when it is made or loaded, with the same reader `status` and the read-back check
//! use, so the records and the words cannot disagree and no second model of tc's output exists.
//! Keeping the words is what lets a results file carry everything the kernel said (cake's tins,
//! kinds unbloat has no model of), as flent's metadata does, so a plot months later still says
//! what was measured.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use unbloat_shaper::tcjson::{parse_qdiscs, Qdisc};

/// The egress interface's qdiscs at the start of a run; [`EgressQdiscs::not_read`] when the
/// interface or its qdiscs could not be read (written as `null`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EgressQdiscs {
    /// What tc printed (`null` when not read), written back unchanged.
    tc: Value,
    /// The same, read.
    records: Vec<Qdisc>,
}

impl EgressQdiscs {
    /// No qdiscs recorded (no egress interface, or tc could not be run or read).
    pub fn not_read() -> EgressQdiscs {
        EgressQdiscs::default()
    }

    /// Reads what `tc -j [-s] qdisc show dev DEV` printed, as parsed JSON; `null` is
    /// [`EgressQdiscs::not_read`]. A qdisc of a kind unbloat has no model of is kept by its
    /// place and counters; only output that is not tc's list of qdiscs is refused.
    pub fn from_tc_json(tc: Value) -> Result<EgressQdiscs, String> {
        let records = match &tc {
            Value::Null => Vec::new(),
            Value::Array(_) => parse_qdiscs(&tc.to_string()).map_err(|e| e.to_string())?,
            _ => return Err("expected the list `tc -j qdisc show` prints".into()),
        };
        Ok(EgressQdiscs { tc, records })
    }

    /// Reads what `tc -j [-s] qdisc show dev DEV` printed.
    pub fn from_tc_output(text: &[u8]) -> Result<EgressQdiscs, String> {
        let tc = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        EgressQdiscs::from_tc_json(tc)
    }

    /// False when nothing was recorded (see [`EgressQdiscs::not_read`]).
    pub fn was_read(&self) -> bool {
        !self.tc.is_null()
    }

    /// Every qdisc, in tc's order; empty when not read.
    pub fn records(&self) -> &[Qdisc] {
        &self.records
    }

    /// The root qdisc: what every packet leaving the interface went through first.
    pub fn root(&self) -> Option<&Qdisc> {
        self.records.iter().find(|q| q.root)
    }

    /// tc's own words, for files that carry them whole (flent's metadata).
    pub fn tc_json(&self) -> &Value {
        &self.tc
    }
}

impl Serialize for EgressQdiscs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.tc.serialize(s)
    }
}

impl<'de> Deserialize<'de> for EgressQdiscs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EgressQdiscs, D::Error> {
        EgressQdiscs::from_tc_json(Value::deserialize(d)?).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use unbloat_shaper::tcjson::QdiscKind;
    use unbloat_units::Rate;

    #[test]
    fn null_is_not_read_and_writes_back_as_null() {
        let q: EgressQdiscs = serde_json::from_str("null").expect("null");
        assert_eq!(q, EgressQdiscs::not_read());
        assert!(!q.was_read() && q.records().is_empty() && q.root().is_none());
        assert_eq!(serde_json::to_string(&q).expect("write"), "null");
        // A device without qdiscs (tc prints an empty list) was read.
        let q = EgressQdiscs::from_tc_output(b"[]").expect("empty");
        assert!(q.was_read() && q.records().is_empty());
    }

    #[test]
    fn what_every_qdisc_has_is_required_and_odd_options_are_kept_as_other() {
        let e = |v: Value| EgressQdiscs::from_tc_json(v).expect_err("refused");
        assert!(e(json!({"kind": "cake"})).contains("list"));
        assert!(e(json!([{"handle": "1:"}])).contains("kind"));
        let q = EgressQdiscs::from_tc_json(json!([
            {"kind": "cake", "handle": "1:", "root": true, "options": {"bandwidth": "fast"}},
            {"kind": "sfb", "handle": "2:", "parent": "1:", "options": {"anything": [1]}},
        ]))
        .expect("lenient about options");
        assert!(q
            .records()
            .iter()
            .all(|r| matches!(r.details, QdiscKind::Other { .. })));
        assert_eq!(q.root().map(|r| r.kind.as_str()), Some("cake"));
    }

    #[test]
    fn a_cake_reads_its_rate_and_writes_back_its_words() {
        let tc = json!([{"kind": "cake", "handle": "8001:", "root": true, "options": {
            "bandwidth": 2_500_000, "diffserv": "besteffort", "flowmode": "triple-isolate",
            "nat": false, "wash": false, "ingress": false, "ack-filter": "disabled",
            "split_gso": true, "rtt": 100000, "raw": true, "overhead": 0, "fwmark": "0"}}]);
        let q = EgressQdiscs::from_tc_json(tc.clone()).expect("cake");
        let (o, _) = q.root().and_then(|r| r.cake()).expect("cake's options");
        assert_eq!(o.bandwidth, Some(Rate::from_mbit(20)));
        assert_eq!(serde_json::to_value(&q).expect("write"), tc);
    }
}
