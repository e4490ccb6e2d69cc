//! Network configuration lists from the CNI config directory: `*.conflist` files, and
//! single-plugin `*.conf` / `*.json` files treated as a list of one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One network: its plugins run in order on ADD and in reverse on DEL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkList {
    pub name: String,
    pub cni_version: String,
    #[serde(default)]
    pub disable_check: bool,
    /// Each plugin's configuration as written (it always has a string `type`).
    pub plugins: Vec<Map<String, Value>>,
    pub source: PathBuf,
}

impl NetworkList {
    pub fn plugin_types(&self) -> impl Iterator<Item = &str> {
        self.plugins.iter().filter_map(|p| p.get("type").and_then(Value::as_str))
    }
}

/// Why the config directory offers no network.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfError {
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("no network configuration in {}", .0.display())]
    Missing(PathBuf),
    #[error("{}", join(.0))]
    NoneUsable(Vec<ConfError>),
}

fn join(errors: &[ConfError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Parses one file; `.conflist` must be a list, the others may be a single plugin.
pub fn parse(path: &Path, text: &str) -> Result<NetworkList, ConfError> {
    parse_list(path, text).map_err(|reason| ConfError::Invalid { path: path.to_path_buf(), reason: reason.into() })
}

fn parse_list(path: &Path, text: &str) -> Result<NetworkList, std::borrow::Cow<'static, str>> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let obj = doc.as_object().ok_or("not a JSON object")?;
    let string = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_string);
    let name = string("name").filter(|n| !n.is_empty()).ok_or("no \"name\"")?;
    let cni_version = string("cniVersion").ok_or("no \"cniVersion\"")?;
    let plugins: Vec<Map<String, Value>> = match obj.get("plugins") {
        Some(Value::Array(list)) => {
            list.iter().map(|p| p.as_object().cloned().ok_or("a plugin is not an object")).collect::<Result<_, _>>()?
        }
        Some(_) => return Err("\"plugins\" is not a list".into()),
        None if path.extension().is_some_and(|e| e == "conflist") => return Err("no \"plugins\"".into()),
        None => vec![obj.clone()],
    };
    if plugins.is_empty() {
        return Err("\"plugins\" is empty".into());
    }
    for p in &plugins {
        match p.get("type").and_then(Value::as_str) {
            Some(t) if !t.is_empty() && !t.contains('/') => {}
            _ => return Err("a plugin has no valid \"type\"".into()),
        }
    }
    let disable_check = obj.get("disableCheck").and_then(Value::as_bool).unwrap_or(false);
    Ok(NetworkList { name, cni_version, disable_check, plugins, source: path.to_path_buf() })
}

/// The first valid configuration by file name, or why there is none.
pub fn load_first(dir: &Path) -> Result<NetworkList, ConfError> {
    let invalid =
        |path: &Path, e: std::io::Error| ConfError::Invalid { path: path.to_path_buf(), reason: e.to_string() };
    let entries = std::fs::read_dir(dir).map_err(|e| invalid(dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "conflist" || e == "conf" || e == "json"))
        .collect();
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let parsed = std::fs::read_to_string(&file).map_err(|e| invalid(&file, e)).and_then(|t| parse(&file, &t));
        match parsed {
            Ok(list) => return Ok(list),
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        Err(ConfError::Missing(dir.to_path_buf()))
    } else {
        Err(ConfError::NoneUsable(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_single_plugins() {
        let cases: &[(&str, &str, Result<(&str, usize), &str>)] = &[
            (
                "10-a.conflist",
                r#"{"cniVersion":"1.0.0","name":"pods","plugins":[{"type":"bridge"},{"type":"portmap"}]}"#,
                Ok(("pods", 2)),
            ),
            ("10-a.conf", r#"{"cniVersion":"0.4.0","name":"one","type":"bridge"}"#, Ok(("one", 1))),
            ("10-a.conflist", r#"{"cniVersion":"1.0.0","name":"x","type":"bridge"}"#, Err("no \"plugins\"")),
            ("10-a.conflist", r#"{"cniVersion":"1.0.0","name":"x","plugins":[]}"#, Err("\"plugins\" is empty")),
            ("10-a.conflist", r#"{"cniVersion":"1.0.0","plugins":[{"type":"b"}]}"#, Err("no \"name\"")),
            ("10-a.conflist", r#"{"name":"x","plugins":[{"type":"b"}]}"#, Err("no \"cniVersion\"")),
            ("a.conflist", r#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"../b"}]}"#, Err("no valid")),
            ("a.conflist", r#"{"cniVersion":"1.0.0","name":"x","plugins":[{}]}"#, Err("no valid")),
            ("a.conflist", "[1]", Err("not a JSON object")),
            ("a.conflist", "{", Err("not JSON")),
        ];
        for (file, text, want) in cases {
            let got = parse(Path::new(file), text);
            match (want, &got) {
                (Ok((name, n)), Ok(list)) => assert_eq!((list.name.as_str(), list.plugins.len()), (*name, *n)),
                (Err(msg), Err(e)) => assert!(e.to_string().contains(msg), "{file} {text}: {e}"),
                _ => panic!("{file} {text}: {got:?}"),
            }
        }
    }

    #[test]
    fn first_valid_file_by_name_wins() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_first(dir.path()).unwrap_err().to_string().contains("no network configuration"));
        std::fs::write(dir.path().join("05-broken.conflist"), "{").unwrap();
        std::fs::write(dir.path().join("README"), "not a config").unwrap();
        let err = load_first(dir.path()).unwrap_err().to_string();
        assert!(err.contains("05-broken.conflist: not JSON"), "{err}");
        std::fs::write(dir.path().join("20-b.conf"), r#"{"cniVersion":"1.0.0","name":"b","type":"ptp"}"#).unwrap();
        std::fs::write(
            dir.path().join("10-a.conflist"),
            r#"{"cniVersion":"1.0.0","name":"a","disableCheck":true,"plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        let list = load_first(dir.path()).unwrap();
        assert_eq!((list.name.as_str(), list.disable_check), ("a", true));
        assert_eq!(list.plugin_types().collect::<Vec<_>>(), ["bridge"]);
    }
}
