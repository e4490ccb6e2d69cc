//! The streaming server: kubelet (and crictl) get a single-use URL from Exec, Attach or
//! PortForward and connect there; the connection is upgraded to SPDY/3.1 or WebSocket and
//! carries the Kubernetes remote-command or port-forward protocol.

pub mod attach;
pub mod budget;
pub mod channels;
pub mod error;
pub mod exec;
pub mod idle;
pub mod portforward;
pub mod server;
pub mod session;
pub mod spdy;
pub mod tls;
pub mod websocket;

pub use error::StreamError;
pub use server::{Pending, StreamingServer};
