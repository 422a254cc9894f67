//! Placeholder: the responsiveness draft's RPM (issue 12), being written.
