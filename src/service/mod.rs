//! The typed services behind the gRPC adapters. `PodService` (pods and containers),
//! `ImageService`, `RuntimeService` and `StreamingService` are at the top; the rest is grouped
//! by role:
//! - `rpc/`: one file per CRI call;
//! - `owners/`: the records, runtime handlers, memory plans, cgroup reads and node operations
//!   the calls use;
//! - `steps/`: what several calls share (pod namespaces and cgroups, bundles, layers, image
//!   volumes, image lookup, the NRI review of a memory plan, rollback);
//! - `background/`: the exit watch, the holder watch, the writable-layer walk, the NRI exit
//!   relay, start-up recovery;
//! - `adapters/`: what NRI, the swap supervisor and the metrics see of the pods.

pub(in crate::service) mod adapters;
pub(in crate::service) mod background;
mod image_service;
pub(in crate::service) mod owners;
mod pod_service;
pub(in crate::service) mod rpc;
mod runtime_service;
pub(in crate::service) mod steps;
mod streaming_service;
#[cfg(test)]
mod tests;

pub use image_service::{ImageService, ImageUsers, ImageView};
pub use owners::events::{Event, EventKind};
pub use owners::host::{Host, NodeHost};
pub use owners::objects::{Container, Sandbox};
pub use owners::quarantine;
pub use owners::runtimes::{HandlerCapabilities, RuntimeHandler, Runtimes};
pub use owners::samples::{ContainerSample, PodSample, Sample};
pub use pod_service::PodService;
pub use rpc::cri_metrics::{ContainerMetrics, FsCapacity, PodMetrics};
pub use rpc::runtime_status::{Condition, RuntimeStatus};
pub use rpc::runtime_version::VersionInfo;
pub use rpc::sandbox_status::SandboxStatusView;
pub use runtime_service::RuntimeService;
pub use streaming_service::{StreamWants, StreamingService};
