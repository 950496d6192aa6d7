//! Statement execution: the evaluation context, FROM/query evaluation,
//! DML, DDL and security statements, and the per-statement dispatcher.

pub mod admin;
pub mod alter;
pub mod context;
pub mod ddl;
pub mod dml;
pub mod from;
pub mod insert;
mod join_index;
pub mod needed;
mod output_rows;
pub mod query;
pub mod relation;
pub mod resolve;
pub mod scope;
pub mod statement;
pub mod tablesample;
