//! State on disk: versioned JSON documents written atomically.

mod atomic;

pub use atomic::{read_versioned, write_atomic, write_versioned, StoreError};
