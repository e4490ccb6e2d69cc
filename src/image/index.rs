//! The image index: every image and layer the store holds, as one versioned document.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(super) struct Index {
    pub(super) images: BTreeMap<ImageId, ImageRecord>,
    pub(super) layers: BTreeMap<Digest, LayerRecord>,
}
