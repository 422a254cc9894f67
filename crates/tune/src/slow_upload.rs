//! A slow upload's cake gets a memory limit (issue 55).
//!
//! Why: below a few hundred kbit/s a full-size packet takes tens of milliseconds on the wire (120
//! ms at 117 kbit/s with ATM's cells), codel's target grows to one and a half of them and its
//! interval past 400 ms, and cake's own memory limit stays at its floor of 4 MB. On the lab's
//! adsl-remote (1 Mbit/s down, 128 kbit/s up) rrul's four uploads then kept 50 to 97 KB in the
//! upload's cake, 4 to 6 s at 117 kbit/s, through 1,000 drops in 30 s (`tc -s qdisc` every half
//! second), and no setup brought rrul's p99 (UDP BE, the whole load) under 1.27 s, sqm's
//! included. With
//! `memlimit 16k` on the upload (cake then drops from its fattest flow when its queues' memory
//! passes it) the same rates gave a p99 of 637 and 659 ms at 854 kbit/s down, against sqm's
//! 1,498 and 1,576 ms in the same runs, at the same upload goodput (51 to 53 %, sqm 53 to 57 %);
//! `memlimit 32k` gave 1,035 ms. On adsl-rural (256 kbit/s up, shaped at 239) `memlimit 30k`
//! changed little in one run: p99 517 against 495 ms, steady p95 128 against 177 ms, upload
//! goodput 71 against 68 %. Above [`BELOW`] nothing was measured, and nothing changes.
//!
//! The limit is a second of the upload's line rate, at least [`LEAST`]: cake counts an skb's
//! memory, not its bytes, so that holds about half a second of full-size packets. It is a word of
//! the upload's options (`extra-egress`), so it is in the config tune writes, and a user's own
//! `memlimit` (the key, or a word of their upload options) stands instead.

use unbloat_shaper::model::Direction;
use unbloat_shaper::options::{Qdisc, ShapeOptions};
use unbloat_units::{Rate, Size};

/// Uploads whose line is slower than this get the limit.
pub const BELOW: Rate = Rate::from_kbit(300);
/// The smallest limit: what adsl-remote's 117 kbit/s was measured with.
pub const LEAST: Size = Size::from_bytes(16 * 1024);

/// The memory limit for an upload whose line carries `line`, if it is slow enough to need one.
pub fn memlimit(line: Rate) -> Option<Size> {
    (line < BELOW).then(|| Size::from_bytes(line.bytes_per_sec().max(LEAST.bytes())))
}

/// `link` with the upload's memory limit for a line of `up_line`, and the limit it added: none
/// on a faster line, under fq_codel, or where the user said a `memlimit`.
pub fn bounded(link: &ShapeOptions, up_line: Rate) -> (ShapeOptions, Option<Size>) {
    let said = link.says(Direction::Egress, |o| o.memlimit.is_some());
    let limit =
        memlimit(up_line).filter(|_| !said && link.qdisc.unwrap_or_default() == Qdisc::Cake);
    let Some(limit) = limit else {
        return (link.clone(), None);
    };
    let mut out = link.clone();
    out.egress_words_first(&format!("memlimit {}", limit.bytes()));
    (out, Some(limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_upload_gets_a_second_of_its_rate_and_at_least_16k() {
        assert_eq!(memlimit(Rate::from_kbit(117)), Some(LEAST));
        assert_eq!(
            memlimit(Rate::from_kbit(256)),
            Some(Size::from_bytes(32_000))
        );
        assert_eq!(memlimit(Rate::from_kbit(300)), None);
        assert_eq!(memlimit(Rate::from_mbit(20)), None);
    }

    #[test]
    fn the_limit_is_an_upload_word_and_what_the_user_said_stands() {
        let slow = Rate::from_kbit(120);
        let (o, added) = bounded(&ShapeOptions::default(), slow);
        assert_eq!(added, Some(LEAST));
        assert_eq!(o.extra_egress.as_deref(), Some("memlimit 16384"));
        assert_eq!(
            o.memlimit, None,
            "not the key: it would bound the download too"
        );
        // The user's words follow, so theirs win where they overlap.
        let user = ShapeOptions {
            extra_egress: Some("ack-filter".into()),
            ..Default::default()
        };
        let (o, _) = bounded(&user, slow);
        assert_eq!(o.extra_egress.as_deref(), Some("memlimit 16384 ack-filter"));
        for said in [
            ShapeOptions {
                memlimit: Some(Size::from_bytes(1 << 20)),
                ..Default::default()
            },
            ShapeOptions {
                extra_egress: Some("nat memlimit 64k".into()),
                ..Default::default()
            },
            ShapeOptions {
                qdisc: Some(Qdisc::FqCodel),
                ..Default::default()
            },
        ] {
            assert_eq!(bounded(&said, slow), (said.clone(), None), "{said:?}");
        }
        assert_eq!(
            bounded(&ShapeOptions::default(), Rate::from_mbit(1)).1,
            None
        );
    }
}
