//! The Kubernetes side: the `CdcStream` CRD generated from the manifest
//! types, the pure reconcile steps (desired children, status and health
//! conditions), and the controller and worker shells that apply them.

pub mod children;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod progress;
pub mod status;
pub mod worker;

#[cfg(test)]
mod test_fixtures;
