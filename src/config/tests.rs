//! The configuration file: defaults, values and the errors bad values get.
use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

#[test]
fn default_document_matches_defaults() {
    assert_eq!(parse(DEFAULT_TOML).unwrap(), Config::default());
}

#[test]
fn handlers_in_the_file_add_to_the_builtin_one() {
    let config = parse("[runtime.handlers.crun]\nbinary = \"/usr/bin/crun\"").unwrap();
    let names: Vec<&str> = config.runtime.handlers.keys().map(String::as_str).collect();
    assert_eq!(names, ["crun", "runc"]);
    assert_eq!(config.runtime.default_handler, "runc");
    let specs = config.handler_specs();
    assert_eq!(specs[0].engine, crate::model::handler::Engine::Crun);
    assert_eq!(specs[1].binary, Path::new("/usr/sbin/runc"));
    let changed = parse("[runtime.handlers.runc]\nbinary = \"/opt/runc\"").unwrap();
    assert_eq!(changed.handler_specs()[0].binary, Path::new("/opt/runc"));
    assert_eq!(changed.runtime.handlers.len(), 1);
}

#[test]
fn empty_file_is_all_defaults() {
    assert_eq!(parse("").unwrap(), Config::default());
}

#[test]
fn values_and_errors() {
    struct Case {
        text: &'static str,
        error_mentions: Option<&'static str>,
    }
    let cases = [
        Case { text: "socket = \"/tmp/x.sock\"", error_mentions: None },
        Case { text: "sockett = \"/tmp/x.sock\"", error_mentions: Some("sockett") },
        Case { text: "[image]\npull_timeout = 3", error_mentions: Some("pull_timeout") },
        Case { text: "socket = \"relative.sock\"", error_mentions: Some("socket") },
        Case { text: "state_root = 7", error_mentions: Some("state_root") },
        Case { text: "log_level = \"info,=[\"", error_mentions: Some("log_level") },
        Case { text: "[runtime]\ncgroup_driver = \"systemd\"", error_mentions: None },
        Case { text: "[runtime]\ncgroup_driver = \"sytemd\"", error_mentions: Some("cgroup_driver") },
        Case { text: "[runtime]\nparent_slice = \"/swapcri\"", error_mentions: Some("runtime.parent_slice") },
        Case { text: "[runtime]\nmonitor_slice = \"a--b.slice\"", error_mentions: Some("runtime.monitor_slice") },
        Case { text: "[runtime]\ndefault_handler = \"crun\"", error_mentions: Some("runtime.default_handler") },
        Case {
            text: "[runtime]\ndefault_handler = \"crun\"\n[runtime.handlers.crun]\nbinary = \"/usr/bin/crun\"",
            error_mentions: None,
        },
        Case { text: "[runtime.handlers.crun]\nengine = \"kata\"", error_mentions: Some("engine") },
        Case { text: "[image]\npull_progress_timeout_secs = 0", error_mentions: Some("pull_progress_timeout_secs") },
        Case { text: "[image]\npull_min_rate_window_secs = 0", error_mentions: Some("pull_min_rate_window_secs") },
        Case { text: "[image]\npull_min_bytes_per_second = 0", error_mentions: None },
        Case { text: "[image]\nmax_layers = 0", error_mentions: Some("image.max_layers") },
        Case { text: "[runtime]\nmax_log_line_bytes = 0", error_mentions: Some("runtime.max_log_line_bytes") },
        Case { text: "[runtime]\nspare_monitors = 17", error_mentions: Some("runtime.spare_monitors") },
        Case { text: "[runtime]\nspare_monitors = 0", error_mentions: None },
        Case { text: "[memory_qos]\nthrottling_factor = 1.5", error_mentions: Some("memory_qos.throttling_factor") },
        Case { text: "[memory_qos]\nnode_allocatable_bytes = 0", error_mentions: Some("node_allocatable_bytes") },
        Case { text: "[streaming]\nmax_buffered_bytes = 1024", error_mentions: Some("streaming.max_buffered_bytes") },
        Case { text: "[streaming]\nmax_connections = 0", error_mentions: Some("streaming.max_connections") },
        Case { text: "[network]\nplugin_timeout_seconds = 0", error_mentions: Some("plugin_timeout_seconds") },
        Case {
            text: "[registries.\"r.local:5000\"]\nplain_http = true\nmirrors = [\"m.local\"]",
            error_mentions: None,
        },
        Case { text: "[registries.\"http://r.local\"]\nplain_http = true", error_mentions: Some("registries") },
        Case { text: "[registries.\"r.local\"]\nplain = true", error_mentions: Some("plain") },
        Case {
            text: "[runtime.handlers.runc]\nbinary = \"runc\"",
            error_mentions: Some("runtime.handlers.runc.binary"),
        },
        Case { text: "[streaming]\ntls_cert_file = \"/etc/c.pem\"", error_mentions: Some("tls_cert_file") },
        Case {
            text: "[streaming]\ntls_cert_file = \"/etc/c.pem\"\ntls_key_file = \"/etc/k.pem\"",
            error_mentions: None,
        },
    ];
    for case in cases {
        match (parse(case.text), case.error_mentions) {
            (Ok(_), None) => {}
            (Err(e), Some(word)) => {
                assert!(e.to_string().contains(word), "{:?}: error {e} does not name {word}", case.text)
            }
            (Ok(_), Some(word)) => {
                panic!("{:?} accepted, expected an error naming {word}", case.text)
            }
            (Err(e), None) => panic!("{:?} rejected: {e}", case.text),
        }
    }
}

#[test]
fn overrides_replace_file_values() {
    let mut config = parse("socket = \"/a.sock\"").unwrap();
    config.apply(Overrides { socket: Some("/b.sock".into()), ..Default::default() }).unwrap();
    assert_eq!(config.socket, PathBuf::from("/b.sock"));
    let bad = config.apply(Overrides { run_root: Some("rel".into()), ..Default::default() });
    assert!(bad.unwrap_err().to_string().contains("run_root"));
}

#[test]
fn the_kind_node_configuration_names_kinds_runc() {
    // The file the kind node image installs (Dockerfile): kindest/node keeps runc in
    // /usr/local/sbin, and its kubelet follows the systemd driver.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/kind/config.toml");
    let config = Config::load(&path, true).unwrap();
    assert_eq!(config.runtime.default_handler, "runc");
    assert_eq!(config.handler_specs()[0].binary, Path::new("/usr/local/sbin/runc"));
    assert_eq!(config.runtime.cgroup_driver, CgroupDriver::Systemd);
}

/// docs/config.md's default column, key by key, against `Config::default()`: a default in
/// backticks is that TOML value, `unset` is an absent key; rows whose default is prose (a
/// rule) or whose key is a template (`handlers.<name>.…`) are left out.
#[test]
fn the_reference_gives_the_defaults_the_code_has() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md")).unwrap();
    let defaults = toml::Value::try_from(Config::default()).unwrap();
    let (mut section, mut checked) = (None::<String>, 0);
    for line in doc.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            section = match title {
                "Top level" => Some(String::new()),
                t if t.starts_with("`[") && !t.contains('"') => Some(t.trim_matches(['`', '[', ']']).to_string()),
                _ => None,
            };
            continue;
        }
        let Some(section) = &section else { continue };
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, key, default, ..] = cells[..] else { continue };
        let Some(key) = key.strip_prefix('`').and_then(|k| k.strip_suffix('`')) else { continue };
        if key.contains('<') {
            continue;
        }
        let table =
            if section.is_empty() { defaults.as_table() } else { defaults.get(section).and_then(|v| v.as_table()) };
        let actual = table.unwrap_or_else(|| panic!("no section {section:?}")).get(key);
        let want = if default == "unset" {
            None
        } else if let Some(text) = default.strip_prefix('`').and_then(|d| d.strip_suffix('`')) {
            let value = format!("v = {text}").parse::<toml::Table>().map(|mut t| t.remove("v").unwrap());
            Some(value.unwrap_or_else(|_| toml::Value::String(text.to_string())))
        } else {
            continue;
        };
        assert_eq!(actual, want.as_ref(), "docs/config.md [{section}] {key}: the default column says {default}");
        checked += 1;
    }
    assert!(checked >= 80, "only {checked} defaults read from docs/config.md: has its table format changed?");
}
