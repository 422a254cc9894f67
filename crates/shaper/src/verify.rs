//! (S2 is writing this)
