//! (empty, see README)
