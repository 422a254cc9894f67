//! Rate search (to be written).
