//! iperf3's error codes (`i_errno`) in words, for a server's `SERVER_ERROR`.
//!
//! The numbers are iperf_api.h's `enum { IENONE = 0, ... }` and the words iperf_error.c's
//! `iperf_strerror`, both read at iperf 3.21 (the numbers have not changed since 3.0; new codes
//! are only appended). A code missing here is printed as its number.

/// (i_errno, what iperf_strerror says), the codes a server can send a client.
const TABLE: &[(i32, &str)] = &[
    (5, "test duration valid values are 0 to 86400 seconds"),
    (6, "invalid number of parallel streams (min = 1, max = 128)"),
    (7, "block size too large (maximum = 1048576 bytes)"),
    (8, "socket buffer size too large"),
    (12, "bogus value for --omit"),
    (13, "an option you are trying to set is not implemented yet"),
    (15, "invalid burst count"),
    (21, "bad TOS value (must be between 0 and 255 inclusive)"),
    (27, "total required bandwidth is larger than server limit"),
    (34, "cannot transfer file using UDP"),
    (
        37,
        "client's requested duration exceeds the server's maximum permitted limit",
    ),
    (100, "unable to create a new test"),
    (101, "test initialization failed"),
    (102, "unable to start listener for connections"),
    (104, "unable to accept connection from client"),
    (106, "unable to receive cookie at server"),
    (107, "unable to write to the control socket"),
    (108, "unable to read from the control socket"),
    (109, "control socket has closed unexpectedly"),
    (110, "received an unknown control message"),
    (111, "unable to send control message"),
    (112, "unable to receive control message"),
    (114, "unable to receive parameters from client"),
    (115, "unable to package results"),
    (116, "unable to send results"),
    (117, "unable to receive results"),
    (118, "select failed"),
    (119, "the client has terminated"),
    (120, "the server has terminated"),
    (121, "the server is busy running a test. try again later"),
    (122, "unable to set TCP/SCTP NODELAY"),
    (123, "unable to set TCP/SCTP MSS"),
    (124, "unable to set socket buffer size"),
    (125, "unable to set IP TOS"),
    (126, "unable to set IPv6 traffic class"),
    (127, "unable to set IPv6 flow label"),
    (128, "unable to reuse address on socket"),
    (129, "unable to set socket to non-blocking"),
    (130, "unable to set socket window size"),
    (131, "protocol does not exist"),
    (132, "unable to set CPU affinity"),
    (134, "unable to set TCP_CONGESTION"),
    (140, "unable to set socket pacing"),
    (141, "socket buffer size not set correctly"),
    (142, "test authorization failed"),
    (144, "idle timeout for receiving data"),
    (148, "unable to set TCP USER_TIMEOUT"),
    (150, "unable to create thread"),
    (151, "unable to cancel thread"),
    (152, "unable to join thread"),
    (160, "server test duration expired"),
    (200, "unable to create a new stream"),
    (201, "unable to initialize stream"),
    (202, "unable to start stream listener"),
    (203, "unable to connect stream"),
    (204, "unable to accept stream connection"),
    (205, "unable to write to stream socket"),
    (206, "unable to read from stream socket"),
    (207, "stream socket has closed unexpectedly"),
    (208, "stream has an invalid id"),
    (300, "unable to create new timer"),
    (301, "unable to update timer"),
];

/// A `SERVER_ERROR`'s two numbers in words: iperf3's error, and the server's errno when it sent
/// one (iperf_client_api.c prints `strerror(errno)` only `if (errno > 0)`). The errno is the
/// server's, so its meaning is read as Linux's, the usual iperf3 host.
pub fn server_error_text(i_errno: i32, errno: i32) -> String {
    let what = TABLE
        .iter()
        .find(|(c, _)| *c == i_errno)
        .map(|(_, t)| (*t).to_string())
        .unwrap_or_else(|| format!("iperf3 error {i_errno}"));
    if errno > 0 && errno < 4096 {
        let os = std::io::Error::from_raw_os_error(errno);
        format!("{what} (server errno {errno}: {os})")
    } else {
        what
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_read_as_iperf3_prints_them() {
        assert_eq!(
            server_error_text(121, 0),
            "the server is busy running a test. try again later"
        );
        assert_eq!(
            server_error_text(37, 0),
            "client's requested duration exceeds the server's maximum permitted limit"
        );
        assert!(server_error_text(206, 104)
            .starts_with("unable to read from stream socket (server errno 104"));
    }

    #[test]
    fn unknown_codes_and_odd_errnos_still_read() {
        assert_eq!(server_error_text(-7, -1), "iperf3 error -7");
        assert_eq!(
            server_error_text(i32::MAX, i32::MAX),
            format!("iperf3 error {}", i32::MAX)
        );
    }

    #[test]
    fn table_is_sorted_without_duplicates() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
