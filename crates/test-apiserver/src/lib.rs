//! A test Kubernetes API server for mssql-cdc's tests: HTTPS on 127.0.0.1
//! with a CA of its own, authentication and RBAC, following the API
//! conventions closely enough that kubectl, Helm and kube-rs work against
//! it unchanged, plus a harness kubelet that runs Pods as local processes
//! in mount namespaces of their own. See `docs/testing-apiserver.md`.

pub mod admission;
pub mod aggregated;
pub mod annotations;
pub mod apply;
pub mod auth;
pub mod builtin;
pub mod builtin_schemas;
pub mod cel;
pub mod clock;
pub mod crd;
pub mod discovery;
pub mod error;
pub mod events;
pub mod fieldset;
pub mod gc;
pub mod http;
pub mod kubeconfig;
pub mod kubelet;
pub mod openapi;
pub mod ops;
pub mod patch;
pub mod printers;
pub mod protobuf;
pub mod resources;
pub mod selectors;
pub mod serve;
pub mod state;
pub mod store;
pub mod table;
pub mod tls;
pub mod traffic;
pub mod watch;
pub mod write;

pub use clock::Clock;
pub use kubelet::KubeletOptions;

use serde_json::json;
use state::{State, Target, WriteOpts};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Failure to start or restart the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding or inspecting the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The CA or a certificate could not be made.
    #[error(transparent)]
    Pki(#[from] tls::PkiError),
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: std::io::Error,
    },
}

/// Server options.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Interval between BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Number of write events retained for watch resumption.
    pub history: usize,
    /// Run the harness kubelet and workload controllers.
    pub kubelet: Option<KubeletOptions>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bookmark_interval: Duration::from_secs(1),
            history: 10_000,
            kubelet: None,
        }
    }
}

/// A running test API server. Dropping it stops serving, all controllers
/// and every container its kubelet started.
pub struct TestApiServer {
    state: State,
    addr: SocketAddr,
    shutdown: tokio::sync::watch::Sender<bool>,
    serve: Option<JoinHandle<tokio::net::TcpListener>>,
    background: Vec<JoinHandle<()>>,
    kubelet_data: Option<std::path::PathBuf>,
    /// The kubelet's container process groups, stopped with the server.
    groups: Option<std::sync::Arc<kubelet::groups::Groups>>,
}

impl TestApiServer {
    /// Starts serving on `opts.listen` with the default namespaces in place.
    pub async fn start(opts: ServerOptions) -> Result<Self, StartError> {
        let log_dir = opts.kubelet.as_ref().map(|k| k.log_dir.clone());
        let kubelet_data = opts.kubelet.as_ref().map(|k| k.data_dir.clone());
        let auth = state::AuthState {
            pki: tls::Pki::generate()?,
            signer: auth::tokens::Signer::generate(),
        };
        let traffic = traffic::Traffic::default();
        let mut state = State {
            store: store::Store::new(opts.history).counting(traffic.clone()),
            traffic,
            registry: resources::Registry::new(),
            clock: Clock::new(),
            addr: String::new(),
            bookmark_interval: opts.bookmark_interval,
            next_ip: Default::default(),
            log_dir,
            auth: std::sync::Arc::new(auth),
        };
        let listener = bind(opts.listen).await?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: opts.listen,
            source,
        })?;
        state.addr = addr.to_string();
        seed(&state);
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let mut background = vec![tokio::spawn(gc::run(state.clone()))];
        let mut groups = None;
        if let Some(k) = opts.kubelet {
            let (tasks, g) = kubelet::start(state.clone(), k);
            background.extend(tasks);
            groups = Some(g);
        }
        let mut me = Self {
            state,
            addr,
            shutdown,
            serve: None,
            background,
            kubelet_data,
            groups,
        };
        me.serve = Some(me.spawn_serve(listener));
        Ok(me)
    }

    fn spawn_serve(
        &self,
        listener: tokio::net::TcpListener,
    ) -> JoinHandle<tokio::net::TcpListener> {
        let ctx = http::Ctx {
            state: self.state.clone(),
            shutdown: self.shutdown.subscribe(),
        };
        let app = axum::Router::new().fallback(http::handle).with_state(ctx);
        let tls = self.state.auth.pki.server_config.clone();
        tokio::spawn(serve::serve(listener, tls, app, self.shutdown.subscribe()))
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The PEM certificate of the server's CA (what kubeconfigs and pods trust).
    pub fn ca_pem(&self) -> &str {
        &self.state.auth.pki.ca_pem
    }

    /// A kubeconfig for this server that authenticates with `token`.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        kubeconfig::render(
            &self.url(),
            &self.state.auth.pki.ca_pem,
            &kubeconfig::Credentials::Token(token.to_string()),
        )
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) for this server as its admin (`kubernetes-admin`
    /// in `system:masters`, which RBAC does not restrict), trusting its CA;
    /// default namespace `default`.
    pub fn kubeconfig(&self) -> String {
        let admin = &self.state.auth.pki.admin;
        kubeconfig::render(
            &self.url(),
            &self.state.auth.pki.ca_pem,
            &kubeconfig::Credentials::ClientCert(admin.clone()),
        )
    }

    /// Writes [`TestApiServer::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), StartError> {
        std::fs::write(path, self.kubeconfig()).map_err(|source| StartError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// Where the harness kubelet keeps volume `volume` of pod
    /// `namespace/pod` on the host (an emptyDir's directory, say), for tests
    /// that read what a container wrote; `None` without a kubelet or pod.
    pub fn pod_volume_path(
        &self,
        namespace: &str,
        pod: &str,
        volume: &str,
    ) -> Option<std::path::PathBuf> {
        let data_dir = self.kubelet_data.as_ref()?;
        let p = self
            .state
            .store
            .get(&store::Gr::new("", "pods"), namespace, pod)?;
        Some(
            kubelet::volumes::pod_dir(data_dir, &p)
                .join("volumes")
                .join(volume),
        )
    }

    /// The server's fake clock.
    pub fn clock(&self) -> &Clock {
        &self.state.clock
    }

    /// Compacts the event history: watches from older resourceVersions get 410.
    pub fn compact(&self) {
        self.state.store.compact();
    }

    /// Simulates an API server restart: closes every connection and watch,
    /// compacts the event history (so resuming clients get 410 Gone and must
    /// re-list), and serves again on the same address with the same objects.
    /// The listening socket is kept across the restart (clients that connect
    /// meanwhile wait in its backlog), so the port cannot be lost to another
    /// socket; it is bound afresh only if the old one could not be recovered.
    pub async fn restart(&mut self) -> Result<(), StartError> {
        let kept = self.stop_serving().await;
        self.state.store.compact();
        self.shutdown.send_replace(false);
        let listener = match kept {
            Some(l) => l,
            None => bind(self.addr).await?,
        };
        self.serve = Some(self.spawn_serve(listener));
        Ok(())
    }

    /// Stops serving; the listener back if the server stopped in time.
    async fn stop_serving(&mut self) -> Option<tokio::net::TcpListener> {
        self.shutdown.send_replace(true);
        let mut h = self.serve.take()?;
        // Bounded: a client holding a connection open must not hang the test.
        match tokio::time::timeout(Duration::from_secs(5), &mut h).await {
            Ok(Ok(listener)) => Some(listener),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the serving task ended abnormally");
                None
            }
            Err(_) => {
                tracing::warn!("graceful shutdown timed out");
                h.abort();
                let _ = h.await;
                None
            }
        }
    }

    /// Stops serving and all controllers, and stops every container the
    /// kubelet started (SIGTERM to its process group, SIGKILL after the
    /// grace period); returns once none of their processes is left.
    pub async fn shutdown(mut self) {
        self.stop_serving().await;
        for h in self.background.drain(..) {
            h.abort();
        }
        if let Some(g) = self.groups.take() {
            let _ = tokio::task::spawn_blocking(move || g.stop_all()).await;
        }
    }

    /// The requests served and the writes made so far (and a way to start
    /// counting again), for tests that measure API traffic.
    pub fn traffic(&self) -> &traffic::Traffic {
        &self.state.traffic
    }

    /// Shared state, for in-process tests that bypass HTTP.
    pub fn state(&self) -> &State {
        &self.state
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
        if let Some(h) = self.serve.take() {
            h.abort();
        }
        for h in self.background.drain(..) {
            h.abort();
        }
        // Blocking, as a drop must be: the containers are gone when it returns.
        if let Some(g) = self.groups.take() {
            g.stop_all();
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, StartError> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(|source| StartError::Listen { addr, source })?;
    sock.set_reuseaddr(true)
        .map_err(|source| StartError::Listen { addr, source })?;
    sock.bind(addr)
        .map_err(|source| StartError::Listen { addr, source })?;
    sock.listen(1024)
        .map_err(|source| StartError::Listen { addr, source })
}

/// Creates the namespaces every cluster has, the default RBAC policy and
/// the default StorageClass.
fn seed(st: &State) {
    auth::bootstrap::seed(st);
    kubelet::storage::seed(st);
    let Some(rt) = st.registry.by_kind("", "Namespace") else {
        return;
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let t = Target {
            rt: rt.clone(),
            version: "v1".into(),
            namespace: String::new(),
            name: ns.into(),
            sub: String::new(),
        };
        let o = WriteOpts {
            manager: "kube-apiserver".into(),
            ..Default::default()
        };
        let _ = ops::create(st, &t, json!({ "metadata": { "name": ns } }), &o);
    }
}
