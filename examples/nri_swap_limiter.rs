//! An NRI plugin for swapcri (or any NRI runtime): containers whose pod or container
//! annotations name a swap limit or a memory.high get them at creation.
//!
//!   nri.swapcri.io/swap-max: <bytes>      the container's memory.swap.max
//!   nri.swapcri.io/memory-high: <bytes>   the container's memory.high
//!
//! Container annotations win over the pod's. swapcri's swap policy still decides: a limit
//! above the LimitedSwap value, or swap for a Guaranteed or critical pod, fails the create.
//! Install it as `/opt/nri/plugins/10-swap-limiter` (started by the runtime), or run it
//! with `--socket /var/run/nri/nri.sock` to connect to a running runtime.

use std::sync::Arc;

use async_trait::async_trait;
use swapcri::nri::api;
use swapcri::nri::stub::{Handler, Stub};

const SWAP_MAX: &str = "nri.swapcri.io/swap-max";
const MEMORY_HIGH: &str = "nri.swapcri.io/memory-high";

struct SwapLimiter;

#[async_trait]
impl Handler for SwapLimiter {
    async fn configure(&self, _config: &str) -> Result<u32, String> {
        // CreateContainer only.
        Ok(1 << (api::Event::CreateContainer as u32 - 1))
    }

    async fn create_container(
        &self,
        pod: api::PodSandbox,
        container: api::Container,
    ) -> Result<api::CreateContainerResponse, String> {
        let find = |key: &str| container.annotations.get(key).or_else(|| pod.annotations.get(key)).cloned();
        let mut unified = std::collections::HashMap::new();
        for (key, file) in [(SWAP_MAX, "memory.swap.max"), (MEMORY_HIGH, "memory.high")] {
            if let Some(value) = find(key) {
                if value != "max" && value.parse::<u64>().is_err() {
                    return Err(format!("{key}: {value:?} is not bytes or max"));
                }
                unified.insert(file.to_string(), value);
            }
        }
        if unified.is_empty() {
            return Ok(Default::default());
        }
        eprintln!("swap-limiter: {} ({}): {unified:?}", container.name, container.id);
        let resources = api::LinuxResources { unified, ..Default::default() };
        let linux = api::LinuxContainerAdjustment { resources: Some(resources), ..Default::default() };
        Ok(api::CreateContainerResponse {
            adjust: Some(api::ContainerAdjustment { linux: Some(linux), ..Default::default() }),
            ..Default::default()
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stub = match args.iter().position(|a| a == "--socket").and_then(|i| args.get(i + 1)) {
        Some(socket) => Stub::connect(socket.as_ref(), "10", "swap-limiter", Arc::new(SwapLimiter)).await,
        None => Stub::from_env(Arc::new(SwapLimiter)).await,
    };
    match stub {
        Ok(stub) => eprintln!("swap-limiter: disconnected: {}", stub.closed().await),
        Err(e) => {
            eprintln!("swap-limiter: {e}");
            std::process::exit(1);
        }
    }
}
