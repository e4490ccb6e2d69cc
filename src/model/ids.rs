//! Sandbox and container ids: 64 lowercase hex digits, random.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($name:ident, $what:literal) => {
        #[doc = concat!("A ", $what, " id.")]
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn generate() -> Self {
                $name(random_hex())
            }

            /// Accepts a full id only; prefixes are resolved by the store.
            pub fn parse(s: &str) -> Option<Self> {
                is_id(s).then(|| $name(s.to_string()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(SandboxId, "pod sandbox");
id_type!(ContainerId, "container");

fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the kernel's random source");
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_hex() {
        let a = ContainerId::generate();
        let b = ContainerId::generate();
        assert_ne!(a, b);
        assert!(ContainerId::parse(a.as_str()).is_some());
        assert!(SandboxId::parse("abc").is_none());
        assert!(SandboxId::parse(&"G".repeat(64)).is_none());
    }
}
