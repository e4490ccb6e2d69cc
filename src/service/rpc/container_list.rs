use crate::cri;

use crate::service::owners::objects::{labels_match, Container};
use crate::service::pod_service::PodService;

impl PodService {
    pub fn list_containers(&self, filter: Option<&cri::ContainerFilter>) -> Vec<Container> {
        let ids: Vec<_> = self.registry.read().containers.keys().cloned().collect();
        let mut out: Vec<Container> = ids
            .iter()
            .filter_map(|id| self.registry.refresh(id))
            .filter(|c| match filter {
                None => true,
                Some(f) => {
                    (f.id.is_empty() || c.meta.id.as_str().starts_with(&f.id))
                        && (f.pod_sandbox_id.is_empty() || c.meta.sandbox_id.as_str().starts_with(&f.pod_sandbox_id))
                        && f.state.as_ref().is_none_or(|s| s.state == c.status.state.to_cri() as i32)
                        && labels_match(&c.meta.config.labels, &f.label_selector)
                }
            })
            .collect();
        out.sort_by_key(|c| c.meta.created_at);
        out
    }
}
