//! State on disk: versioned JSON documents written atomically.

mod atomic;
mod records;

pub use atomic::{read_versioned, write_atomic, write_versioned, StoreError};
pub use records::{Loaded, Records};
