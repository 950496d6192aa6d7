//! Acceptance tests of the test API server (one binary, one module per client).

mod auth;
mod builtins;
mod common;
mod discovery;
mod events;
mod helm;
mod identity;
mod kube_client;
mod kube_gc;
mod kube_ssa;
mod kube_watch;
mod kubectl;
mod kubelet;
mod lifecycle;
mod network;
mod pods;
