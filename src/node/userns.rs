//! Whether pods may have user namespaces here: the kernel lets the daemon create them, its
//! overlayfs stacks id-mapped layers (5.19), and the image store's filesystem takes
//! id-mapped mounts (tried for real, as a pod would use it).

use std::path::Path;

use crate::model::node::{KernelVersion, UsernsSupport};
use crate::model::userns::{IdRange, PodUserns};
use crate::sandbox::{self, NsRequest, UserNsRequest};

/// Ids of the throwaway namespace the probe maps (any unused range works).
const PROBE_RANGE: IdRange = IdRange { container_id: 0, host_id: 3_900_000_000, length: 65536 };

pub fn probe(kernel: Option<KernelVersion>, layers_dir: &Path, work_dir: &Path) -> UsernsSupport {
    let unsupported = |detail: String| UsernsSupport { supported: false, detail };
    match kernel {
        Some(k) if k.at_least(5, 19) => {}
        Some(k) => {
            return unsupported(format!("kernel {}.{}: overlayfs takes id-mapped layers from 5.19", k.major, k.minor))
        }
        None => return unsupported("unknown kernel version".into()),
    }
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    if max.trim() == "0" {
        return unsupported("user.max_user_namespaces is 0".into());
    }
    match try_idmap(layers_dir, work_dir) {
        Ok(()) => {
            UsernsSupport { supported: true, detail: format!("id-mapped mounts work on {}", layers_dir.display()) }
        }
        Err(why) => unsupported(why),
    }
}

fn try_idmap(layers_dir: &Path, work_dir: &Path) -> Result<(), String> {
    crate::store::private::create_dir_all(layers_dir).map_err(|e| format!("{}: {e}", layers_dir.display()))?;
    let dir = tempfile::tempdir_in(work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;
    let pin = dir.path().join("user");
    let request = NsRequest {
        user: Some(UserNsRequest { path: pin.clone(), map: PodUserns { uids: PROBE_RANGE, gids: PROBE_RANGE } }),
        ..NsRequest::default()
    };
    sandbox::create(&request, dir.path()).map_err(|e| format!("creating a user namespace: {e}"))?;
    let result = std::fs::File::open(&pin).map_err(|e| e.to_string()).and_then(|userns| {
        sandbox::check_idmap(layers_dir, &userns)
            .map_err(|e| format!("id-mapped mount of {}: {e}", layers_dir.display()))
    });
    sandbox::release(&request, None);
    result
}
