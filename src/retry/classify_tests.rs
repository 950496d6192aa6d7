use super::*;
use deltalake::kernel::transaction::TransactionError;
use deltalake::parquet::errors::ParquetError;
use object_store::ObjectStoreExt;

fn unavailable() -> object_store::Error {
    object_store::Error::Generic {
        store: "S3",
        source: Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )),
    }
}

fn not_found() -> object_store::Error {
    object_store::Error::NotFound {
        path: "t/_delta_log/00000000000000000007.json".into(),
        source: "404".into(),
    }
}

/// A real S3 client against a socket that answers every request with
/// `status`: the error object_store's retry layer gives up with.
async fn s3_answering(status: &'static str) -> object_store::Error {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let answer =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(format!("http://127.0.0.1:{port}"))
        .with_allow_http(true)
        .with_bucket_name("lake")
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_retry(object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .build()
        .expect("store");
    match store.get(&"t/_delta_log/_last_checkpoint".into()).await {
        Ok(_) => panic!("the store answered {status} with an object"),
        Err(error) => error,
    }
}

#[tokio::test]
async fn a_503_from_the_store_is_transient_and_a_404_or_403_is_not() {
    let busy = s3_answering("503 Service Unavailable").await;
    assert!(
        matches!(busy, object_store::Error::Generic { .. }),
        "{busy:?}"
    );
    assert!(store_transient(&busy), "{busy}");
    let missing = s3_answering("404 Not Found").await;
    assert!(!store_transient(&missing), "{missing}");
    let denied = s3_answering("403 Forbidden").await;
    assert!(!store_transient(&denied), "{denied}");
}

#[test]
fn store_errors_are_transient_unless_they_are_answers() {
    assert!(store_transient(&unavailable()));
    assert!(!store_transient(&not_found()));
    let denied = object_store::Error::PermissionDenied {
        path: "t".into(),
        source: "403".into(),
    };
    assert!(!store_transient(&denied));
    let exists = object_store::Error::AlreadyExists {
        path: "offsets/1".into(),
        source: "412".into(),
    };
    assert!(!store_transient(&exists));
    let untyped = object_store::Error::Generic {
        store: "S3",
        source: "Server returned non-2xx status code: 503".into(),
    };
    assert!(
        store_transient(&untyped),
        "a failed request with no typed cause"
    );
}

#[test]
fn a_cut_connection_is_transient_and_a_read_only_or_full_disk_is_an_answer() {
    use std::io::ErrorKind as K;
    let io = |kind| std::io::Error::new(kind, "/lake/orders");
    for kind in [
        K::ConnectionReset,
        K::BrokenPipe,
        K::TimedOut,
        K::UnexpectedEof,
    ] {
        assert!(io_transient(&io(kind)), "{kind:?}");
    }
    for kind in [K::ReadOnlyFilesystem, K::StorageFull, K::PermissionDenied] {
        assert!(!io_transient(&io(kind)), "{kind:?}");
        let local = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(io(kind)),
        };
        assert!(!store_transient(&local), "{kind:?}");
    }
    let cut = tiberius::error::Error::Io {
        kind: K::ConnectionReset,
        message: "connection reset by peer".into(),
    };
    assert!(sql_transient(&cut));
}

#[test]
fn the_kernel_s_store_and_io_errors_are_judged_by_their_type() {
    let cases: Vec<(&str, delta_kernel::Error, bool)> = vec![
        (
            "store down",
            delta_kernel::Error::ObjectStore(unavailable()),
            true,
        ),
        (
            "read-only",
            delta_kernel::Error::IOError(std::io::Error::new(
                std::io::ErrorKind::ReadOnlyFilesystem,
                "read-only file system",
            )),
            false,
        ),
        (
            "missing file",
            delta_kernel::Error::FileNotFound("x".into()),
            false,
        ),
        (
            "a generic answer",
            delta_kernel::Error::Generic("bad".into()),
            false,
        ),
    ];
    for (name, error, transient) in cases {
        assert_eq!(kernel_transient(&error), transient, "{name}");
        let wrapped = DeltaTableError::KernelError(error);
        assert_eq!(delta_transient(&wrapped), transient, "{name} in deltalake");
    }
}

#[test]
fn delta_errors_are_judged_by_variant_or_by_their_typed_cause() {
    let cases: Vec<(&str, DeltaTableError, bool)> = vec![
        (
            "log read",
            DeltaTableError::ObjectStore {
                source: unavailable(),
            },
            true,
        ),
        (
            "NotFound: a missing log file",
            DeltaTableError::ObjectStore {
                source: not_found(),
            },
            false,
        ),
        (
            "commit conflict",
            DeltaTableError::Transaction {
                source: TransactionError::VersionAlreadyExists(7),
            },
            true,
        ),
        (
            "version already exists",
            DeltaTableError::VersionAlreadyExists(7),
            true,
        ),
        (
            "Parquet upload (External)",
            DeltaTableError::Parquet {
                source: ParquetError::External(Box::new(unavailable())),
            },
            true,
        ),
        (
            "generic with a store cause",
            DeltaTableError::GenericError {
                source: Box::new(unavailable()),
            },
            true,
        ),
        (
            "kernel (deltalake's) with a store cause",
            DeltaTableError::Kernel {
                source: deltalake::kernel::Error::ObjectStore(unavailable()),
            },
            true,
        ),
        (
            "a table that is not there",
            DeltaTableError::NotATable("t".into()),
            false,
        ),
        (
            "a schema that does not fit",
            DeltaTableError::SchemaMismatch {
                msg: "column x".into(),
            },
            false,
        ),
        (
            "a kernel store failure deltalake stringified (get_latest_version)",
            DeltaTableError::Generic("Error interacting with object store: 503".into()),
            true,
        ),
        (
            "a stringified read-only disk",
            DeltaTableError::Generic(
                "Error interacting with object store: Read-only file system (os error 30)".into(),
            ),
            false,
        ),
        (
            "a generic answer",
            DeltaTableError::Generic("bad partition value".into()),
            false,
        ),
    ];
    for (name, error, transient) in cases {
        assert_eq!(delta_transient(&error), transient, "{name}: {error}");
    }
}

#[test]
fn sql_server_errors_are_judged_by_their_number() {
    for code in [1205, 40613, 4060] {
        assert!(sql_code_transient(code), "{code}");
    }
    for code in [18456, 229, 208, 313] {
        assert!(!sql_code_transient(code), "{code}");
    }
    let routing = tiberius::error::Error::Routing {
        host: "replica".into(),
        port: 1433,
    };
    assert!(sql_transient(&routing));
    let conversion = tiberius::error::Error::Conversion("not a date".into());
    assert!(!sql_transient(&conversion));
}

#[test]
fn kube_errors_retry_a_busy_or_failing_api_server_only() {
    let api = |code: u16| {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    };
    for code in [409, 429, 500, 503] {
        assert!(kube_transient(&api(code)), "{code}");
    }
    for code in [400, 403, 404, 422] {
        assert!(!kube_transient(&api(code)), "{code}");
    }
    let wrapped = object_store::Error::Generic {
        store: "S3",
        source: Box::new(api(403)),
    };
    assert_eq!(
        chain_transient(&wrapped),
        Some(false),
        "found through the chain"
    );
}
