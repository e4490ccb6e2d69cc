//! The CRI calls, one file per RPC (`sandbox_*`, `container_*`, `image_*`, `runtime_*`, the
//! statistics): each checks its request and orchestrates the owners and steps.

pub(in crate::service) mod container_checkpoint;
pub(in crate::service) mod container_create;
pub(in crate::service) mod container_exec_sync;
pub(in crate::service) mod container_list;
pub(in crate::service) mod container_remove;
pub(in crate::service) mod container_reopen_log;
pub(in crate::service) mod container_start;
pub(in crate::service) mod container_status;
pub(in crate::service) mod container_stop;
pub(in crate::service) mod container_update;
pub(in crate::service) mod cri_metrics;
pub(in crate::service) mod image_fs_info;
pub(in crate::service) mod image_list;
pub(in crate::service) mod image_pull;
pub(in crate::service) mod image_remove;
pub(in crate::service) mod image_status;
pub(in crate::service) mod runtime_config;
pub(in crate::service) mod runtime_status;
pub(in crate::service) mod runtime_version;
pub(in crate::service) mod sandbox_list;
pub(in crate::service) mod sandbox_remove;
pub(in crate::service) mod sandbox_run;
pub(in crate::service) mod sandbox_status;
pub(in crate::service) mod sandbox_stop;
pub(in crate::service) mod sandbox_update;
pub(in crate::service) mod stats;
