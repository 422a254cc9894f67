//! Numbers for people: rates, times and sizes in the units a reader takes in at a glance
//! (`19.95 Mbit/s`, `14.57 ms`, `209.3 KiB`), for `unbloat status` and the lines of the qdiscs'
//! parameters. Nothing here is read back: machines get base units (bits/s, us, bytes).

/// `19.95 Mbit/s`, `78 Mbit/s`, `1.247 Mbit/s`, `640 kbit/s`, `1.5 Gbit/s`: up to three
/// decimals, trailing zeros dropped.
pub fn human_rate(bps: u64) -> String {
    let (v, unit) = match bps {
        b if b >= 1_000_000_000 => (b as f64 / 1e9, "Gbit/s"),
        b if b >= 1_000_000 => (b as f64 / 1e6, "Mbit/s"),
        b if b >= 1_000 => (b as f64 / 1e3, "kbit/s"),
        b => (b as f64, "bit/s"),
    };
    format!("{} {unit}", trim(format!("{v:.3}")))
}

/// `0 us`, `850 us`, `14.57 ms`, `5 ms`, `1.2 s`.
pub fn human_time(us: u64) -> String {
    match us {
        u if u < 1_000 => format!("{u} us"),
        u if u < 1_000_000 => format!("{} ms", trim(format!("{:.2}", u as f64 / 1e3))),
        u => format!("{} s", trim(format!("{:.2}", u as f64 / 1e6))),
    }
}

/// `0 B`, `1000 B`, `209.3 KiB`, `4 MiB`, `1.1 GiB`.
pub fn human_size(bytes: u64) -> String {
    const K: f64 = 1024.0;
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{} KiB", trim(format!("{:.1}", b as f64 / K))),
        b if b < 1024 * 1024 * 1024 => {
            format!("{} MiB", trim(format!("{:.1}", b as f64 / (K * K))))
        }
        b => format!("{} GiB", trim(format!("{:.1}", b as f64 / (K * K * K)))),
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
