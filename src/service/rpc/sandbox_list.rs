use crate::cri;

use crate::service::owners::objects::{labels_match, Sandbox};
use crate::service::pod_service::PodService;

impl PodService {
    pub fn list_sandboxes(&self, filter: Option<&cri::PodSandboxFilter>) -> Vec<Sandbox> {
        let state = self.registry.read();
        let mut out: Vec<Sandbox> = state
            .sandboxes
            .values()
            .filter(|s| match filter {
                None => true,
                Some(f) => {
                    (f.id.is_empty() || s.meta.id.as_str().starts_with(&f.id))
                        && f.state.as_ref().is_none_or(|st| {
                            let ready = st.state == cri::PodSandboxState::SandboxReady as i32;
                            ready == (s.status.state == crate::model::sandbox::SandboxState::Ready)
                        })
                        && labels_match(&s.meta.config.labels, &f.label_selector)
                }
            })
            .cloned()
            .collect();
        out.sort_by_key(|s| s.meta.created_at);
        out
    }
}
