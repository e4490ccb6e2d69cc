//! Checkpoint archives: the files CRI-O and containerd write for a checkpointed container
//! (checkpointctl reads them all), the writable layer's changes as a tar and a list of
//! deletions, and the archive written all or nothing.

pub mod archive;
pub mod criu;
pub mod layout;
pub mod restore;
pub mod rootfs_diff;
