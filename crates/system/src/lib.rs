//! unbloat-system (to be written)
