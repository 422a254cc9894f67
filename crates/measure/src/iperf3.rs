//! Placeholder: the iperf3 far end (issue 12), being written.
