//! User namespaces (`NamespaceOption.userns_options`): what a pod asks for, checked against
//! the CRI's rules. A pod either stays in the host's user namespace (NODE) or gets one of its
//! own (POD) with exactly one uid and one gid range that maps container id 0.

use crate::cri;
pub use crate::model::userns::{IdRange, PodUserns};

use super::PolicyError;

/// The pod's user namespace from its sandbox config: None for the host's.
pub fn for_pod(options: Option<&cri::UserNamespace>) -> Result<Option<PodUserns>, PolicyError> {
    let Some(options) = options else { return Ok(None) };
    let invalid = |why: String| Err(PolicyError::Invalid(format!("user namespace: {why}")));
    match cri::NamespaceMode::try_from(options.mode) {
        Ok(cri::NamespaceMode::Node) => {
            if options.uids.is_empty() && options.gids.is_empty() {
                Ok(None)
            } else {
                invalid("id mappings are only for mode POD; NODE uses the host's".into())
            }
        }
        Ok(cri::NamespaceMode::Pod) => {
            let (uids, gids) = match (options.uids.as_slice(), options.gids.as_slice()) {
                ([u], [g]) => (range("uid", u)?, range("gid", g)?),
                (u, g) => {
                    return invalid(format!(
                        "exactly one uid and one gid mapping are supported, got {} and {}",
                        u.len(),
                        g.len()
                    ))
                }
            };
            Ok(Some(PodUserns { uids, gids }))
        }
        Ok(mode @ (cri::NamespaceMode::Container | cri::NamespaceMode::Target)) => {
            invalid(format!("mode {} is not supported: a pod's containers share the pod's", mode.as_str_name()))
        }
        Err(_) => invalid(format!("unknown mode {}", options.mode)),
    }
}

fn range(kind: &str, m: &cri::IdMapping) -> Result<IdRange, PolicyError> {
    let invalid = |why: String| Err(PolicyError::Invalid(format!("user namespace {kind} mapping: {why}")));
    if m.length == 0 {
        return invalid("the length is 0".into());
    }
    if m.container_id != 0 {
        return invalid(format!("container id 0 must be mapped; the range starts at {}", m.container_id));
    }
    if m.host_id == 0 {
        return invalid("the range would make the container's root the host's root".into());
    }
    if u64::from(m.host_id) + u64::from(m.length) > u64::from(u32::MAX) {
        return invalid(format!("host ids {}+{} run past the largest id", m.host_id, m.length));
    }
    Ok(IdRange { container_id: m.container_id, host_id: m.host_id, length: m.length })
}

/// A container shares its pod's user namespace; its own options, when it gives any, must say
/// the same as the pod's.
pub fn check_container(pod: Option<&PodUserns>, options: Option<&cri::UserNamespace>) -> Result<(), PolicyError> {
    let Some(options) = options else { return Ok(()) };
    let asked = for_pod(Some(options))?;
    if asked.as_ref() != pod {
        return Err(PolicyError::Invalid(format!(
            "the container's user namespace ({}) differs from its pod's ({})",
            describe(asked.as_ref()),
            describe(pod)
        )));
    }
    Ok(())
}

fn describe(userns: Option<&PodUserns>) -> String {
    match userns {
        None => "the host's".into(),
        Some(u) => format!(
            "uids {}:{}:{}, gids {}:{}:{}",
            u.uids.container_id, u.uids.host_id, u.uids.length, u.gids.container_id, u.gids.host_id, u.gids.length
        ),
    }
}

/// One OCI uid or gid mapping line of a range.
pub(crate) fn oci_mapping(range: &IdRange) -> oci_spec::runtime::LinuxIdMapping {
    oci_spec::runtime::LinuxIdMappingBuilder::default()
        .container_id(range.container_id)
        .host_id(range.host_id)
        .size(range.length)
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(container_id: u32, host_id: u32, length: u32) -> cri::IdMapping {
        cri::IdMapping { container_id, host_id, length }
    }

    fn options(mode: cri::NamespaceMode, uids: Vec<cri::IdMapping>, gids: Vec<cri::IdMapping>) -> cri::UserNamespace {
        cri::UserNamespace { mode: mode as i32, uids, gids }
    }

    #[test]
    fn pod_user_namespaces() {
        use cri::NamespaceMode::*;
        let one = || vec![mapping(0, 65536, 65536)];
        let cases: Vec<(cri::UserNamespace, Result<Option<u32>, &str>)> = vec![
            (options(Node, vec![], vec![]), Ok(None)),
            (options(Node, one(), one()), Err("only for mode POD")),
            (options(Pod, one(), one()), Ok(Some(65536))),
            (options(Pod, vec![mapping(0, 1000, 100000), mapping(0, 2000, 100000)], one()), Err("exactly one")),
            (options(Pod, vec![], vec![]), Err("exactly one")),
            (options(Pod, one(), vec![]), Err("exactly one")),
            (options(Pod, vec![mapping(1, 1000, 100000)], one()), Err("container id 0 must be mapped")),
            (options(Pod, one(), vec![mapping(0, 1000, 0)]), Err("length is 0")),
            (options(Pod, vec![mapping(0, 0, 65536)], one()), Err("host's root")),
            (options(Pod, vec![mapping(0, u32::MAX - 10, 65536)], one()), Err("run past")),
            (options(Container, vec![], vec![]), Err("CONTAINER is not supported")),
            (options(Target, vec![], vec![]), Err("TARGET is not supported")),
            (cri::UserNamespace { mode: 9, ..Default::default() }, Err("unknown mode 9")),
        ];
        for (request, want) in cases {
            let got = for_pod(Some(&request));
            match (got, want) {
                (Ok(got), Ok(host)) => assert_eq!(got.map(|u| u.uids.host_id), host, "{request:?}"),
                (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{request:?}: {e}"),
                (got, want) => panic!("{request:?}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(for_pod(None).unwrap(), None);
    }

    #[test]
    fn ranges() {
        let r = IdRange { container_id: 0, host_id: 1000, length: 10 };
        assert_eq!(r.host_of(0), Some(1000));
        assert_eq!(r.host_of(9), Some(1009));
        assert_eq!(r.host_of(10), None);
        assert_eq!(r.map_line(), "0 1000 10\n");
    }

    #[test]
    fn containers_follow_their_pod() {
        let pod_options = options(cri::NamespaceMode::Pod, vec![mapping(0, 1000, 100)], vec![mapping(0, 1000, 100)]);
        let pod = for_pod(Some(&pod_options)).unwrap();
        assert!(check_container(pod.as_ref(), None).is_ok());
        assert!(check_container(pod.as_ref(), Some(&pod_options)).is_ok());
        let other = options(cri::NamespaceMode::Pod, vec![mapping(0, 2000, 100)], vec![mapping(0, 2000, 100)]);
        assert!(check_container(pod.as_ref(), Some(&other)).unwrap_err().to_string().contains("differs"));
        let node = options(cri::NamespaceMode::Node, vec![], vec![]);
        assert!(check_container(pod.as_ref(), Some(&node)).is_err());
        assert!(check_container(None, Some(&node)).is_ok());
    }
}
