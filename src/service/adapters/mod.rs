//! swapcri's pods as other subsystems see them: NRI's domain, the swap supervisor's `Pods`,
//! the metrics source.

pub(in crate::service) mod metrics_source;
pub(in crate::service) mod nri_domain;
pub(in crate::service) mod nri_stops;
pub(in crate::service) mod swap_pods;
