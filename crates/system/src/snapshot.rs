//! What a device looked like before unbloat touched it, so that a failed start can prove it put
//! everything back: the device's qdiscs as `tc -j qdisc show` reports them (configuration only,
//! no counters) and whether the IFB exists.

use crate::runner::{Cmd, RunError, Runner};
use serde_json::Value;

/// The configuration of a device's qdiscs and of its IFB's existence, comparable with `==`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub qdiscs: Vec<Value>,
    pub ifb_exists: bool,
}

impl Snapshot {
    pub fn take(runner: &dyn Runner, dev: &str, ifb: Option<&str>) -> Result<Snapshot, RunError> {
        let out = runner.run(&Cmd::tc(["-j", "qdisc", "show", "dev", dev]))?;
        let qdiscs = match serde_json::from_str::<Value>(&out.stdout) {
            Ok(Value::Array(items)) => items.into_iter().map(normalise).collect(),
            _ => vec![],
        };
        let ifb_exists = match ifb {
            Some(name) => link_exists(runner, name)?,
            None => false,
        };
        Ok(Snapshot { qdiscs, ifb_exists })
    }

    /// The root qdisc, if it is not one the kernel puts there by itself.
    pub fn custom_root(&self) -> Option<&Value> {
        self.qdiscs
            .iter()
            .find(|q| q.get("root") == Some(&Value::Bool(true)))
            .filter(|q| !is_default(q))
    }

    /// The `ffff:` ingress (or clsact) qdisc, if any.
    pub fn ingress(&self) -> Option<&Value> {
        self.qdiscs.iter().find(|q| {
            matches!(
                q.get("kind").and_then(Value::as_str),
                Some("ingress" | "clsact")
            )
        })
    }

    /// What differs from `other`, for the message when a rollback did not restore everything.
    pub fn describe_difference(&self, other: &Snapshot) -> String {
        let show = |s: &Snapshot| {
            let kinds: Vec<String> = s.qdiscs.iter().map(summary).collect();
            format!(
                "qdiscs [{}], IFB {}",
                kinds.join(", "),
                if s.ifb_exists { "present" } else { "absent" }
            )
        };
        format!("before: {}; now: {}", show(self), show(other))
    }
}

/// A one-line description of a qdisc entry: `cake 8001: root`.
pub fn summary(q: &Value) -> String {
    let kind = q.get("kind").and_then(Value::as_str).unwrap_or("?");
    let handle = q.get("handle").and_then(Value::as_str).unwrap_or("?");
    let place = if q.get("root") == Some(&Value::Bool(true)) {
        "root"
    } else {
        "child"
    };
    format!("{kind} {handle} {place}")
}

/// Whether the kernel creates a qdisc like this by itself on a device (`noqueue` on virtual
/// devices, `pfifo_fast`/`fq_codel`/`fq`/`mq` from `net.core.default_qdisc` on real ones, with
/// handle 0:). Deleting unbloat's root brings such a default back, which is what "as it was" means.
pub fn is_default(q: &Value) -> bool {
    let kind = q.get("kind").and_then(Value::as_str).unwrap_or("");
    let handle = q.get("handle").and_then(Value::as_str).unwrap_or("");
    kind == "noqueue"
        || (handle == "0:"
            && matches!(
                kind,
                "pfifo_fast" | "fq_codel" | "fq" | "mq" | "pfifo" | "sfq"
            ))
}

/// Drops what changes without anyone configuring anything, so two snapshots of an unchanged
/// device compare equal: reference counts, and handles the kernel picked by itself (a qdisc
/// added without `handle` gets the next free major from 8001: upwards, net/sched/sch_api.c
/// `qdisc_alloc_handle`), which differ each time the same setup is re-created.
fn normalise(mut q: Value) -> Value {
    if let Value::Object(map) = &mut q {
        map.remove("refcnt");
        // HTB counts packets sent while it had no class for them: traffic, not configuration.
        if let Some(Value::Object(options)) = map.get_mut("options") {
            options.remove("direct_packets_stat");
        }
        let auto = map
            .get("handle")
            .and_then(Value::as_str)
            .and_then(|h| h.strip_suffix(':'))
            .and_then(|major| u32::from_str_radix(major, 16).ok())
            .is_some_and(|major| major >= 0x8000);
        if auto {
            map.insert("handle".into(), Value::String("auto".into()));
        }
    }
    q
}

pub fn link_exists(runner: &dyn Runner, name: &str) -> Result<bool, RunError> {
    Ok(runner
        .run(&Cmd::ip(["link", "show", "dev", name]))?
        .success())
}

/// The names of every network device, from `ip -j link show`.
pub fn link_names(runner: &dyn Runner) -> Result<Vec<String>, RunError> {
    let out = runner.run(&Cmd::ip(["-j", "link", "show"]))?;
    let names = match serde_json::from_str::<Value>(&out.stdout) {
        Ok(Value::Array(items)) => items
            .iter()
            .filter_map(|l| l.get("ifname").and_then(Value::as_str).map(str::to_string))
            .collect(),
        _ => vec![],
    };
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_recognised_and_custom_roots_are_not() {
        assert!(is_default(
            &json!({"kind":"noqueue","handle":"0:","root":true})
        ));
        assert!(is_default(&json!({"kind":"mq","handle":"0:","root":true})));
        assert!(!is_default(
            &json!({"kind":"htb","handle":"1:","root":true})
        ));
        assert!(!is_default(
            &json!({"kind":"cake","handle":"8001:","root":true})
        ));
        // fq_codel put there by a person has a handle of its own.
        assert!(!is_default(
            &json!({"kind":"fq_codel","handle":"8002:","root":true})
        ));
    }

    #[test]
    fn reference_counts_do_not_make_snapshots_differ() {
        let a = normalise(json!({"kind":"noqueue","handle":"0:","root":true,"refcnt":2}));
        let b = normalise(json!({"kind":"noqueue","handle":"0:","root":true,"refcnt":3}));
        assert_eq!(a, b);
    }

    #[test]
    fn kernel_chosen_handles_do_not_make_snapshots_differ_but_chosen_ones_do() {
        let cake = |h: &str| normalise(json!({"kind":"cake","handle":h,"root":true}));
        assert_eq!(cake("8002:"), cake("8007:"));
        assert_ne!(cake("1:"), cake("2:"));
    }
}
