//! Harness kubelet: runs Pods as local processes of a configured binary and
//! drives minimal Deployment/ReplicaSet/Job/CronJob controllers.

use crate::state::State;
use std::path::PathBuf;
use tokio::task::JoinHandle;

/// Options of the harness kubelet.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// Binary that replaces the first element of every container's command.
    pub binary: PathBuf,
    /// Where container stdout/stderr go (served by `pods/log`).
    pub log_dir: PathBuf,
}

/// Starts the kubelet and controllers.
pub fn start(_st: State, _o: KubeletOptions) -> Vec<JoinHandle<()>> {
    vec![]
}
