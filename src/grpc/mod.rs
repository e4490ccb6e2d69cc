//! gRPC adapters: convert, delegate to the services, convert back.

pub mod convert;
pub mod convert_metrics;
pub mod convert_pods;
pub mod convert_stats;
mod deadline;
mod image;
mod metrics_layer;
mod runtime;
mod stream;

pub use deadline::DeadlineLayer;
pub use image::ImageApi;
pub use metrics_layer::GrpcMetricsLayer;
pub use runtime::RuntimeApi;
