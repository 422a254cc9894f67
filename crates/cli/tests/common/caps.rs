//! Capability sets as the packages write them (systemd's `CapabilityBoundingSet=`, procd's
//! `/etc/capabilities/unbloat.json`), turned into what the tests need: setpriv's
//! `--bounding-set` argument and the bit mask `/proc/PID/status` shows (`CapBnd`, `CapEff`).

/// `-all,+net_admin,...` and the mask, from names like `CAP_NET_ADMIN`.
pub fn bounding<'a>(names: impl IntoIterator<Item = &'a str>) -> (String, u64) {
    let mut arg = "-all".to_string();
    let mut mask = 0u64;
    for cap in names {
        // linux/capability.h
        let bit = match cap {
            "CAP_CHOWN" => 0,
            "CAP_NET_BIND_SERVICE" => 10,
            "CAP_NET_ADMIN" => 12,
            "CAP_NET_RAW" => 13,
            "CAP_SYS_ADMIN" => 21,
            other => panic!("{other}: add its number here"),
        };
        mask |= 1 << bit;
        arg.push_str(&format!(
            ",+{}",
            cap.trim_start_matches("CAP_").to_lowercase()
        ));
    }
    (arg, mask)
}

/// A process's capability set from `/proc/PID/status` (`CapBnd:`, `CapEff:`, ...).
pub fn of_process(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}
