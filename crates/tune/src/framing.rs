//! Framing detection (to be written).
