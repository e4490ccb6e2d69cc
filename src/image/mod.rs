//! Images: references, registry pulls, OCI layout imports, the content store, layer unpacking.

mod error;
pub mod import;
mod index;
mod index_rebuild;
mod limits;
mod pull;
mod puller;
mod rate;
pub mod reference;
mod reference_syntax;
mod registry;
mod source;
mod store;
pub mod unpack;

pub use error::ImageError;
pub use limits::{LimitHit, PullLimits, UnpackBudget};
pub use puller::Puller;
pub use reference::{ImageLookup, ImageName};
pub use registry::Registries;
pub use source::ImageSource;
pub use store::{FsUsage, ImageStore};
