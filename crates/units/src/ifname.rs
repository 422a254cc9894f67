//! Linux interface names, as the kernel accepts them (net/core/dev.c `dev_valid_name`).

use crate::{serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// The longest name the kernel accepts: `IFNAMSIZ` (16) minus the terminating NUL.
pub const IFNAMSIZ_MAX: usize = 15;

/// A valid interface name: 1 to 15 bytes, not `.` or `..`, no `/`, `:` or whitespace.
/// Whether the interface exists is a question for the system, not for this type.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfName(String);

/// As a string (`"wan0"`): the daemon's messages list names with `{:?}`, and the router build
/// keeps derived `Debug` to type names (`-Z fmt-debug=shallow`, scripts/static).
impl fmt::Debug for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl IfName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for IfName {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<IfName, UnitError> {
        let err = |r: &str| Err(UnitError::new("interface name", s, r));
        if s.is_empty() {
            return err("empty");
        }
        if s.len() > IFNAMSIZ_MAX {
            return err("longer than 15 bytes, the kernel's limit (IFNAMSIZ)");
        }
        if s == "." || s == ".." {
            return err("not a name the kernel allows");
        }
        if let Some(c) = s
            .chars()
            .find(|c| *c == '/' || *c == ':' || c.is_whitespace() || c.is_control())
        {
            return err(&format!(
                "contains {c:?}, which the kernel does not allow in a name"
            ));
        }
        if !s.is_ascii() {
            return err("contains non-ASCII characters");
        }
        Ok(IfName(s.to_string()))
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for IfName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

serde_via_text!(IfName, |v| v.to_string().parse());

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_real_names() {
        for ok in [
            "eth0",
            "eth0.2",
            "wan",
            "enp3s0f1",
            "ifb4eth0",
            "pppoe-wan",
            "abcdefghijklmno",
        ] {
            assert_eq!(
                ok.parse::<IfName>().map(|n| n.to_string()),
                Ok(ok.to_string())
            );
        }
    }

    #[test]
    fn refuses_what_the_kernel_refuses() {
        for bad in [
            "",
            ".",
            "..",
            "eth/0",
            "eth 0",
            "eth0:1",
            "abcdefghijklmnop",
            "ethé",
        ] {
            let e = bad.parse::<IfName>().unwrap_err();
            assert_eq!(e.what, "interface name", "{bad}");
        }
    }

    proptest! {
        #[test]
        fn valid_names_round_trip(s in "[a-z][a-z0-9.-]{0,14}") {
            prop_assume!(s != "." && s != "..");
            let n: IfName = s.parse().unwrap();
            prop_assert_eq!(n.as_str(), s.as_str());
        }
    }
}
