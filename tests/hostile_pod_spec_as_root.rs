//! A pod spec written to turn the runtime against the node, sent as kubelet would send it: a
//! Localhost seccomp profile that is a FIFO, a device, a directory or a huge file; DNS
//! settings and a hostname that would add lines to resolv.conf or /etc/hostname; annotations
//! the OCI runtime would act on. Each is refused (InvalidArgument) without waiting on the
//! file and without creating anything, other calls keep answering meanwhile, and
//! runtime-interpreted annotations reach the spec only where the handler allows them.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

/// Long enough that only a call waiting on the file (a FIFO no one opens) reaches it.
const HANG: Duration = Duration::from_secs(30);

fn with_seccomp(mut config: cri::ContainerConfig, path: &str) -> cri::ContainerConfig {
    let context = config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    context.seccomp = Some(cri::SecurityProfile {
        profile_type: cri::security_profile::ProfileType::Localhost as i32,
        localhost_ref: path.into(),
    });
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn special_files_named_as_seccomp_profiles_are_refused_at_once() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let pod_config = sandbox_config("profiles", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let fifo = daemon.dir.path().join("profile.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let huge = daemon.dir.path().join("huge.json");
    std::fs::File::create(&huge).unwrap().set_len(1 << 30).unwrap();
    let before = daemon.reset_peak_memory();
    let cases = [
        (fifo.display().to_string(), "a FIFO"),
        ("/dev/zero".to_string(), "a device"),
        (daemon.dir.path().display().to_string(), "a directory"),
        (huge.display().to_string(), "larger than"),
    ];
    let mut rt = daemon.runtime().await;
    let mut lister = daemon.runtime().await;
    for (path, why) in cases {
        let request = cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(with_seccomp(container_config("c", &["true"]), &path)),
            sandbox_config: Some(pod_config.clone()),
        };
        let started = Instant::now();
        // Another call at the same time: the refusal must not hold up the daemon.
        let (created, listed) = tokio::join!(
            tokio::time::timeout(HANG, rt.create_container(request)),
            tokio::time::timeout(HANG, lister.list_containers(cri::ListContainersRequest::default())),
        );
        let err = created.expect("refused without waiting on the file").unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{path}: {}", err.message());
        assert!(err.message().contains(why), "{path}: the message says {why:?}: {}", err.message());
        listed.expect("ListContainers answered meanwhile").expect("ListContainers");
        println!("FIGURE hostile-pod-spec seccomp profile ({why}): refused in {} ms", started.elapsed().as_millis());
    }
    daemon.assert_memory_within(before, 16, "a 1 GiB seccomp profile");
    let left = rt.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers;
    assert!(left.is_empty(), "nothing created: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dns_settings_and_hostnames_cannot_add_lines() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let dns = |servers: &[&str], searches: &[&str], options: &[&str]| cri::DnsConfig {
        servers: servers.iter().map(|s| s.to_string()).collect(),
        searches: searches.iter().map(|s| s.to_string()).collect(),
        options: options.iter().map(|s| s.to_string()).collect(),
    };
    let injected = "nameserver 127.0.0.66";
    let cases = [
        ("an option", dns(&["127.0.0.53"], &[], &[&format!("ndots:5\n{injected}")]), "dns"),
        ("a search domain", dns(&["127.0.0.53"], &[&format!("svc.cluster.local\n{injected}")], &[]), "dns"),
        ("a server", dns(&[&format!("127.0.0.53\n{injected}")], &[], &[]), "dns"),
        ("a server that is a name", dns(&["dns.example"], &[], &[]), "dns"),
        ("a hostname", dns(&["127.0.0.53"], &[], &[]), "host\nevil"),
    ];
    let mut rt = daemon.runtime().await;
    for (what, dns_config, hostname) in cases {
        let mut config = sandbox_config("dns", &logs);
        config.dns_config = Some(dns_config);
        config.hostname = hostname.into();
        let err = rt.run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(config), ..Default::default() }).await;
        let err = err.expect_err(what);
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{what}: {}", err.message());
    }
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items;
    assert!(pods.is_empty(), "nothing created: {pods:?}");
    assert_eq!(std::fs::read_dir(daemon.dir.path().join("run/sandboxes")).map(|d| d.count()).unwrap_or(0), 0);

    // What kubelet sends for a ClusterFirst pod is written as given, one line each.
    let mut config = sandbox_config("dns", &logs);
    config.dns_config = Some(dns(&["127.0.0.53"], &["default.svc.cluster.local", "svc.cluster.local"], &["ndots:5"]));
    let pod = run_sandbox(&daemon, config.clone()).await;
    let ctr = start(&daemon, &pod, &config, container_config("c", &["sleep", "60"])).await;
    let answer = exec(&daemon, &ctr, &["cat", "/etc/resolv.conf"], 10).await.expect("ExecSync");
    let out = String::from_utf8_lossy(&answer.stdout).to_string();
    assert_eq!(answer.exit_code, 0, "{out}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines,
        ["search default.svc.cluster.local svc.cluster.local", "nameserver 127.0.0.53", "options ndots:5"],
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_annotations_reach_the_spec_only_where_allowed() {
    require_root();
    let daemon = Daemon::start("[runtime.handlers.runc]\nallowed_annotations = [\"run.oci.keep_original_groups\"]");
    import_busybox(&daemon);
    let pod_config = sandbox_config("annotations", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let mut config = container_config("c", &["sleep", "60"]);
    config.annotations = [
        ("org.systemd.property.CPUQuota", "1%"),
        ("io.katacontainers.config.hypervisor.path", "/bin/sh"),
        ("run.oci.hooks.stdout", "/tmp/hook.log"),
        ("run.oci.keep_original_groups", "1"),
        ("example.com/owner", "team"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let ctr = start(&daemon, &pod, &pod_config, config).await;
    let spec = daemon.dir.path().join("run/containers").join(&ctr).join("bundle/config.json");
    let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(&spec).unwrap()).unwrap();
    let annotations = spec["annotations"].as_object().expect("the spec's annotations");
    for kept in ["run.oci.keep_original_groups", "example.com/owner"] {
        assert!(annotations.contains_key(kept), "{kept} passes: {annotations:?}");
    }
    for dropped in ["org.systemd.property.CPUQuota", "io.katacontainers.config.hypervisor.path", "run.oci.hooks.stdout"]
    {
        assert!(!annotations.contains_key(dropped), "{dropped} is left out: {annotations:?}");
    }
    assert!(daemon.log().contains("org.systemd.property.CPUQuota"), "the create's log names what was left out");
}
