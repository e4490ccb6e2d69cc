//! OCI spec generation from CRI configs.

use std::collections::HashMap;

use oci_spec::runtime::LinuxNamespaceType;

use super::*;
use crate::model::node::CgroupMode;
use crate::model::user::ResolvedUser;
use crate::model::userns::IdRange;
use crate::model::userns::PodUserns;
use crate::policy::caps;

fn node(mode: CgroupMode) -> NodeFacts {
    NodeFacts {
        held_capabilities: caps::names_in_mask(0x1fffeffffff),
        min_oom_score_adj: 0,
        ..NodeFacts::fixture(mode)
    }
}

fn pod() -> PodContext {
    PodContext {
        hostname: "web-1".into(),
        net_ns: Some("/run/swapcri/sandboxes/s/ns/net".into()),
        ipc_ns: Some("/run/swapcri/sandboxes/s/ns/ipc".into()),
        uts_ns: Some("/run/swapcri/sandboxes/s/ns/uts".into()),
        pid_ns: Some("/proc/42/ns/pid".into()),
        shm: Some("/run/swapcri/sandboxes/s/shm".into()),
        hostname_file: "/run/swapcri/sandboxes/s/hostname".into(),
        hosts_file: "/run/swapcri/sandboxes/s/hosts".into(),
        resolv_file: "/run/swapcri/sandboxes/s/resolv.conf".into(),
        cgroup_parent: "/kubepods/burstable/pod123".into(),
        cgroup_layout: crate::model::cgroup_layout::Layout { driver: crate::config::CgroupDriver::Cgroupfs },
        sysctls: HashMap::from([("net.ipv4.ip_forward".to_string(), "1".to_string())]),
        userns: None,
    }
}

fn image() -> ImageDefaults {
    ImageDefaults {
        env: vec!["PATH=/bin".into(), "LANG=C".into()],
        entrypoint: vec!["/entry".into()],
        cmd: vec!["serve".into()],
        working_dir: "/app".into(),
        user: String::new(),
        stop_signal: String::new(),
    }
}

fn build_with(config: cri::ContainerConfig, mode: CgroupMode) -> Result<BuiltSpec, PolicyError> {
    build_in(config, mode, pod())
}

fn build_in(config: cri::ContainerConfig, mode: CgroupMode, pod: PodContext) -> Result<BuiltSpec, PolicyError> {
    build_with_plan(config, mode, pod, Default::default())
}

fn build_with_plan(
    config: cri::ContainerConfig,
    mode: CgroupMode,
    pod: PodContext,
    memory_unified: std::collections::BTreeMap<String, String>,
) -> Result<BuiltSpec, PolicyError> {
    build_on_node(config, mode, pod, memory_unified, |_| {})
}

fn build_on_node(
    config: cri::ContainerConfig,
    mode: CgroupMode,
    pod: PodContext,
    memory_unified: std::collections::BTreeMap<String, String>,
    adjust: impl FnOnce(&mut NodeFacts),
) -> Result<BuiltSpec, PolicyError> {
    let image = image();
    let input = ContainerInput {
        id: "c1",
        config: &config,
        pod: &pod,
        image: &image,
        user: ResolvedUser { uid: 0, gid: 0, additional_gids: vec![] },
        rootfs: "/rootfs".into(),
        devices: vec![],
        localhost_seccomp: None,
        target_pid_ns: None,
        memory_unified,
        recursive_read_only: true,
        idmap_mounts: true,
        allowed_annotations: &[],
    };
    let mut facts = node(mode);
    facts.noswap = crate::model::node::NoswapSupport {
        state: crate::model::node::NoswapState::Supported,
        decided_by: crate::model::node::DecidedBy::Config,
        detail: String::new(),
    };
    adjust(&mut facts);
    build(&input, &facts)
}

fn with_security(f: impl FnOnce(&mut cri::LinuxContainerSecurityContext)) -> cri::ContainerConfig {
    let mut security = cri::LinuxContainerSecurityContext::default();
    f(&mut security);
    cri::ContainerConfig {
        linux: Some(cri::LinuxContainerConfig { security_context: Some(security), ..Default::default() }),
        ..Default::default()
    }
}

#[test]
fn command_lines() {
    let cfg = |command: &[&str], args: &[&str]| cri::ContainerConfig {
        command: command.iter().map(|s| s.to_string()).collect(),
        args: args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let cases: [(cri::ContainerConfig, &[&str]); 4] = [
        (cfg(&[], &[]), &["/entry", "serve"]),
        (cfg(&[], &["debug"]), &["/entry", "debug"]),
        (cfg(&["/bin/sh"], &[]), &["/bin/sh"]),
        (cfg(&["/bin/sh"], &["-c", "true"]), &["/bin/sh", "-c", "true"]),
    ];
    for (config, expected) in cases {
        assert_eq!(command_line(&config, &image()).unwrap(), expected);
    }
    assert!(command_line(&cfg(&[], &[]), &ImageDefaults::default()).is_err());
}

#[test]
fn environment_overrides_by_name() {
    let config = cri::ContainerConfig {
        envs: vec![
            cri::KeyValue { key: "LANG".into(), value: "C.UTF-8".into() },
            cri::KeyValue { key: "X".into(), value: "1".into() },
        ],
        ..Default::default()
    };
    let env = environment(&config, &image(), "web-1");
    assert_eq!(env, vec!["PATH=/bin", "HOSTNAME=web-1", "LANG=C.UTF-8", "X=1"]);
}

#[test]
fn defaults_namespaces_mounts_and_cgroup() {
    let own_pid = with_security(|s| {
        s.namespace_options =
            Some(cri::NamespaceOption { pid: cri::NamespaceMode::Container as i32, ..Default::default() })
    });
    let built = build_with(own_pid, CgroupMode::Hybrid).unwrap();
    let spec = built.spec;
    let process = spec.process().as_ref().unwrap();
    assert_eq!(process.cwd(), &PathBuf::from("/app"));
    assert_eq!(process.capabilities().as_ref().unwrap().bounding().as_ref().unwrap().len(), caps::DEFAULT.len());
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.cgroups_path().as_ref().unwrap(), &PathBuf::from("/kubepods/burstable/pod123/c1"));
    let ns = linux.namespaces().as_ref().unwrap();
    let find = |t| ns.iter().find(|n| n.typ() == t);
    assert!(find(LinuxNamespaceType::Pid).unwrap().path().is_none(), "own PID namespace");
    assert_eq!(
        find(LinuxNamespaceType::Network).unwrap().path().as_ref().unwrap(),
        &PathBuf::from("/run/swapcri/sandboxes/s/ns/net")
    );
    assert!(find(LinuxNamespaceType::Cgroup).is_none(), "no cgroup namespace on a hybrid host");
    let mounts = spec.mounts().as_ref().unwrap();
    let shm = mounts.iter().find(|m| m.destination() == Path::new("/dev/shm")).unwrap();
    assert_eq!(shm.source().as_ref().unwrap(), &PathBuf::from("/run/swapcri/sandboxes/s/shm"));
    assert!(linux.seccomp().is_none(), "no profile asked, none applied");
    assert!(!linux.masked_paths().as_ref().unwrap().is_empty());
    assert_eq!(linux.sysctl().as_ref().unwrap()["net.ipv4.ip_forward"], "1");
}

#[test]
fn request_mounts_win_over_pod_files() {
    let config = cri::ContainerConfig {
        mounts: vec![cri::Mount {
            container_path: "/etc/hosts".into(),
            host_path: "/var/lib/kubelet/pods/x/etc-hosts".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let spec = build_with(config, CgroupMode::Unified).unwrap().spec;
    let hosts: Vec<_> =
        spec.mounts().as_ref().unwrap().iter().filter(|m| m.destination() == Path::new("/etc/hosts")).collect();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].source().as_ref().unwrap(), &PathBuf::from("/var/lib/kubelet/pods/x/etc-hosts"));
}

#[test]
fn unified_carries_the_memory_plan_on_v2_and_is_dropped_with_a_warning_on_v1() {
    let config = cri::ContainerConfig {
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 1 << 30,
                cpu_shares: 512,
                unified: HashMap::from([
                    ("memory.swap.max".to_string(), "0".to_string()),
                    ("memory.high".to_string(), "0".to_string()),
                    ("cpu.weight.nice".to_string(), "5".to_string()),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let plan = [("memory.swap.max".to_string(), "536870912".to_string())];
    let build_mode = |mode| build_with_plan(config.clone(), mode, pod(), plan.clone().into()).unwrap();
    let v2 = build_mode(CgroupMode::Unified);
    let res = v2.spec.linux().as_ref().unwrap().resources().as_ref().unwrap().clone();
    let unified = res.unified().as_ref().unwrap();
    assert_eq!(unified.len(), 2, "kubelet's memory keys replaced by the plan's: {unified:?}");
    assert_eq!(unified["memory.swap.max"], "536870912");
    assert_eq!(unified["cpu.weight.nice"], "5");
    assert_eq!(res.memory().as_ref().unwrap().limit(), Some(1 << 30));
    assert_eq!(res.memory().as_ref().unwrap().swap(), None, "OCI memory.swap is memory+swap: never set");
    assert_eq!(res.memory().as_ref().unwrap().reservation(), None, "runc maps it to memory.low: never set");
    assert_eq!(res.cpu().as_ref().unwrap().shares(), Some(512));
    assert!(v2.warnings.is_empty());
    let v1 = build_mode(CgroupMode::Hybrid);
    assert!(v1.spec.linux().as_ref().unwrap().resources().as_ref().unwrap().unified().is_none());
    assert!(v1.warnings[0].contains("memory.swap.max"), "{:?}", v1.warnings);
}

#[test]
fn security_settings() {
    use cri::security_profile::ProfileType;
    let profile =
        |t: ProfileType| Some(cri::SecurityProfile { profile_type: t as i32, localhost_ref: "localhost/p".into() });
    // RuntimeDefault seccomp applies our profile.
    let spec = build_with(with_security(|s| s.seccomp = profile(ProfileType::RuntimeDefault)), CgroupMode::Hybrid)
        .unwrap()
        .spec;
    assert!(spec.linux().as_ref().unwrap().seccomp().is_some());
    // A Localhost profile that was not loaded is an error, never silently skipped.
    assert!(build_with(with_security(|s| s.seccomp = profile(ProfileType::Localhost)), CgroupMode::Hybrid).is_err());
    // AppArmor Localhost on a node without AppArmor: refused.
    let err =
        build_with(with_security(|s| s.apparmor = profile(ProfileType::Localhost)), CgroupMode::Hybrid).unwrap_err();
    assert!(matches!(err, PolicyError::Unsupported(_)));
    // Privileged: the daemon's capabilities, no seccomp, no masked paths, all devices.
    let spec = build_with(
        with_security(|s| {
            s.privileged = true;
            s.seccomp = profile(ProfileType::RuntimeDefault)
        }),
        CgroupMode::Hybrid,
    )
    .unwrap()
    .spec;
    let process = spec.process().as_ref().unwrap();
    assert_eq!(
        process.capabilities().as_ref().unwrap().bounding().as_ref().unwrap().len(),
        node(CgroupMode::Hybrid).held_capabilities.len()
    );
    let linux = spec.linux().as_ref().unwrap();
    assert!(linux.seccomp().is_none());
    assert!(linux.masked_paths().as_ref().unwrap().is_empty());
    // Read-only root filesystem and no_new_privs.
    let spec = build_with(
        with_security(|s| {
            s.readonly_rootfs = true;
            s.no_new_privs = true
        }),
        CgroupMode::Hybrid,
    )
    .unwrap()
    .spec;
    assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(true));
    assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), Some(true));
    // The pod's PID namespace (POD is the CRI default) and one the pod does not have.
    let shared = build_with(cri::ContainerConfig::default(), CgroupMode::Hybrid).unwrap().spec;
    let ns = shared.linux().as_ref().unwrap().namespaces().as_ref().unwrap().clone();
    assert_eq!(
        ns.iter().find(|n| n.typ() == LinuxNamespaceType::Pid).unwrap().path().as_ref().unwrap(),
        &PathBuf::from("/proc/42/ns/pid")
    );
    let no_pod_pid = PodContext { pid_ns: None, ..pod() };
    let err = build_in(cri::ContainerConfig::default(), CgroupMode::Hybrid, no_pod_pid).unwrap_err();
    assert!(matches!(err, PolicyError::Unsupported(_)));
}

#[test]
fn oom_score_adj_is_clamped_to_what_the_daemon_may_set() {
    let config = cri::ContainerConfig {
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources { oom_score_adj: -997, ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let built = build_with(config, CgroupMode::Hybrid).unwrap();
    assert_eq!(built.spec.process().as_ref().unwrap().oom_score_adj(), Some(0));
    assert!(built.warnings.iter().any(|w| w.contains("-997")));
}

fn userns_pod(host_network: bool) -> PodContext {
    let range = IdRange { container_id: 0, host_id: 65536, length: 65536 };
    let mut p = pod();
    p.userns = Some(("/run/swapcri/sandboxes/s/ns/user".into(), PodUserns { uids: range, gids: range }));
    if host_network {
        p.net_ns = None;
        p.uts_ns = None;
    }
    p
}

fn mount_at<'a>(spec: &'a Spec, at: &str) -> &'a oci_spec::runtime::Mount {
    spec.mounts().as_ref().unwrap().iter().find(|m| m.destination() == Path::new(at)).unwrap()
}

#[test]
fn a_pod_user_namespace_is_joined_and_mapped() {
    let built = build_in(cri::ContainerConfig::default(), CgroupMode::Unified, userns_pod(false)).unwrap();
    let linux = built.spec.linux().as_ref().unwrap();
    let user = linux.namespaces().as_ref().unwrap().iter().find(|n| n.typ() == LinuxNamespaceType::User).unwrap();
    assert_eq!(user.path().as_deref(), Some(Path::new("/run/swapcri/sandboxes/s/ns/user")));
    let uids = linux.uid_mappings().as_ref().unwrap();
    assert_eq!((uids[0].container_id(), uids[0].host_id(), uids[0].size()), (0, 65536, 65536));
    assert_eq!(linux.gid_mappings().as_ref().unwrap().len(), 1);
    // The kernel refuses noswap outside the initial user namespace.
    let dev = mount_at(&built.spec, "/dev").options().clone().unwrap();
    assert!(!dev.contains(&"noswap".to_string()), "{dev:?}");
    assert_eq!(mount_at(&built.spec, "/sys").typ().as_deref(), Some("sysfs"));

    // Without one: no user namespace, no mappings, noswap where the node has it.
    let plain = build_in(cri::ContainerConfig::default(), CgroupMode::Unified, pod()).unwrap();
    let linux = plain.spec.linux().as_ref().unwrap();
    assert!(!linux.namespaces().as_ref().unwrap().iter().any(|n| n.typ() == LinuxNamespaceType::User));
    assert!(linux.uid_mappings().is_none());
    assert!(mount_at(&plain.spec, "/dev").options().as_ref().unwrap().contains(&"noswap".to_string()));
}

#[test]
fn a_user_namespace_on_the_host_network_binds_the_hosts_sys() {
    let built = build_in(cri::ContainerConfig::default(), CgroupMode::Unified, userns_pod(true)).unwrap();
    let sys = mount_at(&built.spec, "/sys");
    assert_eq!(sys.source().as_deref(), Some(Path::new("/sys")));
    let options = sys.options().clone().unwrap();
    for o in ["rbind", "ro", "nosuid", "noexec", "nodev"] {
        assert!(options.contains(&o.to_string()), "{o} in {options:?}");
    }
    let linux = built.spec.linux().as_ref().unwrap();
    assert!(!linux.namespaces().as_ref().unwrap().iter().any(|n| n.typ() == LinuxNamespaceType::Network));
}

#[test]
fn a_container_cannot_leave_its_pods_user_namespace() {
    let mut config = with_security(|s| {
        s.namespace_options = Some(cri::NamespaceOption {
            userns_options: Some(cri::UserNamespace { mode: cri::NamespaceMode::Node as i32, ..Default::default() }),
            ..Default::default()
        })
    });
    let err = build_in(config.clone(), CgroupMode::Unified, userns_pod(false)).unwrap_err();
    assert!(err.to_string().contains("differs from its pod's"), "{err}");
    config.linux = None;
    assert!(build_in(config, CgroupMode::Unified, userns_pod(false)).is_ok());
}

#[test]
fn id_mapped_volumes_carry_their_mappings() {
    let map = |host_id| vec![cri::IdMapping { container_id: 0, host_id, length: 65536 }];
    let mut config = cri::ContainerConfig {
        mounts: vec![cri::Mount {
            container_path: "/data".into(),
            host_path: "/srv/data".into(),
            uid_mappings: map(65536),
            gid_mappings: map(65536),
            ..Default::default()
        }],
        ..Default::default()
    };
    let built = build_in(config.clone(), CgroupMode::Unified, userns_pod(false)).unwrap();
    let data = mount_at(&built.spec, "/data");
    assert_eq!(data.uid_mappings().as_ref().unwrap()[0].host_id(), 65536);
    assert_eq!(data.gid_mappings().as_ref().unwrap()[0].size(), 65536);
    config.mounts[0].gid_mappings.clear();
    let err = build_in(config, CgroupMode::Unified, userns_pod(false)).unwrap_err();
    assert!(err.to_string().contains("exactly one non-empty gid mapping"), "{err}");
}

#[test]
#[allow(deprecated)] // the deprecated string field is part of what is tested
fn apparmor_requests_by_node() {
    use cri::security_profile::ProfileType::{self, *};
    let security = |structured: Option<ProfileType>, old: &str| cri::LinuxContainerSecurityContext {
        apparmor: structured
            .map(|t| cri::SecurityProfile { profile_type: t as i32, localhost_ref: "localhost/new".into() }),
        apparmor_profile: old.into(),
        ..Default::default()
    };
    // (structured field, deprecated string, AppArmor on, default loaded) -> the process's profile, or refused.
    let cases: &[(Option<ProfileType>, &str, bool, bool, Result<Option<&str>, ()>)] = &[
        (None, "", true, true, Ok(None)),
        (None, "runtime/default", true, true, Ok(Some("swapcri-default"))),
        (None, "runtime/default", true, false, Err(())),
        (None, "runtime/default", false, false, Ok(None)),
        (None, "unconfined", true, true, Ok(None)),
        (None, "localhost/old", true, true, Ok(Some("old"))),
        (None, "localhost/old", false, false, Err(())),
        (Some(Localhost), "unconfined", true, true, Ok(Some("new"))),
        (Some(RuntimeDefault), "", true, true, Ok(Some("swapcri-default"))),
        (Some(Unconfined), "localhost/old", true, true, Ok(None)),
    ];
    for (structured, old, enabled, loaded, want) in cases {
        let config = cri::ContainerConfig {
            linux: Some(cri::LinuxContainerConfig {
                security_context: Some(security(*structured, old)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let got = build_on_node(config, CgroupMode::Unified, pod(), Default::default(), |n| {
            n.apparmor_enabled = *enabled;
            n.apparmor_default = loaded.then(|| "swapcri-default".to_string());
        });
        let got = got.map(|b| b.spec.process().as_ref().unwrap().apparmor_profile().clone()).map_err(|_| ());
        assert_eq!(
            got,
            want.map(|p| p.map(str::to_string)),
            "{structured:?} {old:?} enabled={enabled} loaded={loaded}"
        );
    }
}
