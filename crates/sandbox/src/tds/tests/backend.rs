//! A scripted backend for protocol tests: each batch text or procedure name
//! selects a canned behaviour, so every token path can be driven by a real
//! client.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::sql::{
    Abort, CancelToken, Column, DataType, Length, LoginRequest, Output, Param, Request, SqlError,
    TransactionEvent, Value,
};
use crate::tds::codec::tests::samples as codec_samples;
use crate::tds::{Backend, BackendSession};

/// What the sessions observed, for assertions.
#[derive(Default)]
pub(crate) struct Events {
    pub waits: Mutex<Vec<Duration>>,
    pub closed: AtomicUsize,
    pub requests: Mutex<Vec<Request>>,
    pub slow_started: Notify,
    pub slow_cancelled: Notify,
    pub big_ready: Notify,
    pub session_closed: Notify,
}

impl Events {
    pub(crate) fn total_wait(&self) -> Duration {
        self.waits
            .lock()
            .map(|w| w.iter().sum())
            .unwrap_or_default()
    }
}

#[derive(Default)]
pub(crate) struct TestBackend {
    pub events: Arc<Events>,
    next_spid: AtomicU16,
}

impl Backend for TestBackend {
    type Session = TestSession;

    fn login(&self, request: &LoginRequest) -> Result<TestSession, SqlError> {
        if request.password == "wrong" {
            return Err(SqlError::login_failed(&request.user));
        }
        Ok(TestSession {
            spid: 51 + self.next_spid.fetch_add(1, Ordering::SeqCst),
            database: request
                .database
                .clone()
                .unwrap_or_else(|| "master".to_string()),
            events: self.events.clone(),
        })
    }
}

pub(crate) struct TestSession {
    spid: u16,
    database: String,
    events: Arc<Events>,
}

fn one_int(name: &str, v: i32) -> Output {
    Output::ResultSet {
        columns: vec![Column::new(name, DataType::Int, false)],
        rows: vec![vec![Value::Int(v)]],
    }
}

impl TestSession {
    fn batch(&mut self, sql: &str, cancel: &CancelToken) -> Vec<Output> {
        let mut words = sql.split_whitespace();
        let verb = words.next().unwrap_or("").to_ascii_uppercase();
        let arg = |w: Option<&str>| w.and_then(|s| s.parse::<usize>().ok()).unwrap_or(1);
        match verb.as_str() {
            "SELECT" | "ONE" => vec![one_int("", 1), Output::Done { rows: Some(1) }],
            "ERROR" => {
                let number = words.next().and_then(|n| n.parse().ok()).unwrap_or(50000);
                let err = SqlError::new(number, format!("Test error {number}"))
                    .with_state(3)
                    .with_line(2)
                    .with_procedure("test_proc");
                vec![Output::Message(err), Output::Done { rows: None }]
            }
            "INFO" => vec![
                Output::Message(SqlError::new(50001, "just saying").with_class(0)),
                one_int("x", 7),
                Output::Done { rows: Some(1) },
            ],
            "FATAL" => {
                let mut err = SqlError::new(50002, "the sky fell").with_class(20);
                err.abort = Abort::Connection;
                vec![Output::Message(err)]
            }
            "SLOW" => {
                self.events.slow_started.notify_one();
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    if cancel.check().is_err() {
                        self.events.slow_cancelled.notify_one();
                        return vec![
                            one_int("partial", 1),
                            Output::Message(SqlError::cancelled()),
                        ];
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                vec![one_int("finished", 1), Output::Done { rows: Some(1) }]
            }
            "MULTI" => vec![
                Output::ResultSet {
                    columns: vec![Column::new("a", DataType::Int, false)],
                    rows: vec![vec![Value::Int(1)], vec![Value::Int(2)]],
                },
                Output::Done { rows: Some(2) },
                Output::ResultSet {
                    columns: vec![Column::new(
                        "b",
                        DataType::NVarChar(Length::Fixed(10)),
                        true,
                    )],
                    rows: vec![vec![Value::String("x".into())]],
                },
                Output::Done { rows: Some(1) },
                Output::ResultSet {
                    columns: vec![Column::new("c", DataType::Bit, true)],
                    rows: vec![],
                },
                Output::Done { rows: Some(0) },
            ],
            "BIG" => {
                let rows = arg(words.next());
                let width = arg(words.next()).min(8000);
                let columns = vec![
                    Column::new("n", DataType::Int, false),
                    Column::new("payload", DataType::VarBinary(Length::Fixed(8000)), false),
                ];
                let rows = (0..rows)
                    .map(|i| {
                        vec![
                            Value::Int(i as i32),
                            Value::Binary(vec![(i % 256) as u8; width]),
                        ]
                    })
                    .collect();
                self.events.big_ready.notify_one();
                vec![
                    Output::ResultSet { columns, rows },
                    Output::Done { rows: None },
                ]
            }
            "TYPES" | "NULLS" => {
                let samples = codec_samples();
                let nullable = verb == "NULLS";
                let columns: Vec<Column> = samples
                    .iter()
                    .enumerate()
                    .map(|(i, (ty, _))| Column::new(format!("c{i}"), *ty, nullable || i % 2 == 0))
                    .collect();
                let mut rows = vec![samples.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()];
                if nullable {
                    rows.push(vec![Value::Null; samples.len()]);
                }
                vec![
                    Output::ResultSet { columns, rows },
                    Output::Done { rows: None },
                ]
            }
            "MISMATCH" => vec![
                Output::ResultSet {
                    columns: vec![Column::new("n", DataType::Int, false)],
                    rows: vec![vec![Value::Int(1)], vec![Value::String("oops".into())]],
                },
                Output::Done { rows: Some(2) },
            ],
            "USE" => {
                let to = words.next().unwrap_or("master").to_string();
                let from = std::mem::replace(&mut self.database, to.clone());
                vec![
                    Output::DatabaseChanged { from, to },
                    Output::Done { rows: None },
                ]
            }
            "BEGIN" | "SET" => vec![
                Output::Transaction(TransactionEvent::Begin {
                    descriptor: 0x0102_0304_0506_0708,
                }),
                Output::Done { rows: None },
            ],
            "COMMIT" => vec![
                Output::Transaction(TransactionEvent::Commit {
                    descriptor: 0x0102_0304_0506_0708,
                }),
                Output::Done { rows: None },
            ],
            "ROLLBACK" => vec![
                Output::Transaction(TransactionEvent::Rollback {
                    descriptor: 0x0102_0304_0506_0708,
                }),
                Output::Done { rows: None },
            ],
            _ => vec![Output::Message(SqlError::syntax(sql))],
        }
    }

    /// sp_executesql of "ECHO": one result set whose columns are the `@P`
    /// params. Other statements run as batches.
    fn echo(params: &[Param]) -> Vec<Output> {
        let params: Vec<&Param> = params.iter().filter(|p| p.name.starts_with('@')).collect();
        let columns = params
            .iter()
            .map(|p| Column::new(p.name.trim_start_matches('@'), p.ty, true))
            .collect();
        let row = params.iter().map(|p| p.value.clone()).collect();
        vec![
            Output::ResultSet {
                columns,
                rows: vec![row],
            },
            Output::Done { rows: Some(1) },
        ]
    }
}

impl BackendSession for TestSession {
    fn session_id(&self) -> u16 {
        self.spid
    }

    fn database(&self) -> String {
        self.database.clone()
    }

    fn execute(&mut self, request: Request, cancel: &CancelToken) -> Vec<Output> {
        if let Ok(mut log) = self.events.requests.lock() {
            log.push(request.clone());
        }
        match &request {
            Request::Batch { sql } => self.batch(sql.trim(), cancel),
            Request::Rpc { procedure, params } => match procedure.as_str() {
                "sp_executesql" => match params.first().map(|p| &p.value) {
                    Some(Value::String(stmt)) if stmt != "ECHO" => self.batch(stmt, cancel),
                    _ => Self::echo(params),
                },
                "sp_out" => vec![
                    Output::ReturnValue(Param {
                        name: "@out".into(),
                        ty: DataType::Int,
                        value: Value::Int(42),
                        output: true,
                    }),
                    Output::ReturnStatus(7),
                ],
                other => vec![Output::Message(
                    SqlError::new(2812, format!("Could not find stored procedure '{other}'."))
                        .with_state(62),
                )],
            },
        }
    }

    fn record_network_wait(&mut self, waited: Duration) {
        if let Ok(mut waits) = self.events.waits.lock() {
            waits.push(waited);
        }
    }

    fn close(&mut self) {
        self.events.closed.fetch_add(1, Ordering::SeqCst);
        self.events.session_closed.notify_one();
    }
}
