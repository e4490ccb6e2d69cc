use crate::cri;

use crate::service::owners::objects::{labels_match, Container};
use crate::service::pod_service::PodService;

impl PodService {
    /// ListContainers: the records as they are kept, oldest first.
    pub fn list_containers(&self, filter: Option<&cri::ContainerFilter>) -> Vec<Container> {
        // From memory: the exit watch keeps live containers' records current.
        let state = self.registry.read();
        let mut out: Vec<Container> = state
            .containers
            .values()
            .filter(|c| match filter {
                None => true,
                Some(f) => {
                    (f.id.is_empty() || c.meta.id.as_str().starts_with(&f.id))
                        && (f.pod_sandbox_id.is_empty() || c.meta.sandbox_id.as_str().starts_with(&f.pod_sandbox_id))
                        && f.state.as_ref().is_none_or(|s| s.state == c.status.state.to_cri() as i32)
                        && labels_match(&c.meta.config.labels, &f.label_selector)
                }
            })
            .cloned()
            .collect();
        out.sort_by_key(|c| c.meta.created_at);
        out
    }
}
