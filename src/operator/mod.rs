//! The Kubernetes side: the `CdcStream` CRD generated from the manifest
//! types, the pure reconcile steps (desired children, status and health
//! conditions), and the controller and worker shells that apply them, with
//! what runs around the controller: leader election, metrics and retry
//! backoff.

pub mod backoff;
pub mod children;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod crd_reference;
pub mod leader;
pub mod metrics;
pub mod progress;
pub mod status;
pub mod supervisor;
pub mod worker;
pub mod yaml;

#[cfg(test)]
mod test_fixtures;
