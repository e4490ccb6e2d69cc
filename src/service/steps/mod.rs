//! Steps several calls share: a pod's namespaces and cgroup parent, a container's bundle, its
//! image's layers and image volumes, the image lookup, the NRI review of a memory plan, CRIU
//! and a checkpoint's restore, undo steps and spans.

pub(in crate::service) mod bundle;
pub(in crate::service) mod criu;
pub(in crate::service) mod image_lookup;
pub(in crate::service) mod image_volumes;
pub(in crate::service) mod layers;
pub(in crate::service) mod monitor_cgroup;
pub(in crate::service) mod plan_review;
pub(in crate::service) mod pod_cgroup;
pub(in crate::service) mod pod_namespaces;
pub(in crate::service) mod restore;
pub(in crate::service) mod rollback;
pub(in crate::service) mod span;
