//! HTTP routing: maps Kubernetes REST paths and verbs onto discovery,
//! OpenAPI and object operations, and renders results and errors.

use crate::auth::rbac::{self, Attributes};
use crate::auth::{self, PeerIdentity, User};
use crate::error::{ApiError, ApiResult};
use crate::patch::PatchType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::{DeleteOpts, State, Target, WriteOpts};
use crate::{aggregated, discovery, openapi, ops, table, watch};
use axum::body::Body;
use axum::http::{HeaderMap, Method, Response, StatusCode, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;

/// Per-server context handed to every request.
#[derive(Clone)]
pub struct Ctx {
    pub state: State,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .unwrap_or_default()
}

/// A 200 JSON document with a content type naming its kind (aggregated
/// discovery), which clients check before decoding.
fn typed_json_response(content_type: &str, v: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::VARY, "Accept")
        .body(Body::from(v.to_string()))
        .unwrap_or_default()
}

fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code(), &e.status())
}

fn text_response(code: u16, s: String) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(s))
        .unwrap_or_default()
}

/// The single entry point: axum's fallback handler.
pub async fn handle(
    axum::extract::State(ctx): axum::extract::State<Ctx>,
    req: axum::extract::Request,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return error_response(&ApiError::BadRequest(format!("reading body: {e}"))),
    };
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let path = parts.uri.path().trim_end_matches('/').to_string();
    tracing::debug!(method = %parts.method, %path, ?query, "request");
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    ctx.state
        .traffic
        .request(parts.method.as_str(), &path, watch);
    let peer = parts.extensions.get::<PeerIdentity>();
    let user = match auth::request_user(&ctx.state, &parts.headers, peer) {
        Ok(u) => u,
        Err(e) => return error_response(&e),
    };
    let req = Request {
        user: &user,
        method: &parts.method,
        path: &path,
        q: &query,
        h: &parts.headers,
        body: &body,
    };
    match route(&ctx, &req) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "request failed");
            error_response(&e)
        }
    }
}

fn header(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// One request, as `route` sees it.
struct Request<'a> {
    user: &'a User,
    method: &'a Method,
    path: &'a str,
    q: &'a HashMap<String, String>,
    h: &'a HeaderMap,
    body: &'a [u8],
}

/// 403 unless the user may do `a`.
fn authorize(st: &crate::state::State, user: &User, a: &Attributes) -> ApiResult<()> {
    if rbac::authorize(st, user, a).allowed {
        return Ok(());
    }
    tracing::debug!(user = %user.name, ?a, "forbidden");
    Err(rbac::forbidden(user, a))
}

/// The RBAC verb of a resource request.
fn verb(method: &Method, named: bool, q: &HashMap<String, String>) -> &'static str {
    let watch = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    match (method.clone(), named) {
        (Method::GET, _) if watch => "watch",
        (Method::GET, true) => "get",
        (Method::GET, false) => "list",
        (Method::POST, _) => "create",
        (Method::PUT, _) => "update",
        (Method::PATCH, _) => "patch",
        (Method::DELETE, true) => "delete",
        (Method::DELETE, false) => "deletecollection",
        _ => "",
    }
}

fn route(ctx: &Ctx, req: &Request<'_>) -> ApiResult<Response<Body>> {
    let (method, path, q, h, body) = (req.method, req.path, req.q, req.h, req.body);
    let st = &ctx.state;
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is_resource_path = matches!(
        segs.as_slice(),
        ["api", "v1", _, ..] | ["apis", _, _, _, ..]
    );
    if !is_resource_path {
        let p = if path.is_empty() { "/" } else { path };
        let a = Attributes::non_resource(&method.as_str().to_ascii_lowercase(), p);
        authorize(st, req.user, &a)?;
    }
    let not_found = || ApiError::NotFound {
        resource: String::new(),
        name: path.to_string(),
    };
    match segs.as_slice() {
        ["version"] => return Ok(json_response(200, &discovery::version())),
        ["healthz"] | ["readyz"] | ["livez"] => return Ok(text_response(200, "ok".into())),
        ["api"] | ["apis"] => {
            let core = segs.len() == 1 && segs[0] == "api";
            if let Some(v) = aggregated::negotiate(header(h, header::ACCEPT)) {
                let doc = aggregated::document(&st.registry, core, v);
                return Ok(typed_json_response(&v.content_type(), &doc));
            }
            let doc = if core {
                discovery::core_versions(&st.addr)
            } else {
                discovery::group_list(&st.registry)
            };
            return Ok(json_response(200, &doc));
        }
        ["openapi", rest @ ..] => {
            return openapi::serve(st, rest, q)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found);
        }
        ["apis", g] => {
            return discovery::group(&st.registry, g)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found);
        }
        ["api", "v1"] => {
            return discovery::resource_list(&st.registry, "", "v1")
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found);
        }
        ["apis", g, v] => {
            return discovery::resource_list(&st.registry, g, v)
                .map(|v| json_response(200, &v))
                .ok_or_else(not_found);
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, rest @ ..] if *plural != "status" && *plural != "finalize" => (
            ns.to_string(),
            std::iter::once(*plural)
                .chain(rest.iter().copied())
                .collect::<Vec<_>>(),
        ),
        other => (String::new(), other.to_vec()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [p] => (*p, "", ""),
        [p, n] => (*p, *n, ""),
        [p, n, s] => (*p, *n, *s),
        _ => return Err(not_found()),
    };
    let rt = st
        .registry
        .by_plural(group, version, plural)
        .ok_or_else(|| ApiError::NotFound {
            resource: String::new(),
            name: format!("the server could not find the requested resource ({plural})"),
        })?;
    if !rt.namespaced && !namespace.is_empty() {
        return Err(not_found());
    }
    let t = Target {
        rt,
        version: version.into(),
        namespace,
        name: name.into(),
        sub: sub.into(),
    };
    let known_sub = t.sub.is_empty()
        || t.sub == "status"
        || t.rt.extra_subresources().iter().any(|(s, _)| *s == t.sub);
    if !known_sub {
        return Err(not_found());
    }
    let mut a = Attributes::resource(
        verb(method, !t.name.is_empty(), q),
        &t.rt.group,
        &t.rt.plural,
        &t.namespace,
        &t.name,
    );
    a.subresource = t.sub.clone();
    authorize(st, req.user, &a)?;
    if *method == Method::POST && t.rt.create_only {
        let obj = parse_body(body, h)?;
        let out = auth::reviews::review(st, req.user, &t.rt.plural, &t.namespace, obj)?;
        return Ok(json_response(201, &out));
    }
    if t.rt.create_only {
        return Err(ApiError::MethodNotAllowed);
    }
    if t.sub == "token" {
        if *method != Method::POST {
            return Err(ApiError::MethodNotAllowed);
        }
        let obj = parse_body(body, h).unwrap_or_else(|_| json!({}));
        let out = auth::reviews::token_request(st, &t.namespace, &t.name, obj)?;
        return Ok(json_response(201, &out));
    }
    if t.sub == "status" && !t.rt.has_status(version) {
        return Err(not_found());
    }
    let accept = header(h, header::ACCEPT);
    let rendering = table::rendering(accept);
    let wants_table = rendering == table::Rendering::Table;
    let wo = write_opts(q, h);
    let now = st.clock.now();
    match (method.clone(), t.name.is_empty()) {
        (Method::GET, true) if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) => {
            let p = watch::WatchParams {
                rv: q.get("resourceVersion").and_then(|r| r.parse().ok()),
                labels: selector(q, "labelSelector", LabelSelector::parse)?,
                fields: selector(q, "fieldSelector", FieldSelector::parse)?,
                bookmarks: q.get("allowWatchBookmarks").is_some_and(|b| b == "true"),
                timeout: Duration::from_secs(
                    q.get("timeoutSeconds")
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(1800),
                ),
                table: wants_table,
            };
            let rx = watch::start(st.clone(), t, p, ctx.shutdown.clone());
            Ok(Response::builder()
                .status(200)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::TRANSFER_ENCODING, "chunked")
                .body(Body::from_stream(ReceiverStream::new(rx)))
                .unwrap_or_default())
        }
        (Method::GET, true) => {
            let lo = ops::ListOpts {
                labels: selector(q, "labelSelector", LabelSelector::parse)?,
                fields: selector(q, "fieldSelector", FieldSelector::parse)?,
                limit: q.get("limit").and_then(|l| l.parse().ok()),
                continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
            };
            let page = ops::list(st, &t, &lo)?;
            let rv = page.rv.to_string();
            if wants_table {
                let tb = table::table(
                    &t.rt,
                    &t.version,
                    &page.items,
                    &rv,
                    page.continue_token.as_deref(),
                    now,
                );
                return Ok(json_response(200, &tb));
            }
            let mut md = json!({ "resourceVersion": rv });
            if let Some(c) = page.continue_token {
                md["continue"] = json!(c);
                md["remainingItemCount"] = json!(page.remaining);
            }
            if rendering == table::Rendering::Metadata {
                return Ok(json_response(
                    200,
                    &table::partial_metadata_list(&page.items, md),
                ));
            }
            Ok(json_response(
                200,
                &json!({ "kind": format!("{}List", t.rt.kind), "apiVersion": t.api_version(), "metadata": md, "items": page.items }),
            ))
        }
        (Method::GET, false) if t.sub == "log" => {
            ops::get(st, &t)?;
            let file = st
                .log_dir
                .as_ref()
                .map(|d| d.join(format!("{}_{}.log", t.namespace, t.name)));
            let text = file
                .and_then(|f| std::fs::read_to_string(f).ok())
                .unwrap_or_default();
            Ok(text_response(200, text))
        }
        (Method::GET, false) => {
            let obj = ops::get(st, &t)?;
            if wants_table {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                return Ok(json_response(
                    200,
                    &table::table(&t.rt, &t.version, &[obj], &rv, None, now),
                ));
            }
            if rendering == table::Rendering::Metadata {
                return Ok(json_response(200, &table::partial_metadata(&obj)));
            }
            Ok(json_response(200, &obj))
        }
        (Method::POST, true) => {
            let obj = parse_body(body, h)?;
            ops::create(st, &t, obj, &wo)
                .map(|o| with_warnings(json_response(201, &o), &write_warnings(&t, None, &o)))
        }
        (Method::PUT, false) => {
            let obj = parse_body(body, h)?;
            let old = ops::get(st, &t).ok();
            ops::update(st, &t, obj, &wo).map(|o| {
                let warnings = write_warnings(&t, old.as_ref(), &o);
                with_warnings(json_response(200, &o), &warnings)
            })
        }
        (Method::PATCH, false) => {
            let ty = PatchType::from_content_type(header(h, header::CONTENT_TYPE))?;
            let old = ops::get(st, &t).ok();
            let obj = ops::patch(st, &t, ty, body, &wo)?;
            let warnings = write_warnings(&t, old.as_ref(), &obj);
            let code = if old.is_some() { 200 } else { 201 };
            Ok(with_warnings(json_response(code, &obj), &warnings))
        }
        (Method::DELETE, false) => {
            let d = delete_opts(q, body);
            ops::delete(st, &t, &d).map(|o| json_response(200, &o))
        }
        (Method::DELETE, true) => {
            let lo = ops::ListOpts {
                labels: selector(q, "labelSelector", LabelSelector::parse)?,
                fields: selector(q, "fieldSelector", FieldSelector::parse)?,
                ..Default::default()
            };
            let d = delete_opts(q, body);
            let page = ops::list(st, &t, &lo)?;
            let mut out = Vec::new();
            for o in page.items {
                let mut it = t.clone();
                it.name = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into();
                it.namespace = o
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into();
                if let Ok(x) = ops::delete(st, &it, &d) {
                    out.push(x);
                }
            }
            Ok(json_response(
                200,
                &json!({ "kind": format!("{}List", t.rt.kind), "apiVersion": t.api_version(), "metadata": {}, "items": out }),
            ))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// The warnings a write of `new` (replacing `old`) returns, as the API
/// server's strategies give them: a CRD's unknown schema formats.
fn write_warnings(t: &Target, old: Option<&Value>, new: &Value) -> Vec<String> {
    if t.rt.group == "apiextensions.k8s.io" && t.rt.kind == "CustomResourceDefinition" {
        crate::crd::format_warnings(new, old)
    } else {
        Vec::new()
    }
}

/// `response` with a `Warning: 299 - "..."` header per warning (RFC 7234),
/// which kubectl prints as `Warning: ...` and kube-rs logs.
fn with_warnings(mut response: Response<Body>, warnings: &[String]) -> Response<Body> {
    for warning in warnings {
        let quoted = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = header::HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

fn selector<T>(
    q: &HashMap<String, String>,
    key: &str,
    parse: fn(&str) -> ApiResult<T>,
) -> ApiResult<Option<T>> {
    q.get(key)
        .filter(|s| !s.is_empty())
        .map(|s| parse(s))
        .transpose()
}

fn parse_body(body: &[u8], h: &HeaderMap) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::BadRequest("request body is empty".into()));
    }
    if header(h, header::CONTENT_TYPE).starts_with("application/vnd.kubernetes.protobuf") {
        return crate::protobuf::decode(body).map_err(|e| match e {
            crate::protobuf::DecodeError::Malformed(_) => ApiError::BadRequest(e.to_string()),
            _ => ApiError::UnsupportedMediaType(e.to_string()),
        });
    }
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml::from_slice(body))
        .map_err(|e| ApiError::BadRequest(format!("the object provided is unrecognized: {e}")))
}

fn write_opts(q: &HashMap<String, String>, h: &HeaderMap) -> WriteOpts {
    let ua = header(h, header::USER_AGENT);
    let default_manager = ua
        .split('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string();
    WriteOpts {
        manager: q
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .cloned()
            .unwrap_or(default_manager),
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        force: q.get("force").is_some_and(|f| f == "true"),
        strict: q.get("fieldValidation").is_some_and(|f| f == "Strict"),
    }
}

fn delete_opts(q: &HashMap<String, String>, body: &[u8]) -> DeleteOpts {
    let b: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let s = |p: &str| b.pointer(p).and_then(Value::as_str).map(String::from);
    let mut propagation = q
        .get("propagationPolicy")
        .cloned()
        .or_else(|| s("/propagationPolicy"))
        .unwrap_or_default();
    if b.get("orphanDependents").and_then(Value::as_bool) == Some(true)
        || q.get("orphanDependents").is_some_and(|o| o == "true")
    {
        propagation = "Orphan".into();
    }
    let dry = q.get("dryRun").is_some_and(|d| d == "All")
        || b.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    DeleteOpts {
        propagation,
        dry_run: dry,
        precondition_uid: s("/preconditions/uid"),
        precondition_rv: s("/preconditions/resourceVersion"),
        grace_period_seconds: q
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
            .or_else(|| b.get("gracePeriodSeconds").and_then(Value::as_i64)),
    }
}
