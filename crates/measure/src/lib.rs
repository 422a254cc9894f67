//! unbloat-measure (to be written)
