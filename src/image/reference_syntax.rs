//! The grammar of image references (`[registry/]repository[:tag][@digest]`, as the
//! distribution project defines it), checked by hand: the regular expressions libraries
//! build for it keep over 10 MiB of compiled automata alive for the daemon's lifetime.

/// A reference split into its parts, each checked against its grammar; Docker Hub names
/// normalized (`busybox` is `docker.io/library/busybox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

const DOCKER_HUB: &str = "docker.io";
/// The longest `registry/repository` the distribution grammar allows.
const NAME_MAX: usize = 255;
const TAG_MAX: usize = 128;

pub fn split(input: &str) -> Result<Parts, String> {
    let (named, digest) = match input.split_once('@') {
        Some((named, digest)) => (named, Some(checked_digest(digest)?)),
        None => (input, None),
    };
    // A ':' after the last '/' starts the tag; one before it belongs to a registry port.
    let last_slash = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_slash..].rfind(':') {
        Some(i) => (&named[..last_slash + i], Some(checked_tag(&named[last_slash + i + 1..])?)),
        None => (named, None),
    };
    if name.len() > NAME_MAX {
        return Err(format!("repository name longer than {NAME_MAX} characters"));
    }
    let (registry, path) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (checked_registry(first)?, rest),
        _ => (DOCKER_HUB.to_string(), name),
    };
    for component in path.split('/') {
        check_component(component)?;
    }
    let registry = if registry == "index.docker.io" { DOCKER_HUB.to_string() } else { registry };
    let repository =
        if registry == DOCKER_HUB && !path.contains('/') { format!("library/{path}") } else { path.to_string() };
    Ok(Parts { registry, repository, tag, digest })
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or one or more `-`.
fn check_component(component: &str) -> Result<(), String> {
    if component.is_empty() {
        return Err("empty repository path component".into());
    }
    if component.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("repository names must be lowercase".into());
    }
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(format!("repository path component {component:?} must start and end with a letter or digit"));
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        if !(matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-')) {
            return Err(format!("invalid separator {separator:?} in repository path component {component:?}"));
        }
    }
    Ok(())
}

/// A host name (labels of letters, digits and inner hyphens) or a bracketed IPv6
/// address, with an optional numeric port.
fn checked_registry(registry: &str) -> Result<String, String> {
    let invalid = || Err(format!("invalid registry host {registry:?}"));
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else { return invalid() };
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return invalid();
        }
        match after {
            "" => (address, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (address, Some(port)),
                None => return invalid(),
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    if let Some(port) = port {
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return invalid();
        }
    }
    if !registry.starts_with('[') {
        let label_ok = |label: &str| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label_ok) {
            return invalid();
        }
    }
    Ok(registry.to_string())
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`
fn checked_tag(tag: &str) -> Result<String, String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let valid = !tag.is_empty()
        && tag.len() <= TAG_MAX
        && word(tag.as_bytes()[0])
        && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-');
    if valid {
        Ok(tag.to_string())
    } else {
        Err(format!("invalid tag {tag:?}"))
    }
}

/// `algorithm:hex`: the algorithm is letter-led alphanumeric runs joined by `+._-`, the
/// encoded part at least 32 hex digits. Which algorithms are supported is decided later.
fn checked_digest(digest: &str) -> Result<String, String> {
    let invalid = || Err(format!("invalid digest {digest:?}"));
    let Some((algorithm, encoded)) = digest.split_once(':') else { return invalid() };
    let algorithm_ok = algorithm.split(['+', '.', '_', '-']).all(|part| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && part.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    if !algorithm_ok || encoded.len() < 32 || !encoded.bytes().all(|b| b.is_ascii_hexdigit()) {
        return invalid();
    }
    Ok(digest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn valid_references_split() {
        let digest = format!("sha256:{HEX}");
        let cases: Vec<(String, &str, &str, Option<&str>, Option<&str>)> = vec![
            ("busybox".into(), "docker.io", "library/busybox", None, None),
            ("busybox:1.36.1-glibc".into(), "docker.io", "library/busybox", Some("1.36.1-glibc"), None),
            ("index.docker.io/user/app:v1".into(), "docker.io", "user/app", Some("v1"), None),
            ("localhost/app".into(), "localhost", "app", None, None),
            ("localhost:5000/a/b".into(), "localhost:5000", "a/b", None, None),
            (
                "my-registry.example.com:443/team/app_x__y.z--w:tag".into(),
                "my-registry.example.com:443",
                "team/app_x__y.z--w",
                Some("tag"),
                None,
            ),
            ("[::1]:5000/app:1".into(), "[::1]:5000", "app", Some("1"), None),
            ("Example.COM/app".into(), "Example.COM", "app", None, None),
            (format!("app:v1@{digest}"), "docker.io", "library/app", Some("v1"), Some(digest.as_str())),
            (format!("127.0.0.1:5000/x@{digest}"), "127.0.0.1:5000", "x", None, Some(digest.as_str())),
        ];
        for (input, registry, repository, tag, digest) in cases {
            let parts = split(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(parts.registry, registry, "{input}");
            assert_eq!(parts.repository, repository, "{input}");
            assert_eq!(parts.tag.as_deref(), tag, "{input}");
            assert_eq!(parts.digest.as_deref(), digest, "{input}");
        }
    }

    #[test]
    fn invalid_references_are_refused() {
        let long_name = format!("a/{}", "b".repeat(NAME_MAX));
        let long_tag = format!("a:{}", "t".repeat(TAG_MAX + 1));
        for input in [
            "",
            "Busybox",
            "UPPER/case",
            "busybox:",
            "busybox:.tag",
            "busybox:t@g",
            "a//b",
            "/a",
            "a/",
            "-a",
            "a-",
            "a..b",
            "a.-b",
            "a___b",
            "busybox@sha256:abc",
            "busybox@:0123456789abcdef0123456789abcdef",
            "busybox@1sha:0123456789abcdef0123456789abcdef",
            "busybox@sha256:0123456789abcdef0123456789abcdeg",
            "host-.com/a",
            "host:port/a",
            "host:/a",
            "[::1/a",
            "[zz]:5000/a",
            "a b",
            long_name.as_str(),
            long_tag.as_str(),
        ] {
            assert!(split(input).is_err(), "{input:?} was accepted: {:?}", split(input));
        }
    }
}
