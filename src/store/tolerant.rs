//! Decoding that gives one field its default rather than failing the whole record.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// Decodes a field a record can live without (derived or informational): when the stored
/// shape is one this build cannot read (another version changed its type), the field takes
/// its default and the rest of the record still loads.
pub fn tolerant<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a record field of a shape this build does not read is left at its default");
        T::default()
    }))
}

#[cfg(test)]
mod tests {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Record {
        id: String,
        #[serde(default, deserialize_with = "super::tolerant")]
        plan: Option<Vec<u32>>,
    }

    #[test]
    fn a_field_of_another_shape_takes_its_default() {
        let table = [
            (r#"{"id":"a","plan":[1,2]}"#, Some(vec![1, 2])),
            (r#"{"id":"a","plan":{"now":"a map"}}"#, None),
            (r#"{"id":"a","plan":"text"}"#, None),
            (r#"{"id":"a"}"#, None),
        ];
        for (json, plan) in table {
            let record: Record = serde_json::from_str(json).unwrap();
            assert_eq!(record, Record { id: "a".into(), plan }, "{json}");
        }
        assert!(serde_json::from_str::<Record>(r#"{"plan":[1]}"#).is_err(), "an id stays required");
    }
}
