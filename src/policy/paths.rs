//! Paths from requests that must stay under a directory of the node's (a container's log
//! under its pod's log directory): checked by their components before anything touches the
//! disk.

use std::path::{Component, Path, PathBuf};

use super::PolicyError;

/// `rel` as a relative path of plain names: no root, no `..`, no empty value.
pub fn relative_inside(field: &str, rel: &str) -> Result<PathBuf, PolicyError> {
    let path = Path::new(rel);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if rel.is_empty() || !plain || rel.contains('\0') {
        return Err(PolicyError::Invalid(format!(
            "{field} {rel:?} must be a relative path that stays inside its directory"
        )));
    }
    Ok(path.components().filter(|c| matches!(c, Component::Normal(_))).collect())
}

/// The container's log file: `log_path` under the pod's `log_directory` (None: no log).
pub fn container_log(log_directory: &str, log_path: &str) -> Result<Option<PathBuf>, PolicyError> {
    match (log_directory.is_empty(), log_path.is_empty()) {
        (_, true) => Ok(None),
        (true, false) => {
            Err(PolicyError::Invalid(format!("log_path {log_path:?} needs the pod's log_directory, which is unset")))
        }
        (false, false) => {
            let dir = Path::new(log_directory);
            if !dir.is_absolute() {
                return Err(PolicyError::Invalid(format!("log_directory {log_directory:?} is not absolute")));
            }
            Ok(Some(dir.join(relative_inside("log_path", log_path)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_paths() {
        let cases: [(&str, &str, Result<Option<&str>, &str>); 10] = [
            ("/var/log/pods/p", "c/0.log", Ok(Some("/var/log/pods/p/c/0.log"))),
            ("/var/log/pods/p", "./c/0.log", Ok(Some("/var/log/pods/p/c/0.log"))),
            ("/var/log/pods/p", "", Ok(None)),
            ("", "", Ok(None)),
            ("", "c.log", Err("needs the pod's log_directory")),
            ("/var/log/pods/p", "/etc/evil.log", Err("relative path")),
            ("/var/log/pods/p", "../../../../tmp/x.log", Err("relative path")),
            ("/var/log/pods/p", "c/../../x.log", Err("relative path")),
            ("/var/log/pods/p", "c/\0.log", Err("relative path")),
            ("logs", "c.log", Err("not absolute")),
        ];
        for (dir, path, want) in cases {
            match (container_log(dir, path), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, w.map(PathBuf::from), "{dir} {path}"),
                (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{dir} {path}: {e}"),
                (got, want) => panic!("{dir} {path}: got {got:?}, want {want:?}"),
            }
        }
    }
}
