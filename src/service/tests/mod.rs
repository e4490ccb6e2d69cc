//! Service-level tests: against a fake OCI runtime, and the CRI fuzzer.

#[cfg(test)]
mod fake_runtime;
#[cfg(test)]
mod fuzz;
