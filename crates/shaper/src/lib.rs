//! unbloat-shaper (to be written)
