//! The Kubernetes side: the `CdcStream` and `CdcSource` CRDs generated
//! from the manifest types (and written as YAML every reader reads the
//! same), the pure reconcile steps (desired children and their pod, what
//! the policy lets a stream run, status and health conditions; a source's
//! one worker and rolled-up status in the `source_*` modules), and the
//! controller and worker shells that apply them, with what runs around the controller:
//! leader election, metrics and the retry backoff of failing streams
//! (the crate's one policy, `crate::retry`, shaped by [`supervisor::RETRY`]).

pub mod admission;
pub mod capture_conditions;
pub mod children;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod crd_reference;
pub mod failure;
pub mod leader;
pub mod metrics;
pub mod pod;
pub mod pod_policy;
pub mod policy;
pub mod progress;
pub mod rollout;
pub mod secret_refs;
pub mod source_children;
pub mod source_conditions;
pub mod source_controller;
pub mod source_discovery;
pub mod source_report;
pub mod source_status;
pub mod spec_hash;
pub mod status;
pub mod supervisor;
#[cfg(feature = "failpoints")]
pub mod test_clock;
pub mod verdict;
pub mod volume_source;
pub mod worker;
pub mod worker_condition;
pub mod yaml;

#[cfg(test)]
mod test_fixtures;
