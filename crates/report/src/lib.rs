//! unbloat-report (to be written)
