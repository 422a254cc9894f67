//! Placeholder: the irtt far end (issue 12), being written.
