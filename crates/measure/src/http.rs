//! Placeholder: the http far end (issue 12), being written.
