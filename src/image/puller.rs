//! Pulls from registries, one download per reference however many callers ask for it. The
//! download runs as its own task, so a caller that goes away while others wait does not end
//! it; once the last one has gone it is abandoned (kubelet pulls one image at a time, and
//! a pull nobody waits for would hold the node's next ones).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::{BoxFuture, FutureExt, Shared};
use oci_client::secrets::RegistryAuth;
use tokio_util::sync::CancellationToken;

use crate::model::image::ImageId;

use super::error::ImageError;
use super::pull::store_image;
use super::reference::ImageName;
use super::registry::Registries;
use super::store::ImageStore;

type SharedPull = Shared<BoxFuture<'static, Result<ImageId, Arc<ImageError>>>>;

/// A download under way: its result, the callers waiting for it, and the switch that ends
/// it when none is left.
struct Inflight {
    shared: SharedPull,
    waiters: usize,
    abandon: CancellationToken,
    /// Tells this download from a later one of the same reference.
    generation: u64,
}

/// Pulls from registries; concurrent pulls of one reference share one download.
pub struct Puller {
    store: Arc<ImageStore>,
    registries: Arc<Registries>,
    max_downloads: usize,
    inflight: Mutex<HashMap<String, Inflight>>,
    generations: std::sync::atomic::AtomicU64,
}

/// One caller's wait; dropped when it has its answer or goes away.
struct Waiting<'a> {
    puller: &'a Puller,
    key: String,
    generation: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut inflight = self.puller.inflight.lock().unwrap_or_else(|p| p.into_inner());
        let Entry::Occupied(mut entry) = inflight.entry(self.key.clone()) else { return };
        if entry.get().generation != self.generation {
            return;
        }
        entry.get_mut().waiters -= 1;
        if entry.get().waiters == 0 {
            // Unlisted at once, so a caller that comes next starts afresh.
            entry.remove().abandon.cancel();
        }
    }
}

impl Puller {
    pub fn new(store: Arc<ImageStore>, registries: Arc<Registries>, max_downloads: usize) -> Self {
        Puller { store, registries, max_downloads, inflight: Mutex::default(), generations: Default::default() }
    }

    /// Pulls `name`, joining the download of another caller of the same reference.
    pub async fn pull(self: &Arc<Self>, name: ImageName, auth: RegistryAuth) -> Result<ImageId, Arc<ImageError>> {
        let key = name.to_string();
        let (shared, generation) = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            let entry = match inflight.entry(key.clone()) {
                Entry::Occupied(e) => {
                    tracing::info!(image = %key, "joining a pull already in progress");
                    e.into_mut()
                }
                Entry::Vacant(v) => v.insert(self.start(name, auth)),
            };
            entry.waiters += 1;
            (entry.shared.clone(), entry.generation)
        };
        let _waiting = Waiting { puller: self, key, generation };
        shared.await
    }

    fn start(self: &Arc<Self>, name: ImageName, auth: RegistryAuth) -> Inflight {
        let generation = self.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let abandon = CancellationToken::new();
        let (this, token) = (self.clone(), abandon.clone());
        let task = tokio::spawn(async move {
            let key = name.to_string();
            let result = tokio::select! {
                result = this.pull_with_retry(&name, auth) => result,
                () = token.cancelled() => {
                    tracing::info!(image = %key, "pull abandoned: no caller waits for it any more");
                    Err(ImageError::Abandoned { image: key.clone() })
                }
            };
            let mut inflight = this.inflight.lock().unwrap_or_else(|p| p.into_inner());
            if inflight.get(&key).is_some_and(|e| e.generation == generation) {
                inflight.remove(&key);
            }
            result.map_err(Arc::new)
        });
        let shared = task
            .map(|joined| joined.unwrap_or_else(|e| Err(Arc::new(ImageError::Task(e.to_string())))))
            .boxed()
            .shared();
        Inflight { shared, waiters: 0, abandon, generation }
    }

    async fn pull_with_retry(&self, name: &ImageName, auth: RegistryAuth) -> Result<ImageId, ImageError> {
        let started = Instant::now();
        tracing::info!(image = %name, "pulling image");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (source, top, top_digest) = self.registries.open(name, auth.clone()).await?;
            let limits = self.registries.limits().clone();
            match store_image(&self.store, &source, name, top, top_digest, self.max_downloads, &limits).await {
                // A concurrent removal took a shared layer between unpack and commit.
                Err(ImageError::LayerVanished(layer)) if attempt < 3 => {
                    tracing::warn!(image = %name, %layer, "layer removed concurrently, pulling again");
                }
                Err(e) => {
                    tracing::warn!(image = %name, error = %e, "pull failed");
                    return Err(e);
                }
                Ok(id) => {
                    tracing::info!(image = %name, %id, elapsed_ms = started.elapsed().as_millis() as u64, "image pulled");
                    return Ok(id);
                }
            }
        }
    }
}
