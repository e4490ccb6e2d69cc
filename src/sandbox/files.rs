//! The pod's /etc/hostname, /etc/hosts and /etc/resolv.conf.

use std::path::Path;

use crate::cri;

const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n";

/// resolv.conf from the request's DNS config; the host's when the request has none.
pub fn resolv_conf(dns: Option<&cri::DnsConfig>, host: &str) -> String {
    match dns {
        Some(d) if !(d.servers.is_empty() && d.searches.is_empty() && d.options.is_empty()) => {
            let mut out = String::new();
            if !d.searches.is_empty() {
                out.push_str(&format!("search {}\n", d.searches.join(" ")));
            }
            for server in &d.servers {
                out.push_str(&format!("nameserver {server}\n"));
            }
            if !d.options.is_empty() {
                out.push_str(&format!("options {}\n", d.options.join(" ")));
            }
            out
        }
        _ => host.to_string(),
    }
}

/// Writes the pod's files; `owner` (a user-namespaced pod's root, as host ids) gets them so
/// the container's root may edit them as it could on a pod without one.
pub fn write_pod_files(
    dir: &Path,
    hostname: &str,
    dns: Option<&cri::DnsConfig>,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    crate::blocking::check("writing the pod's files");
    let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    for (name, content) in
        [("hostname", format!("{hostname}\n")), ("hosts", HOSTS.to_string()), ("resolv.conf", resolv_conf(dns, &host))]
    {
        let path = dir.join(name);
        std::fs::write(&path, content)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_from_dns_config() {
        let dns = cri::DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec!["default.svc.cluster.local".into(), "svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(
            resolv_conf(Some(&dns), "nameserver 1.1.1.1\n"),
            "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
        );
        assert_eq!(resolv_conf(None, "nameserver 1.1.1.1\n"), "nameserver 1.1.1.1\n");
        assert_eq!(resolv_conf(Some(&cri::DnsConfig::default()), "x\n"), "x\n");
    }
}
