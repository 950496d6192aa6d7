//! The one integration-test binary. Each module is a scenario family; every
//! extra `tests/*.rs` would link the whole dependency tree again.
//!
//! Tests run against the built-in sandbox by default, and against a real SQL
//! Server when `MSSQL_CDC_TEST_URL` holds an ADO.NET connection string for a
//! login that may create databases (see docs/testing.md). The lake tests
//! start moto and Azurite, and read tables back with DuckDB, all installed
//! by `scripts/test`.

mod support;

#[cfg(feature = "failpoints")]
mod engine_crash;
#[cfg(feature = "failpoints")]
mod engine_faults;
mod engine_history;
mod engine_monitoring;
mod engine_parallel;
#[cfg(feature = "failpoints")]
mod engine_parallel_crash;
mod engine_safety;
mod engine_schema_types;
mod engine_shared_tables;
mod engine_silver;
mod engine_source;
mod engine_source_changes;
mod engine_source_crash;
mod engine_source_faults;
mod engine_stores;
mod engine_stream;
mod facts_maintenance;
mod facts_source;

mod lake_stores;
mod monitoring;
mod operator_chart_alerts;
mod operator_controller;
mod operator_crd;
mod operator_e2e;
mod operator_examples;
mod operator_generate_streams;
mod operator_helm;
mod operator_leader;
mod operator_network;
mod operator_policy;
mod operator_scale;
mod operator_source_outage;
mod operator_status;
mod operator_status_traffic;
mod operator_worker;
mod operator_yaml;
mod sandbox_cdc_capture;
mod sandbox_cdc_cleanup;
mod sandbox_cdc_demo;
mod sandbox_cdc_monitoring;
mod sandbox_cdc_schema;
mod sandbox_cli;
mod sandbox_clients;
mod sandbox_errors;
mod sandbox_faults;
mod sandbox_login;
mod sandbox_sessions;
mod sandbox_sql;
mod sandbox_types;
mod source_changed_tables;
