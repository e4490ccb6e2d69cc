//! The pod's hostname and DNS settings, which become /etc/hostname and /etc/resolv.conf:
//! checked as kubelet checks them, so no value can add a line to either file.

use std::net::IpAddr;

use super::PolicyError;
use crate::cri;

/// Search domains kubelet allows (MaxDNSSearchPaths) and their total length.
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;
/// The kernel's limit on a hostname (HOST_NAME_MAX).
const MAX_HOSTNAME: usize = 64;

fn invalid(what: &str, value: &str, why: &str) -> PolicyError {
    PolicyError::Invalid(format!("{what} {value:?}: {why}"))
}

/// A hostname: DNS labels (letters, digits, '-', '.'), at most 64 characters; it may end in
/// the root's dot (kubelet's FQDN for `setHostnameAsFQDN` when the cluster domain is empty).
pub fn check_hostname(hostname: &str) -> Result<(), PolicyError> {
    if hostname.is_empty() {
        return Ok(());
    }
    if hostname.len() > MAX_HOSTNAME {
        return Err(invalid("hostname", hostname, "longer than 64 characters"));
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let relative = hostname.strip_suffix('.').unwrap_or(hostname);
    if !relative.split('.').all(label) {
        return Err(invalid("hostname", hostname, "not a DNS name (letters, digits, '-' and '.')"));
    }
    Ok(())
}

/// Nameservers are IP addresses (an IPv6 one may carry a zone), search domains DNS names
/// (kubelet's relaxed rule: '_' allowed, "." alone allowed), options words without spaces.
pub fn check(dns: &cri::DnsConfig) -> Result<(), PolicyError> {
    for server in &dns.servers {
        let address = server.split_once('%').map_or(server.as_str(), |(a, zone)| {
            if zone.is_empty() || !zone.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
                ""
            } else {
                a
            }
        });
        if address.parse::<IpAddr>().is_err() {
            return Err(invalid("DNS server", server, "not an IP address"));
        }
    }
    if dns.searches.len() > MAX_SEARCHES {
        return Err(PolicyError::Invalid(format!("{} DNS search domains: at most {MAX_SEARCHES}", dns.searches.len())));
    }
    if dns.searches.iter().map(|s| s.len() + 1).sum::<usize>() > MAX_SEARCH_CHARS {
        return Err(PolicyError::Invalid(format!(
            "DNS search domains longer than {MAX_SEARCH_CHARS} characters in all"
        )));
    }
    for search in &dns.searches {
        let name = search.strip_suffix('.').unwrap_or(search);
        let label = |l: &str| {
            !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if search != "." && (name.len() > 253 || !name.split('.').all(label)) {
            return Err(invalid("DNS search domain", search, "not a DNS name"));
        }
    }
    for option in &dns.options {
        let word = !option.is_empty() && option.bytes().all(|b| b.is_ascii_graphic() && b != b'#' && b != b';');
        if !word {
            return Err(invalid("DNS option", option, "not a single word (no spaces, control characters, '#' or ';')"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dns(servers: &[&str], searches: &[&str], options: &[&str]) -> cri::DnsConfig {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        cri::DnsConfig { servers: v(servers), searches: v(searches), options: v(options) }
    }

    #[test]
    fn dns_settings_that_would_add_lines_are_refused() {
        let long = "a".repeat(64);
        let cases: &[(cri::DnsConfig, bool)] = &[
            (
                dns(
                    &["10.96.0.10", "fd00::a", "fe80::1%eth0"],
                    &["default.svc.cluster.local", "_srv.example.", "."],
                    &["ndots:5", "edns0", "single-request-reopen"],
                ),
                true,
            ),
            (dns(&["10.96.0.10\nnameserver 6.6.6.6"], &[], &[]), false),
            (dns(&["evil.example"], &[], &[]), false),
            (dns(&["fe80::1%"], &[], &[]), false),
            (dns(&[], &["ok.local\nnameserver 6.6.6.6"], &[]), false),
            (dns(&[], &["two words"], &[]), false),
            (dns(&[], &[&long], &[]), false),
            (dns(&[], &[], &["ndots:5\nnameserver 6.6.6.6"]), false),
            (dns(&[], &[], &["a b"]), false),
            (dns(&[], &[], &[""]), false),
            (dns(&[], &[], &["ndots:1#x"]), false),
            (dns(&[], &vec!["a"; 33], &[]), false),
        ];
        for (config, ok) in cases {
            assert_eq!(check(config).is_ok(), *ok, "{config:?}");
        }
    }

    #[test]
    fn hostnames_are_dns_names() {
        for (name, ok) in [
            ("", true),
            ("web-0", true),
            ("web-0.nginx.default", true),
            ("web-0.nginx.default.svc.", true),
            (".", false),
            ("a..", false),
            ("bad\nname", false),
            ("-lead", false),
            ("a..b", false),
            ("under_score", false),
            (&"h".repeat(65), false),
        ] {
            assert_eq!(check_hostname(name).is_ok(), ok, "{name:?}");
        }
    }
}
