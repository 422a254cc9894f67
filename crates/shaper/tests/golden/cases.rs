//! The golden cases of `cases.toml`, shared by the shaper's golden test and the binary's
//! real-kernel tests (`#[path]`-included there): `[NAME]`, an `iface` line, then the options
//! exactly as written, kept as text in the file's order because the golden files quote them.

/// The text of `cases.toml`, compiled in: the path is relative to this file in every includer.
pub const CASES_TOML: &str = include_str!("cases.toml");

/// (name, interface, options as the TOML table of a config file would say them).
pub fn cases() -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for line in CASES_TOML
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push((name.to_string(), String::new(), String::new()));
        } else if let Some(case) = out.last_mut() {
            match line.strip_prefix("iface = ") {
                Some(iface) => case.1 = iface.trim_matches('"').to_string(),
                None => {
                    if !case.2.is_empty() {
                        case.2.push('\n');
                    }
                    case.2.push_str(line);
                }
            }
        }
    }
    out
}
