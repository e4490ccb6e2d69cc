//! State on disk: versioned JSON documents written atomically.

mod atomic;
mod beside;
pub mod confined;
pub mod private;
mod records;
mod tolerant;

pub use atomic::{read_versioned, replace_atomic, replace_versioned, write_atomic, write_versioned, StoreError};
pub use beside::Beside;
pub use records::{Loaded, Records};
pub use tolerant::tolerant;
