//! The CRI v1 wire contract (package `runtime.v1`), generated from
//! `proto/runtime/v1/api.proto` by `build.rs`.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("runtime.v1");
