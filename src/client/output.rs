//! What a client command prints and how it exits.

/// A command run in a container exited non-zero: the client prints its output and exits
/// with the same code, like `crictl exec`.
#[derive(Debug)]
pub struct CommandExit {
    pub code: i32,
    pub output: String,
}

impl std::fmt::Display for CommandExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "command exited with code {}", self.code)
    }
}

impl std::error::Error for CommandExit {}

/// Pretty JSON of a response; the verbose `info` values that hold JSON documents are shown as
/// JSON rather than as escaped strings, as crictl does.
pub(crate) fn to_json<T: serde::Serialize>(response: tonic::Response<T>) -> serde_json::Result<String> {
    let mut value = serde_json::to_value(response.get_ref())?;
    if let Some(info) = value.get_mut("info").and_then(|i| i.as_object_mut()) {
        for v in info.values_mut() {
            if let Some(doc) = v.as_str().and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) {
                *v = doc;
            }
        }
    }
    serde_json::to_string_pretty(&value)
}
