//! The CNI caller against fake plugins: shell scripts that record their environment and
//! stdin and answer as told by their configuration.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::*;

/// `fake-net` answers ADD with address 10.9.0.<n>; behaviour comes from its configuration:
/// `"fail":"ADD"` (or DEL, CHECK) fails with a CNI error object, `"sleep":"ADD"` hangs.
const SCRIPT: &str = r#"#!/bin/sh
input=$(cat)
n=$(ls LOG | grep -c '^call-')
n=$((n + 1))
echo "$CNI_COMMAND|$CNI_CONTAINERID|$CNI_NETNS|$CNI_IFNAME|$CNI_ARGS|$CNI_PATH|$0" > LOG/call-$(printf %03d $n)
echo "$input" > LOG/stdin-$(printf %03d $n)
case "$input" in *"\"sleep\":\"$CNI_COMMAND\""*) sleep 30 & echo $! > LOG/sleeper; wait ;; esac
case "$input" in *"\"fail\":\"$CNI_COMMAND\""*)
  echo "{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"$CNI_COMMAND refused\",\"details\":\"by the test\"}"
  exit 1 ;;
esac
case "$CNI_COMMAND" in
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
  ADD) echo "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"$CNI_IFNAME\",\"sandbox\":\"$CNI_NETNS\"}],\"ips\":[{\"address\":\"10.9.0.$n/24\",\"interface\":0}]}" ;;
esac
exit 0
"#;

struct Fixture {
    dir: tempfile::TempDir,
    network: Network,
}

impl Fixture {
    fn new(timeout: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["bin", "net.d", "log", "state", "netns"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let script = SCRIPT.replace("LOG", &root.join("log").display().to_string());
        for name in ["fake-net", "fake-chain"] {
            let path = root.join("bin").join(name);
            std::fs::write(&path, &script).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        std::fs::write(root.join("netns/pod"), "").unwrap();
        let config = NetworkConfig {
            plugin_dirs: vec![root.join("missing"), root.join("bin")],
            config_dir: root.join("net.d"),
            plugin_timeout_seconds: timeout,
            interface: "eth0".into(),
        };
        let network = Network::new(config, root.join("state"));
        Fixture { dir, network }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A chain of fake-net then fake-chain (which takes port mappings); extra fields per plugin.
    fn configure(&self, first: Value, second: Value) {
        let mut a = json!({"type": "fake-net"});
        let mut b = json!({"type": "fake-chain", "capabilities": {"portMappings": true}});
        a.as_object_mut().unwrap().extend(first.as_object().unwrap().clone());
        b.as_object_mut().unwrap().extend(second.as_object().unwrap().clone());
        let list = json!({"cniVersion": "1.0.0", "name": "testnet", "plugins": [a, b]});
        std::fs::write(self.path("net.d/10-test.conflist"), list.to_string()).unwrap();
    }

    fn request(&self) -> PodRequest {
        PodRequest {
            sandbox_id: "sb1".into(),
            netns: self.path("netns/pod"),
            name: "web".into(),
            namespace: "default".into(),
            uid: "u-1".into(),
            port_mappings: vec![json!({"hostPort": 8080, "containerPort": 80, "protocol": "tcp"})],
            dns: None,
        }
    }

    /// The recorded calls (command and the other CNI_* values), VERSION calls left out.
    fn calls(&self) -> Vec<(Vec<String>, Value)> {
        let mut names: Vec<_> = std::fs::read_dir(self.path("log"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("call-"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let call = std::fs::read_to_string(self.path("log").join(&n)).unwrap();
                let stdin = std::fs::read_to_string(self.path("log").join(n.replace("call", "stdin"))).unwrap();
                let fields: Vec<String> = call.trim_end().split('|').map(str::to_string).collect();
                (fields, serde_json::from_str(&stdin).unwrap())
            })
            .filter(|(f, _)| f[0] != "VERSION")
            .collect()
    }

    fn record_exists(&self) -> bool {
        self.path("state/sb1.json").exists()
    }
}

fn plugin_of(fields: &[String]) -> &str {
    Path::new(&fields[6]).file_name().unwrap().to_str().unwrap()
}

#[tokio::test]
async fn add_runs_the_chain_and_del_reverses_it() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    let addresses = f.network.setup(f.request()).await.unwrap();
    assert_eq!(addresses, PodAddresses { network: "testnet".into(), ip: "10.9.0.4".into(), additional_ips: vec![] });
    assert!(f.record_exists());

    let calls = f.calls();
    assert_eq!(calls.len(), 2);
    let (env, stdin) = &calls[0];
    assert_eq!(plugin_of(env), "fake-net");
    assert_eq!(&env[..4], ["ADD", "sb1", f.path("netns/pod").to_str().unwrap(), "eth0"]);
    assert_eq!(
        env[4],
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=sb1;K8S_POD_UID=u-1"
    );
    assert_eq!(env[5], format!("{}:{}", f.path("missing").display(), f.path("bin").display()));
    assert_eq!((stdin["name"].as_str(), stdin["cniVersion"].as_str()), (Some("testnet"), Some("1.0.0")));
    assert!(stdin.get("prevResult").is_none() && stdin.get("runtimeConfig").is_none(), "{stdin}");
    let (env, stdin) = &calls[1];
    assert_eq!(plugin_of(env), "fake-chain");
    assert_eq!(stdin["prevResult"]["ips"][0]["address"], "10.9.0.3/24", "the first plugin's result");
    assert_eq!(stdin["runtimeConfig"]["portMappings"][0]["hostPort"], 8080, "declared capability only");
    let record: Value = serde_json::from_str(&std::fs::read_to_string(f.path("state/sb1.json")).unwrap()).unwrap();
    assert_eq!(record["result"]["ips"][0]["address"], "10.9.0.4/24", "the final result is recorded");

    f.network.teardown("sb1").await.unwrap();
    let calls = f.calls();
    let dels: Vec<_> =
        calls[2..].iter().map(|(env, stdin)| (env[0].clone(), plugin_of(env).to_string(), stdin)).collect();
    assert_eq!(
        dels.iter().map(|d| (d.0.as_str(), d.1.as_str())).collect::<Vec<_>>(),
        [("DEL", "fake-chain"), ("DEL", "fake-net")]
    );
    assert_eq!(dels[0].2["prevResult"]["ips"][0]["address"], "10.9.0.4/24", "DEL gets the recorded result");
    assert_eq!(dels[0].2["runtimeConfig"]["portMappings"][0]["containerPort"], 80);
    assert!(!f.record_exists());
    f.network.teardown("sb1").await.unwrap();
    assert_eq!(f.calls().len(), 4, "a second DEL has nothing to do");
}

#[tokio::test]
async fn a_failed_add_is_rolled_back() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({"fail": "ADD"}));
    let err = f.network.setup(f.request()).await.unwrap_err().to_string();
    assert!(err.contains("fake-chain ADD: ADD refused: by the test (code 11)"), "{err}");
    let commands: Vec<_> = f.calls().iter().map(|(env, _)| format!("{} {}", env[0], plugin_of(env))).collect();
    assert_eq!(commands, ["ADD fake-net", "ADD fake-chain", "DEL fake-chain", "DEL fake-net"]);
    assert!(!f.record_exists(), "nothing left to account for");
}

#[tokio::test]
async fn a_hung_plugin_is_killed_at_the_timeout() {
    let f = Fixture::new(1);
    f.configure(json!({"sleep": "ADD"}), json!({}));
    let started = std::time::Instant::now();
    let err = f.network.setup(f.request()).await.unwrap_err();
    assert!(matches!(err, NetworkError::Plugin(PluginError::Timeout { seconds: 1, .. })), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(!f.record_exists());
    // What the plugin started goes with it.
    let sleeper: i32 = std::fs::read_to_string(f.path("log/sleeper")).unwrap().trim().parse().unwrap();
    let gone = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.is_empty() || stat.contains(") Z ")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gone(sleeper) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(gone(sleeper), "the hung plugin's child {sleeper} was left running");
}

#[tokio::test]
async fn a_failed_del_keeps_the_record_for_the_next_try() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    f.network.setup(f.request()).await.unwrap();
    // The configuration changes afterwards; DEL uses the recorded one.
    f.configure(json!({"fail": "DEL"}), json!({}));
    f.network.teardown("sb1").await.unwrap();
    assert!(!f.record_exists());

    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    f.network.setup(f.request()).await.unwrap();
    let record = f.path("state/sb1.json");
    let text = std::fs::read_to_string(&record).unwrap().replacen(
        "\"type\": \"fake-net\"",
        "\"type\": \"fake-net\", \"fail\": \"DEL\"",
        1,
    );
    std::fs::write(&record, text).unwrap();
    assert!(f.network.teardown("sb1").await.unwrap_err().to_string().contains("DEL refused"));
    assert!(f.record_exists(), "kept for a retry");
}

#[tokio::test]
async fn del_without_a_namespace_passes_an_empty_netns() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    f.network.setup(f.request()).await.unwrap();
    std::fs::remove_file(f.path("netns/pod")).unwrap();
    f.network.teardown("sb1").await.unwrap();
    let calls = f.calls();
    assert_eq!((calls[2].0[0].as_str(), calls[2].0[2].as_str()), ("DEL", ""));
}

#[tokio::test]
async fn check_sends_the_recorded_result() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    f.network.setup(f.request()).await.unwrap();
    f.network.check("sb1").await.unwrap();
    let calls = f.calls();
    assert_eq!(calls[2].0[0], "CHECK");
    assert_eq!(calls[2].1["prevResult"]["ips"][0]["address"], "10.9.0.4/24");
}

#[tokio::test]
async fn recovery_releases_what_no_pod_accounts_for() {
    let f = Fixture::new(10);
    f.configure(json!({}), json!({}));
    f.network.setup(f.request()).await.unwrap();
    f.network.setup(PodRequest { sandbox_id: "sb2".into(), ..f.request() }).await.unwrap();
    // A crash after the record was written but before ADD returned: no result yet.
    let half = std::fs::read_to_string(f.path("state/sb2.json")).unwrap();
    let mut half: Value = serde_json::from_str(&half).unwrap();
    half["result"] = Value::Null;
    half["request"]["sandbox_id"] = json!("sb3");
    std::fs::write(f.path("state/sb3.json"), half.to_string()).unwrap();

    let released = f.network.recover(|id| id == "sb1").await;
    let mut released = released;
    released.sort();
    assert_eq!(released, ["sb2", "sb3"]);
    assert!(f.record_exists() && !f.path("state/sb2.json").exists() && !f.path("state/sb3.json").exists());
    let sb3_del = f.calls().into_iter().find(|(env, _)| env[0] == "DEL" && env[1] == "sb3").unwrap();
    assert!(sb3_del.1.get("prevResult").is_none(), "nothing recorded to pass");
}

#[tokio::test]
async fn readiness_follows_the_config_directory() {
    let f = Fixture::new(10);
    let err = f.network.ready().await.unwrap_err().to_string();
    assert!(err.contains("no network configuration"), "{err}");
    assert!(matches!(f.network.setup(f.request()).await, Err(NetworkError::NotReady(_))));

    let list = |version: &str, plugin: &str| {
        json!({"cniVersion": version, "name": "n", "plugins": [{"type": plugin}]}).to_string()
    };
    std::fs::write(f.path("net.d/10-a.conflist"), list("1.0.0", "absent")).unwrap();
    let err = f.network.ready().await.unwrap_err().to_string();
    assert!(err.contains("\"absent\" not found"), "{err}");
    std::fs::write(f.path("net.d/10-a.conflist"), list("0.3.1", "fake-net")).unwrap();
    bump_mtime(&f.path("net.d/10-a.conflist"));
    let err = f.network.ready().await.unwrap_err().to_string();
    assert!(err.contains("does not support cniVersion 0.3.1"), "{err}");
    std::fs::write(f.path("net.d/10-a.conflist"), list("1.0.0", "fake-net")).unwrap();
    bump_mtime(&f.path("net.d/10-a.conflist"));
    assert_eq!(f.network.ready().await.unwrap().name, "n");
    let versions = f.calls_including_version();
    f.network.ready().await.unwrap();
    assert_eq!(f.calls_including_version(), versions, "an unchanged file is not validated again");
}

impl Fixture {
    fn calls_including_version(&self) -> usize {
        std::fs::read_dir(self.path("log"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_str().unwrap().starts_with("call-"))
            .count()
    }
}

/// Rewrites within one second keep the same mtime on coarse filesystems; move it forward.
fn bump_mtime(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options().write(true).open(path).unwrap().set_modified(later).unwrap();
}

#[tokio::test]
async fn pod_cidr_reaches_plugins_that_ask_for_ip_ranges() {
    let f = Fixture::new(10);
    f.configure(json!({"capabilities": {"ipRanges": true}}), json!({}));
    for bad in ["10.0.0.0", "10.0.0.0/33", "fd00::/129", "x/8", "10.0.0.0/8,"] {
        assert!(f.network.set_pod_cidr(bad).is_err(), "{bad}");
    }
    f.network.set_pod_cidr("10.244.1.0/24,fd00:1::/64").unwrap();
    f.network.setup(f.request()).await.unwrap();
    let calls = f.calls();
    assert_eq!(
        calls[0].1["runtimeConfig"]["ipRanges"],
        json!([[{"subnet": "10.244.1.0/24"}], [{"subnet": "fd00:1::/64"}]])
    );
    assert!(calls[1].1["runtimeConfig"].get("ipRanges").is_none(), "fake-chain does not declare it");
}
