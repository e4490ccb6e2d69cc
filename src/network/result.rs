//! Reading a pod's addresses out of an ADD result, in the layouts of CNI 0.3 and later
//! (`ips` with interface indexes) and of 0.1/0.2 (`ip4` / `ip6`).

use serde_json::Value;

/// The primary address (the first IPv4, else the first one) and the others, without prefix
/// lengths. Addresses on interfaces outside the pod (a bridge on the host) are left out.
pub fn pod_ips(result: &Value) -> (String, Vec<String>) {
    let interfaces = result.get("interfaces").and_then(Value::as_array);
    let in_pod = |index: Option<u64>| match (index, interfaces) {
        (Some(i), Some(list)) => list
            .get(i as usize)
            .and_then(|iface| iface.get("sandbox"))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty()),
        _ => true,
    };
    let mut ips: Vec<String> = Vec::new();
    if let Some(list) = result.get("ips").and_then(Value::as_array) {
        for ip in list {
            if !in_pod(ip.get("interface").and_then(Value::as_u64)) {
                continue;
            }
            if let Some(address) = ip.get("address").and_then(Value::as_str) {
                ips.push(strip_prefix(address));
            }
        }
    }
    for legacy in ["ip4", "ip6"] {
        if let Some(address) = result.get(legacy).and_then(|v| v.get("ip")).and_then(Value::as_str) {
            ips.push(strip_prefix(address));
        }
    }
    ips.dedup();
    let primary = ips.iter().position(|ip| ip.contains('.')).unwrap_or(0);
    if ips.is_empty() {
        return (String::new(), Vec::new());
    }
    let first = ips.remove(primary);
    (first, ips)
}

fn strip_prefix(address: &str) -> String {
    address.split('/').next().unwrap_or(address).to_string()
}

/// Whether `version` ("0.3.1", "1.0.0") is older than major.minor.
pub fn version_before(version: &str, (major, minor): (u64, u64)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    v < (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_from_results() {
        let cases = [
            (
                "bridge 1.0: host bridge, veth, pod eth0",
                json!({"cniVersion":"1.0.0",
                    "interfaces":[{"name":"cni0"},{"name":"veth1"},{"name":"eth0","sandbox":"/run/netns/x"}],
                    "ips":[{"address":"10.88.0.1/16","interface":0},{"address":"10.88.0.7/16","interface":2}]}),
                ("10.88.0.7", vec![]),
            ),
            (
                "dual stack, IPv6 listed first",
                json!({"interfaces":[{"name":"eth0","sandbox":"/x"}],
                    "ips":[{"address":"fd00::7/64","interface":0},{"address":"10.1.0.7/24","interface":0}]}),
                ("10.1.0.7", vec!["fd00::7"]),
            ),
            ("no interface index", json!({"ips":[{"address":"192.168.5.5/24"}]}), ("192.168.5.5", vec![])),
            (
                "0.2.0",
                json!({"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.3/8"},"ip6":{"ip":"fd::3/64"}}),
                ("10.0.0.3", vec!["fd::3"]),
            ),
            ("nothing", json!({"cniVersion":"1.0.0"}), ("", vec![])),
        ];
        for (name, result, (ip, others)) in cases {
            let got = pod_ips(&result);
            assert_eq!(got, (ip.to_string(), others.iter().map(|s| s.to_string()).collect::<Vec<_>>()), "{name}");
        }
    }

    #[test]
    fn versions() {
        assert!(version_before("0.3.1", (0, 4)));
        assert!(!version_before("0.4.0", (0, 4)));
        assert!(!version_before("1.0.0", (0, 4)));
        assert!(version_before("garbage", (0, 4)));
    }
}
