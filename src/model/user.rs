//! The identities a container's first process runs as, once resolved (policy::user).

/// The identities the container's first process starts with. `additional_gids` lists the
/// primary gid first, then the other groups in ascending order (what `process.user`
/// carries and ContainerStatus reports).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResolvedUser {
    pub uid: u32,
    pub gid: u32,
    pub additional_gids: Vec<u32>,
}
