//! What a pod sandbox is made of on the host: namespaces pinned by bind mounts (no pause
//! image), a PID-namespace holder when the pod shares one, the pod's /dev/shm tmpfs, and
//! its hostname, hosts and resolv.conf files; and the host side of volumes that propagate.

mod files;
mod idmap;
mod namespaces;
mod propagation;
mod tmpfs;

pub use files::write_pod_files;
pub use idmap::{bind_mapped, check as check_idmap};
pub use namespaces::{create, helper_main, holders_of, release, stop_holder, NsRequest, UserNsRequest, HELPER_COMMAND};
pub use propagation::{ensure_shared, Shared};
pub use tmpfs::{mount_tmpfs, unmount};
