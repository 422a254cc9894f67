//! Netlink attributes as views over the kernel's bytes: a list of (type, value) read once, and
//! the integers, strings and structs inside them. Native byte order unless a field says `be`.

use netlink_packet_core::NlasIterator;

/// `NLA_TYPE_MASK` (include/uapi/linux/netlink.h): the type without `NLA_F_NESTED` and
/// `NLA_F_NET_BYTEORDER`.
const NLA_TYPE_MASK: u16 = 0x3FFF;

/// The attributes of one level.
pub(crate) struct Attrs<'a>(Vec<(u16, &'a [u8])>);

impl<'a> Attrs<'a> {
    /// The attributes in `bytes`; `what` names them in an error.
    pub fn parse(bytes: &'a [u8], what: &str) -> Result<Attrs<'a>, String> {
        NlasIterator::new(bytes)
            .map(|nla| {
                let nla = nla.map_err(|e| format!("{what}: {e}"))?;
                let value: &'a [u8] = nla.into_inner();
                // The view's value: after the 4-byte header, as long as nla_len says.
                let len = u16::from_ne_bytes([value[0], value[1]]) as usize;
                let kind = u16::from_ne_bytes([value[2], value[3]]) & NLA_TYPE_MASK;
                Ok((kind, &value[4..len.max(4).min(value.len())]))
            })
            .collect::<Result<_, String>>()
            .map(Attrs)
    }

    /// The first attribute of this type.
    pub fn get(&self, kind: u16) -> Option<&'a [u8]> {
        self.0.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v)
    }

    pub fn has(&self, kind: u16) -> bool {
        self.get(kind).is_some()
    }

    pub fn u32(&self, kind: u16) -> Option<u32> {
        self.get(kind).and_then(|v| u32_at(v, 0))
    }

    pub fn u64(&self, kind: u16) -> Option<u64> {
        self.get(kind).and_then(|v| u64_at(v, 0))
    }

    pub fn string(&self, kind: u16) -> Option<String> {
        self.get(kind).map(c_string)
    }

    /// The attributes nested in the one of this type.
    pub fn nested(&self, kind: u16, what: &str) -> Result<Option<Attrs<'a>>, String> {
        self.get(kind).map(|v| Attrs::parse(v, what)).transpose()
    }

    /// Every attribute, in the kernel's order (lists such as cake's tins and a filter's actions
    /// are attributes typed 1, 2, 3 ...).
    pub fn all(&self) -> impl Iterator<Item = (u16, &'a [u8])> + '_ {
        self.0.iter().copied()
    }
}

/// What the shaper's per-qdisc decoders read options with (`CakeOptions::from_attrs`).
impl unbloat_shaper::qdisc::netlink::OptionAttrs for Attrs<'_> {
    fn u32(&self, kind: u16) -> Option<u32> {
        Attrs::u32(self, kind)
    }
    fn u64(&self, kind: u16) -> Option<u64> {
        Attrs::u64(self, kind)
    }
    fn i32(&self, kind: u16) -> Option<i32> {
        self.get(kind).and_then(|v| i32_at(v, 0))
    }
    fn has(&self, kind: u16) -> bool {
        Attrs::has(self, kind)
    }
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    u32_at(b, at).map(|v| v as i32)
}

pub(crate) fn be32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A NUL-terminated string (shown lossily: names are bytes to the kernel).
pub(crate) fn c_string(value: &[u8]) -> String {
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An attribute, padded to 4 bytes.
    pub fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(((4 + value.len()) as u16).to_ne_bytes());
        a.extend(kind.to_ne_bytes());
        a.extend(value);
        a.resize((a.len() + 3) & !3, 0);
        a
    }

    #[test]
    fn nested_flags_are_masked_and_values_are_exact() {
        let inner = [nla(1, &7u32.to_ne_bytes()), nla(2, b"cake\0")].concat();
        let bytes = [nla(0x8000 | 5, &inner), nla(3, &[1, 2, 3])].concat();
        let a = Attrs::parse(&bytes, "test").unwrap();
        let n = a.nested(5, "inner").unwrap().unwrap();
        assert_eq!(n.u32(1), Some(7));
        assert_eq!(n.string(2).as_deref(), Some("cake"));
        // A 3-byte value stays 3 bytes (the padding is not part of it).
        assert_eq!(a.get(3), Some(&[1u8, 2, 3][..]));
        assert_eq!(a.u32(3), None);
        assert!(Attrs::parse(&[8, 0, 1], "short").is_err());
    }
}
