//! Compiles the CRI v1 contract in `proto/` into the `swapcri::cri` module, and the NRI
//! protocol (`proto/nri`, containerd/nri v0.12.1) into `swapcri::nri::api`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        // Records on disk keep the CRI configs a pod or container was created with.
        .type_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]")
        // A field a record lacks (written before the field existed) takes its proto default,
        // and a field it has that this build does not know is ignored: records written by
        // an older or a newer CRI read alike.
        .message_attribute(".", "#[serde(default)]")
        // The CRI fuzzer (unit tests only) builds arbitrary messages of every type.
        .type_attribute(".", "#[cfg_attr(test, derive(arbitrary::Arbitrary))]")
        .compile_protos(&["proto/runtime/v1/api.proto"], &["proto"])?;
    // NRI's messages only: the ttrpc services are dispatched by hand in `nri::rpc`.
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .compile_protos(&["proto/nri/api.proto"], &["proto"])?;
    Ok(())
}
