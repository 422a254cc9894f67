//! unbloat-units (to be written)
