//! unbloat-lab (to be written)
