//! The NRI protocol's messages (package `nri.pkg.api.v1alpha1`, containerd/nri v0.12.1),
//! generated from `proto/nri/api.proto` by `build.rs`.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("nri.pkg.api.v1alpha1");
