//! Service-level tests: against a fake OCI runtime, and the CRI fuzzer.

#[cfg(test)]
mod checkpoint;
#[cfg(test)]
mod fake_runtime;
#[cfg(test)]
mod fixture;
#[cfg(test)]
mod fuzz;
