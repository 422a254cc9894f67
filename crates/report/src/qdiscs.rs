//! The qdiscs on the interface a test's traffic left by, as a results file records them: what
//! `tc -j -s qdisc show dev EGRESS` printed when the run started, and the typed records unbloat
//! reads from it.
//!
//! The shape, and why: [`EgressQdiscs`] keeps tc's output word for word and writes exactly that
//! back, so the results file (and the flent file's `UNBLOAT_QDISCS`) are what they were before
//! this type existed, byte for byte; and it reads that output once, when it is made or loaded,
//! into [`QdiscRecord`]s, which are all a caller sees. Keeping the words rather than writing the
//! records back is what lets a results file carry everything the kernel said (counters, cake's
//! tins, kinds unbloat has no model of), as flent's metadata does, so a plot months later still
//! says what was measured; the records come from those same words, so the two cannot disagree.
//!
//! Why not shaper's model of tc's output (`unbloat_shaper::tcjson`): this crate sits beside
//! shaper, not above it (it is in every build, the router's small one included, and in
//! autorate's plots), so it reads only what every qdisc prints (kind, handle, parent, counters)
//! and the few options that say how a run's queue was managed. A test in unbloat-measure checks
//! that both read every captured output in `fixtures/tc/` alike.
//!
//! Reading is strict about what every qdisc has (a list of objects, each with a `kind` and a
//! `handle`: a file without them is not one unbloat wrote) and lenient about options: a kind it
//! does not know, or options of an unexpected shape, read as [`QdiscOptions::Other`].

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The egress interface's qdiscs at the start of a run; [`EgressQdiscs::not_read`] when the
/// interface or its qdiscs could not be read (written as `null`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EgressQdiscs {
    /// What tc printed (`null` when not read), written back unchanged.
    tc: Value,
    /// The same, read.
    records: Vec<QdiscRecord>,
}

/// One qdisc as the results file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscRecord {
    /// As tc names it: `cake`, `fq_codel`, `htb`, `noqueue`, `mq`, ...
    pub kind: String,
    /// As tc prints it (`8001:`; `0:` for a qdisc the kernel attached by itself).
    pub handle: String,
    /// As tc prints it (`1:12`); `None` for the root qdisc.
    pub parent: Option<String>,
    pub root: bool,
    /// `None` when tc was run without `-s`.
    pub counters: Option<QdiscCounters>,
    pub options: QdiscOptions,
}

/// What every qdisc counts (`tc -s`): `Sent B bytes P pkt (dropped D, overlimits O requeues R)`,
/// `backlog Bb Qp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct QdiscCounters {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    /// Bytes queued.
    pub backlog: u64,
    /// Packets queued.
    pub qlen: u64,
}

/// The options that say how the queue was managed, for the kinds unbloat shapes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QdiscOptions {
    Cake(CakeRecord),
    FqCodel(FqCodelRecord),
    /// Any other kind, or a known kind whose options did not have the expected shape.
    Other,
}

/// cake's options as `tc -j` prints them (iproute2 tc/q_cake.c).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CakeRecord {
    /// The shaper's rate in bit/s (tc prints bytes/s); `None` when cake runs `unlimited`.
    pub bandwidth_bps: Option<u64>,
    /// `besteffort`, `diffserv3`, `diffserv4`, `diffserv8` or `precedence`.
    pub diffserv: String,
    pub rtt_us: u64,
    /// Bytes added to each packet's size; 0 when tc leaves the key out.
    pub overhead: i32,
}

/// fq_codel's options as `tc -j` prints them (iproute2 tc/q_fq_codel.c). Times are what the
/// kernel holds: `target 5ms` reads back as 4999 (codel keeps units of 1024 ns).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FqCodelRecord {
    /// Packets.
    pub limit: u32,
    #[serde(rename = "target")]
    pub target_us: u64,
    #[serde(rename = "interval")]
    pub interval_us: u64,
    /// tc prints `"ecn": true` only when it is on.
    #[serde(default)]
    pub ecn: bool,
}

impl EgressQdiscs {
    /// No qdiscs recorded (no egress interface, or tc could not be run or read).
    pub fn not_read() -> EgressQdiscs {
        EgressQdiscs::default()
    }

    /// Reads what `tc -j [-s] qdisc show dev DEV` printed, as parsed JSON; `null` is
    /// [`EgressQdiscs::not_read`].
    pub fn from_tc_json(tc: Value) -> Result<EgressQdiscs, String> {
        let records = match &tc {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| record(item).map_err(|e| format!("qdisc {i}: {e}")))
                .collect::<Result<_, _>>()?,
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
    pub fn records(&self) -> &[QdiscRecord] {
        &self.records
    }

    /// The root qdisc: what every packet leaving the interface went through first.
    pub fn root(&self) -> Option<&QdiscRecord> {
        self.records.iter().find(|q| q.root)
    }

    /// tc's own words, for files that carry them whole (flent's metadata).
    pub fn tc_json(&self) -> &Value {
        &self.tc
    }
}

fn record(item: &Value) -> Result<QdiscRecord, String> {
    let text = |key: &str| match item.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key} is {other}, not text")),
    };
    let kind = text("kind")?.ok_or("no \"kind\"")?;
    let handle = text("handle")?.ok_or_else(|| format!("{kind}: no \"handle\""))?;
    let counters = match item.get("bytes") {
        None => None,
        Some(_) => {
            Some(QdiscCounters::deserialize(item).map_err(|e| format!("{kind} {handle}: {e}"))?)
        }
    };
    Ok(QdiscRecord {
        parent: text("parent")?,
        root: item.get("root").and_then(Value::as_bool).unwrap_or(false),
        counters,
        options: options(&kind, item.get("options").unwrap_or(&Value::Null)),
        kind,
        handle,
    })
}

fn options(kind: &str, options: &Value) -> QdiscOptions {
    let read = match kind {
        "cake" => cake(options).map(QdiscOptions::Cake),
        "fq_codel" => FqCodelRecord::deserialize(options)
            .ok()
            .map(QdiscOptions::FqCodel),
        _ => None,
    };
    read.unwrap_or(QdiscOptions::Other)
}

/// cake's options; `None` when they do not have the shape tc prints.
fn cake(options: &Value) -> Option<CakeRecord> {
    let bandwidth_bps = match options.get("bandwidth")? {
        Value::String(s) if s == "unlimited" => None,
        // Bytes per second, as the kernel holds it.
        v => Some(v.as_u64()?.checked_mul(8)?),
    };
    let overhead = match options.get("overhead") {
        None => 0,
        Some(v) => i32::try_from(v.as_i64()?).ok()?,
    };
    Some(CakeRecord {
        bandwidth_bps,
        diffserv: options.get("diffserv")?.as_str()?.to_string(),
        rtt_us: options.get("rtt")?.as_u64()?,
        overhead,
    })
}

impl Serialize for EgressQdiscs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.tc.serialize(s)
    }
}

impl<'de> Deserialize<'de> for EgressQdiscs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EgressQdiscs, D::Error> {
        EgressQdiscs::from_tc_json(Value::deserialize(d)?)
            .map_err(|e| de::Error::custom(format!("qdiscs: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn what_every_qdisc_has_is_required_and_odd_options_are_other() {
        let e = |v: Value| EgressQdiscs::from_tc_json(v).expect_err("refused");
        assert!(e(json!({"kind": "cake"})).contains("list"));
        assert_eq!(e(json!([{"handle": "1:"}])), "qdisc 0: no \"kind\"");
        assert_eq!(
            e(json!([{"kind": "noqueue", "handle": "0:"}, {"kind": "sfq"}])),
            "qdisc 1: sfq: no \"handle\""
        );
        assert!(e(json!([{"kind": 7, "handle": "1:"}])).contains("not text"));
        let q = EgressQdiscs::from_tc_json(json!([
            {"kind": "cake", "handle": "1:", "root": true, "options": {"bandwidth": "fast"}},
            {"kind": "sfb", "handle": "2:", "parent": "1:", "options": {"anything": [1]}},
            {"kind": "fq_codel", "handle": "0:"},
        ]))
        .expect("lenient about options");
        let options: Vec<_> = q.records().iter().map(|r| &r.options).collect();
        assert_eq!(options, [&QdiscOptions::Other; 3]);
        assert_eq!(q.records()[1].parent.as_deref(), Some("1:"));
        assert_eq!(q.root().map(|r| r.kind.as_str()), Some("cake"));
        assert_eq!(q.records()[2].counters, None);
    }

    #[test]
    fn cake_unlimited_has_no_rate_and_a_rate_reads_in_bits() {
        let at = |bandwidth: Value| {
            let q = EgressQdiscs::from_tc_json(json!([{"kind": "cake", "handle": "8001:",
                "root": true, "options": {"bandwidth": bandwidth, "diffserv": "besteffort",
                "rtt": 100000}}]))
            .expect("cake");
            match &q.records()[0].options {
                QdiscOptions::Cake(c) => (c.bandwidth_bps, c.overhead),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(at(json!("unlimited")), (None, 0));
        assert_eq!(at(json!(2_500_000)), (Some(20_000_000), 0));
    }
}
