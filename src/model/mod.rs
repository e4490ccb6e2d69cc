//! Identifiers and records shared across layers.

pub mod image;
