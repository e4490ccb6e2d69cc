use std::path::PathBuf;

use crate::error::Error;
use crate::image::FsUsage;

use crate::service::image_service::ImageService;

impl ImageService {
    /// Usage of the image filesystem and the directory that identifies it.
    pub async fn fs_info(&self) -> Result<(PathBuf, FsUsage), Error> {
        let usage = self.blocking(|s| s.usage()).await?;
        Ok((self.store.layers_dir(), usage))
    }
}
