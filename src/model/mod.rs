//! Identifiers, records and state machines shared across layers.

pub mod container;
pub mod ids;
pub mod image;
pub mod memory;
pub mod node;
pub mod sandbox;
pub mod userns;
