//! What one pull may make the node hold. Registry input is not trusted for size: every
//! manifest, config and blob is read against a cap, and decompression is metered.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::ImageConfig;

/// The caps of one pull (`[image]` settings).
#[derive(Debug, Clone)]
pub struct PullLimits {
    pub manifest_bytes: u64,
    pub config_bytes: u64,
    pub layers: usize,
    pub layer_unpacked_bytes: u64,
    pub image_unpacked_bytes: u64,
}

impl From<&ImageConfig> for PullLimits {
    fn from(c: &ImageConfig) -> Self {
        PullLimits {
            manifest_bytes: c.max_manifest_bytes,
            config_bytes: c.max_config_bytes,
            layers: c.max_layers,
            layer_unpacked_bytes: c.max_layer_unpacked_bytes,
            image_unpacked_bytes: c.max_image_unpacked_bytes,
        }
    }
}

impl Default for PullLimits {
    fn default() -> Self {
        PullLimits::from(&ImageConfig::default())
    }
}

/// A cap that was hit: the setting (or what else set it), and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit {
    pub setting: &'static str,
    pub limit: u64,
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every cap counts bytes but the layer count.
        let unit = if self.setting == "image.max_layers" { "layers" } else { "bytes" };
        write!(f, "over {} ({} {unit})", self.setting, self.limit)
    }
}

/// Decompressed bytes one image may still unpack, shared by its layers.
#[derive(Debug, Clone)]
pub struct UnpackBudget {
    layer: u64,
    image: u64,
    image_used: Arc<AtomicU64>,
}

impl UnpackBudget {
    pub fn new(limits: &PullLimits) -> Self {
        UnpackBudget {
            layer: limits.layer_unpacked_bytes,
            image: limits.image_unpacked_bytes,
            image_used: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A reader of one layer's decompressed stream that fails once it goes past a cap.
    pub fn meter<R: Read>(&self, inner: R) -> MeteredReader<R> {
        MeteredReader { inner, budget: self.clone(), read: 0, hit: None }
    }

    fn charge(&self, layer_total: u64, n: u64) -> Result<(), LimitHit> {
        if layer_total > self.layer {
            return Err(LimitHit { setting: "image.max_layer_unpacked_bytes", limit: self.layer });
        }
        if self.image_used.fetch_add(n, Ordering::Relaxed) + n > self.image {
            return Err(LimitHit { setting: "image.max_image_unpacked_bytes", limit: self.image });
        }
        Ok(())
    }
}

pub struct MeteredReader<R> {
    inner: R,
    budget: UnpackBudget,
    read: u64,
    /// Set when a cap stopped the stream: the error the unpacker saw is this one.
    pub hit: Option<LimitHit>,
}

impl<R: Read> Read for MeteredReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(hit) = self.hit {
            return Err(io::Error::other(hit.to_string()));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if let Err(hit) = self.budget.charge(self.read, n as u64) {
            self.hit = Some(hit);
            return Err(io::Error::other(hit.to_string()));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(layer: u64, image: u64) -> PullLimits {
        PullLimits { layer_unpacked_bytes: layer, image_unpacked_bytes: image, ..PullLimits::default() }
    }

    fn drain(r: &mut impl Read) -> io::Result<u64> {
        io::copy(r, &mut io::sink())
    }

    #[test]
    fn meters_each_layer_and_the_image() {
        // (layer cap, image cap, layer sizes, the cap hit on the layer that fails)
        let cases: &[(u64, u64, &[usize], Option<(usize, &str)>)] = &[
            (100, 1000, &[100, 100], None),
            (100, 1000, &[101], Some((0, "image.max_layer_unpacked_bytes"))),
            (100, 150, &[100, 60], Some((1, "image.max_image_unpacked_bytes"))),
            (1000, 1000, &[0, 1000], None),
        ];
        for (layer, image, sizes, expected) in cases {
            let budget = UnpackBudget::new(&limits(*layer, *image));
            let mut failed = None;
            for (n, size) in sizes.iter().enumerate() {
                let data = vec![0u8; *size];
                let mut r = budget.meter(&data[..]);
                if drain(&mut r).is_err() {
                    failed = Some((n, r.hit.unwrap().setting));
                    break;
                }
            }
            assert_eq!(failed, *expected, "{layer} {image} {sizes:?}");
        }
    }

    #[test]
    fn a_stopped_stream_stays_stopped() {
        let budget = UnpackBudget::new(&limits(4, 100));
        let data = [1u8; 16];
        let mut r = budget.meter(&data[..]);
        let mut buf = [0u8; 8];
        assert!(r.read(&mut buf).is_err());
        assert!(r.read(&mut buf).is_err());
    }
}
