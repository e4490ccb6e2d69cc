//! The CRI wire contract: field numbers and types of `proto/runtime/v1/api.proto`
//! checked against bytes worked out by hand from the protobuf encoding rules
//! (tag = field_number << 3 | wire_type; varint = 0, 64-bit = 1, length-delimited = 2),
//! so a wrong number or type fails here rather than against a kubelet.

use prost::Message;
use swapcri::cri;

fn bytes<M: Message>(m: &M) -> Vec<u8> {
    m.encode_to_vec()
}

/// Encodes, compares with the hand-computed bytes, and decodes back to the same message.
fn check<M: Message + Default + PartialEq + std::fmt::Debug>(what: &str, m: M, want: &[u8]) {
    assert_eq!(bytes(&m), want, "{what}: encoding");
    assert_eq!(M::decode(want).expect(what), m, "{what}: decoding");
}

#[test]
fn service_names() {
    assert_eq!(cri::runtime_service_server::SERVICE_NAME, "runtime.v1.RuntimeService");
    assert_eq!(cri::image_service_server::SERVICE_NAME, "runtime.v1.ImageService");
}

#[test]
fn fields_of_1_37() {
    check("VersionRequest.version=1", cri::VersionRequest { version: "v1".into() }, &[0x0a, 2, b'v', b'1']);
    check(
        "ExecRequest.audit_request_id=7",
        cri::ExecRequest { audit_request_id: "a".into(), ..Default::default() },
        &[0x3a, 1, b'a'],
    );
    check(
        "AttachRequest.audit_request_id=6",
        cri::AttachRequest { audit_request_id: "a".into(), ..Default::default() },
        &[0x32, 1, b'a'],
    );
    check(
        "KeyValue key=1 value=2",
        cri::KeyValue { key: "k".into(), value: "v".into() },
        &[0x0a, 1, b'k', 0x12, 1, b'v'],
    );
}

#[test]
fn mounts_and_images() {
    check("Mount.recursive_read_only=8", cri::Mount { recursive_read_only: true, ..Default::default() }, &[0x40, 1]);
    check("Mount.image_sub_path=10", cri::Mount { image_sub_path: "x".into(), ..Default::default() }, &[0x52, 1, b'x']);
    check(
        "Mount.image=9 / ImageSpec.image=1",
        cri::Mount { image: Some(cri::ImageSpec { image: "i".into(), ..Default::default() }), ..Default::default() },
        &[0x4a, 3, 0x0a, 1, b'i'],
    );
    // Field 20: tag 162 = varint 0xa2 0x01.
    check(
        "ImageSpec.image_ref=20",
        cri::ImageSpec { image_ref: "d".into(), ..Default::default() },
        &[0xa2, 0x01, 1, b'd'],
    );
    check(
        "Mount.propagation=5 (BIDIRECTIONAL=2)",
        cri::Mount { propagation: cri::MountPropagation::PropagationBidirectional as i32, ..Default::default() },
        &[0x28, 2],
    );
}

#[test]
fn security_and_users() {
    // Field 17, varint: tag 136 = 0x88 0x01; Strict = 1.
    check(
        "LinuxContainerSecurityContext.supplemental_groups_policy=17",
        cri::LinuxContainerSecurityContext {
            supplemental_groups_policy: cri::SupplementalGroupsPolicy::Strict as i32,
            ..Default::default()
        },
        &[0x88, 0x01, 1],
    );
    check(
        "LinuxContainerSecurityContext.run_as_group=12",
        cri::LinuxContainerSecurityContext { run_as_group: Some(cri::Int64Value { value: 5 }), ..Default::default() },
        &[0x62, 2, 0x08, 5],
    );
    // userns_options=5 > UserNamespace.uids=2 > IDMapping{host_id=1: 1000, length=3: 65536}.
    let mapping = cri::IdMapping { host_id: 1000, container_id: 0, length: 65536 };
    check(
        "NamespaceOption.userns_options=5",
        cri::NamespaceOption {
            userns_options: Some(cri::UserNamespace { mode: 0, uids: vec![mapping], gids: vec![] }),
            ..Default::default()
        },
        &[0x2a, 9, 0x12, 7, 0x08, 0xe8, 0x07, 0x18, 0x80, 0x80, 0x04],
    );
    // ContainerStatus.user=18 (tag 146 = 0x92 0x01) > ContainerUser.linux=1 > uid=1, supplemental_groups=3 (packed).
    check(
        "ContainerStatus.user=18",
        cri::ContainerStatus {
            user: Some(cri::ContainerUser {
                linux: Some(cri::LinuxContainerUser { uid: 1, gid: 0, supplemental_groups: vec![2, 3] }),
            }),
            ..Default::default()
        },
        &[0x92, 0x01, 8, 0x0a, 6, 0x08, 1, 0x1a, 2, 2, 3],
    );
    check(
        "RuntimeFeatures.user_namespaces_host_network=2",
        cri::RuntimeFeatures { supplemental_groups_policy: true, user_namespaces_host_network: true },
        &[0x08, 1, 0x10, 1],
    );
    check(
        "RuntimeHandlerFeatures rro=1 userns=2",
        cri::RuntimeHandlerFeatures { recursive_read_only_mounts: true, user_namespaces: true },
        &[0x08, 1, 0x10, 1],
    );
}

#[test]
fn resources_and_signals() {
    // int64 −1 is a ten-byte varint.
    check(
        "LinuxContainerResources.memory_swap_limit_in_bytes=10",
        cri::LinuxContainerResources { memory_swap_limit_in_bytes: -1, ..Default::default() },
        &[0x50, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    );
    check(
        "LinuxContainerResources.unified=9 (map entry key=1 value=2)",
        cri::LinuxContainerResources { unified: [("a".to_string(), "b".to_string())].into(), ..Default::default() },
        &[0x4a, 6, 0x0a, 1, b'a', 0x12, 1, b'b'],
    );
    // ContainerConfig.stop_signal=18: tag 144 = 0x90 0x01; SIGKILL = 13.
    check(
        "ContainerConfig.stop_signal=18",
        cri::ContainerConfig { stop_signal: cri::Signal::Sigkill as i32, ..Default::default() },
        &[0x90, 0x01, 13],
    );
    assert_eq!(cri::Signal::Sigterm as i32, 23);
    assert_eq!(cri::Signal::Sigrtmax as i32, 65);
    check(
        "UpdatePodSandboxResourcesRequest id=1 resources=3",
        cri::UpdatePodSandboxResourcesRequest {
            pod_sandbox_id: "p".into(),
            overhead: None,
            resources: Some(cri::LinuxContainerResources { memory_limit_in_bytes: 1, ..Default::default() }),
        },
        &[0x0a, 1, b'p', 0x1a, 2, 0x20, 1],
    );
}

#[test]
fn stats_events_and_metrics() {
    // CpuUsage.psi=4 > PsiStats.Some=2 > PsiData{Total=1: 5, Avg10=2 (double 1.0)}.
    let mut want = vec![0x22, 13, 0x12, 11, 0x08, 5, 0x11];
    want.extend_from_slice(&1.0f64.to_le_bytes());
    check(
        "CpuUsage.psi=4",
        cri::CpuUsage {
            psi: Some(cri::PsiStats {
                full: None,
                some: Some(cri::PsiData { total: 5, avg10: 1.0, avg60: 0.0, avg300: 0.0 }),
            }),
            ..Default::default()
        },
        &want,
    );
    check(
        "ContainerStats.io=6",
        cri::ContainerStats { io: Some(cri::IoUsage { timestamp: 1, psi: None }), ..Default::default() },
        &[0x32, 2, 0x08, 1],
    );
    check(
        "SwapUsage.swap_usage_bytes=3",
        cri::SwapUsage { swap_usage_bytes: Some(cri::UInt64Value { value: 7 }), ..Default::default() },
        &[0x1a, 2, 0x08, 7],
    );
    check(
        "PodSandboxStatusResponse.timestamp=4",
        cri::PodSandboxStatusResponse { timestamp: 3, ..Default::default() },
        &[0x20, 3],
    );
    check(
        "ContainerEventResponse.container_event_type=2 (DELETED=3)",
        cri::ContainerEventResponse {
            container_event_type: cri::ContainerEventType::ContainerDeletedEvent as i32,
            ..Default::default()
        },
        &[0x10, 3],
    );
    check(
        "Metric.metric_type=3 value=5",
        cri::Metric {
            metric_type: cri::MetricType::Gauge as i32,
            value: Some(cri::UInt64Value { value: 9 }),
            ..Default::default()
        },
        &[0x18, 1, 0x2a, 2, 0x08, 9],
    );
    check(
        "StreamContainersResponse.containers=1",
        cri::StreamContainersResponse { containers: vec![cri::Container { id: "c".into(), ..Default::default() }] },
        &[0x0a, 3, 0x0a, 1, b'c'],
    );
    check(
        "RuntimeConfigResponse linux=1 cgroup_driver=1 (CGROUPFS=1)",
        cri::RuntimeConfigResponse {
            linux: Some(cri::LinuxRuntimeConfiguration { cgroup_driver: cri::CgroupDriver::Cgroupfs as i32 }),
        },
        &[0x0a, 2, 0x08, 1],
    );
}

/// A container config with every field kubelet sets survives a round trip unchanged.
#[test]
fn full_container_config_round_trip() {
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: "c".into(), attempt: 2 }),
        image: Some(cri::ImageSpec {
            image: "sha256:ab".into(),
            annotations: [("a".to_string(), "b".to_string())].into(),
            user_specified_image: "busybox".into(),
            runtime_handler: "runc".into(),
            image_ref: "sha256:ab".into(),
        }),
        command: vec!["sh".into()],
        args: vec!["-c".into(), "true".into()],
        working_dir: "/".into(),
        envs: vec![cri::KeyValue { key: "K".into(), value: "V".into() }],
        mounts: vec![cri::Mount {
            container_path: "/m".into(),
            host_path: "/h".into(),
            readonly: true,
            selinux_relabel: true,
            propagation: 1,
            uid_mappings: vec![cri::IdMapping { host_id: 1, container_id: 0, length: 1 }],
            gid_mappings: vec![cri::IdMapping { host_id: 1, container_id: 0, length: 1 }],
            recursive_read_only: true,
            image: None,
            image_sub_path: "sub".into(),
        }],
        devices: vec![cri::Device {
            container_path: "/dev/x".into(),
            host_path: "/dev/null".into(),
            permissions: "rw".into(),
        }],
        labels: [("l".to_string(), "v".to_string())].into(),
        annotations: [("a".to_string(), "v".to_string())].into(),
        log_path: "c/0.log".into(),
        stdin: true,
        stdin_once: true,
        tty: true,
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                cpu_period: 1,
                cpu_quota: 2,
                cpu_shares: 3,
                memory_limit_in_bytes: 4,
                oom_score_adj: 5,
                cpuset_cpus: "0".into(),
                cpuset_mems: "0".into(),
                hugepage_limits: vec![cri::HugepageLimit { page_size: "2MB".into(), limit: 6 }],
                unified: [("memory.oom.group".to_string(), "1".to_string())].into(),
                memory_swap_limit_in_bytes: 7,
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                run_as_user: Some(cri::Int64Value { value: 1000 }),
                run_as_group: Some(cri::Int64Value { value: 1000 }),
                supplemental_groups: vec![1, 2],
                supplemental_groups_policy: 1,
                no_new_privs: true,
                masked_paths: vec!["/proc/kcore".into()],
                readonly_paths: vec!["/proc/sys".into()],
                ..Default::default()
            }),
        }),
        windows: None,
        cdi_devices: vec![cri::CdiDevice { name: "vendor.com/gpu=0".into() }],
        stop_signal: cri::Signal::Sigusr1 as i32,
    };
    let wire = config.encode_to_vec();
    assert_eq!(cri::ContainerConfig::decode(wire.as_slice()).unwrap(), config);
}
