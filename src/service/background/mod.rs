//! What runs beside the calls, for the daemon's life: the exit watch (`exit_watch`, which keeps
//! live containers' records current), the
//! PID-namespace holder watch (`sandbox_watch`), the writable-layer walk (`writable_refresh`),
//! the swap supervisor's thrash watch and offload (started here, in `swap/`), the NRI exit
//! relay (`nri_relay`); and, before them, the start-up recovery (`recovery`).

pub(in crate::service) mod exit_watch;
pub(in crate::service) mod nri_relay;
pub(in crate::service) mod process_exit;
pub(in crate::service) mod recovery;
pub(in crate::service) mod sandbox_watch;
pub(in crate::service) mod writable_refresh;

use std::sync::Arc;

use crate::service::pod_service::PodService;

impl PodService {
    /// Starts the loops that run for the daemon's life (after recovery).
    pub fn start_background(self: &Arc<Self>) {
        tokio::spawn(self.clone().watch_exits());
        tokio::spawn(self.clone().watch_holders());
        tokio::spawn(self.clone().refresh_writable_usage());
        crate::swap::start(&self.swap, self.clone());
    }

    /// NRI, when `[nri] enable` is set: its socket and pre-installed plugins, and the relay of
    /// exits to them. Returns NRI for the shutdown.
    pub async fn start_nri(self: &Arc<Self>) -> std::io::Result<Arc<crate::nri::Nri>> {
        if self.nri.enabled() {
            let domain: std::sync::Weak<dyn crate::nri::Domain> = Arc::downgrade(self) as _;
            self.nri.start(domain).await?;
            tokio::spawn(self.clone().relay_exits_to_nri());
        }
        Ok(self.nri.clone())
    }
}
