//! CRI ImageService adapter.

use std::sync::Arc;

use crate::cri;
use crate::cri::image_service_server::ImageService as CriImageService;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::service::ImageService;

use super::convert;
use super::deadline::ClientGone;
use super::stream::{batched, ListStream};
use crate::error::CallEnd;

pub struct ImageApi {
    images: Arc<ImageService>,
}

impl ImageApi {
    pub fn new(images: Arc<ImageService>) -> Self {
        ImageApi { images }
    }
}

#[tonic::async_trait]
impl CriImageService for ImageApi {
    async fn list_images(
        &self,
        request: Request<cri::ListImagesRequest>,
    ) -> Result<Response<cri::ListImagesResponse>, Status> {
        let req = request.into_inner();
        let filter = req.filter.and_then(|f| f.image).map(|s| s.image).filter(|s| !s.is_empty());
        async {
            let images = self.images.list(filter.as_deref()).await?;
            Ok(Response::new(cri::ListImagesResponse { images: images.into_iter().map(convert::image).collect() }))
        }
        .instrument(tracing::debug_span!("rpc", method = "ListImages"))
        .await
    }

    type StreamImagesStream = ListStream<cri::StreamImagesResponse>;

    async fn stream_images(
        &self,
        request: Request<cri::StreamImagesRequest>,
    ) -> Result<Response<Self::StreamImagesStream>, Status> {
        let req = request.into_inner();
        let filter = req.filter.and_then(|f| f.image).map(|s| s.image).filter(|s| !s.is_empty());
        let images = self.images.list(filter.as_deref()).await?;
        let images = images.into_iter().map(convert::image).collect();
        Ok(Response::new(batched(images, |images| cri::StreamImagesResponse { images })))
    }

    async fn image_status(
        &self,
        request: Request<cri::ImageStatusRequest>,
    ) -> Result<Response<cri::ImageStatusResponse>, Status> {
        let req = request.into_inner();
        async {
            let reference = convert::image_reference(req.image.as_ref())?;
            let found = self.images.status(reference, req.verbose).await?;
            let (image, info) = match found {
                Some((view, info)) => (Some(convert::image(view)), info),
                None => (None, None),
            };
            let info = info.map(|i| [("info".to_string(), i)].into()).unwrap_or_default();
            Ok(Response::new(cri::ImageStatusResponse { image, info }))
        }
        .instrument(tracing::debug_span!("rpc", method = "ImageStatus"))
        .await
    }

    async fn pull_image(
        &self,
        request: Request<cri::PullImageRequest>,
    ) -> Result<Response<cri::PullImageResponse>, Status> {
        let gone = request.extensions().get::<ClientGone>().cloned();
        let req = request.into_inner();
        let span = tracing::info_span!(
            "rpc",
            method = "PullImage",
            image = req.image.as_ref().map(|i| i.image.as_str()).unwrap_or("")
        );
        async {
            let reference = convert::image_reference(req.image.as_ref())?;
            let auth = convert::credentials(req.auth.as_ref())?;
            let pull = self.images.pull(reference, auth);
            // A client that stops waiting leaves the pull to any other caller of the same
            // image; with none, it is abandoned (image::puller).
            let id = match gone {
                Some(ClientGone(gone)) => tokio::select! {
                    id = pull => id?,
                    () = gone.cancelled() => return Err(CallEnd::ClientLeft("the pull").into()),
                },
                None => pull.await?,
            };
            Ok(Response::new(cri::PullImageResponse { image_ref: id.to_string() }))
        }
        .instrument(span)
        .await
    }

    async fn remove_image(
        &self,
        request: Request<cri::RemoveImageRequest>,
    ) -> Result<Response<cri::RemoveImageResponse>, Status> {
        let req = request.into_inner();
        async {
            let reference = convert::image_reference(req.image.as_ref())?;
            self.images.remove(reference).await?;
            Ok(Response::new(cri::RemoveImageResponse {}))
        }
        .instrument(tracing::info_span!("rpc", method = "RemoveImage"))
        .await
    }

    async fn image_fs_info(
        &self,
        _request: Request<cri::ImageFsInfoRequest>,
    ) -> Result<Response<cri::ImageFsInfoResponse>, Status> {
        async {
            let (mountpoint, usage) = self.images.fs_info().await?;
            Ok(Response::new(cri::ImageFsInfoResponse {
                image_filesystems: vec![convert::fs_usage(&mountpoint, usage)],
                container_filesystems: Vec::new(),
            }))
        }
        .instrument(tracing::debug_span!("rpc", method = "ImageFsInfo"))
        .await
    }
}
