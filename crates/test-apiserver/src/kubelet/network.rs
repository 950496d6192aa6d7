//! One network per pod, as a CNI plugin gives it: its own network
//! namespace with its loopback, and a veth pair to the host with a /30 of
//! 10.244.0.0/16 (the host's end first, the pod's second), the host's end
//! as its default route. Pods reach the test servers on the host's
//! 127.0.0.1 the way they reach a Service: by a name (`/etc/hosts` of the
//! container names the host's end `host.harness.internal`, and
//! `kubernetes.default.svc` for the API server), through a forwarder the
//! kubelet runs on the host's end for each exposed port to 127.0.0.1 on
//! the same port. Nothing listens beyond the veth pairs the harness made,
//! and everything goes with the pod (the namespace, and with it the pair).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Command;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// The name pods reach the host's test servers by.
pub const HOST_NAME: &str = "host.harness.internal";
/// The API server's in-cluster names, resolved to the host's end too.
const API_NAMES: &str =
    "kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local";

/// Host ports pods may reach through [`HOST_NAME`]; shared by the kubelet
/// and the server's handle so tests add theirs at any time.
#[derive(Debug, Clone, Default)]
pub struct HostPorts(Arc<Mutex<BTreeSet<u16>>>);

impl HostPorts {
    pub fn add(&self, port: u16) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port);
    }

    pub fn all(&self) -> BTreeSet<u16> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A pod's network; dropping it stops its forwarders and deletes its
/// namespace (the veth pair goes with the namespace's last process).
pub struct PodNetwork {
    name: String,
    pub host_ip: Ipv4Addr,
    pub pod_ip: Ipv4Addr,
    ns: OwnedFd,
    forwarded: BTreeSet<u16>,
    forwarders: Vec<JoinHandle<()>>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The /30s of 10.244.0.0/16 the host already has an address in.
fn used_subnets() -> BTreeSet<u16> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.split_whitespace()
        .filter_map(|w| w.split('/').next()?.parse::<Ipv4Addr>().ok())
        .filter(|a| a.octets()[..2] == [10, 244])
        .map(|a| u16::from_be_bytes([a.octets()[2], a.octets()[3]]) / 4)
        .collect()
}

/// The host's and the pod's address of /30 number `n` of 10.244.0.0/16.
pub fn subnet(n: u16) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(10, 244, 0, 0)) + u32::from(n % 16384) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

impl PodNetwork {
    /// Makes the namespace and veth pair of the pod with `uid`.
    pub fn new(uid: &str) -> Result<Self, String> {
        let id: String = uid
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(8)
            .collect();
        let name = format!("harness-{id}-{}", std::process::id());
        let (host_if, pod_if) = (format!("hv{id}h"), format!("hv{id}p"));
        // One allocation at a time in this process; another process picks
        // from its own starting point and sees these addresses.
        static ALLOCATING: Mutex<()> = Mutex::new(());
        let _one = ALLOCATING.lock().unwrap_or_else(|e| e.into_inner());
        let used = used_subnets();
        let start = u16::from_str_radix(&id[..id.len().min(4)], 16).unwrap_or(0) % 16384;
        let n = (0..16384u16)
            .map(|i| (start + i) % 16384)
            .find(|n| *n != 0 && !used.contains(n))
            .ok_or("no free /30 left in 10.244.0.0/16")?;
        let (host_ip, pod_ip) = subnet(n);
        ip(&["netns", "add", &name])?;
        let made = (|| {
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &pod_if, "netns", &name,
            ])?;
            ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host_if])?;
            ip(&["link", "set", &host_if, "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            ip(&["-n", &name, "link", "set", &pod_if, "name", "eth0"])?;
            ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("{pod_ip}/30"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&[
                "-n",
                &name,
                "route",
                "add",
                "default",
                "via",
                &host_ip.to_string(),
            ])?;
            std::fs::File::open(format!("/run/netns/{name}"))
                .map(OwnedFd::from)
                .map_err(|e| format!("/run/netns/{name}: {e}"))
        })();
        match made {
            Ok(ns) => Ok(Self {
                name,
                host_ip,
                pod_ip,
                ns,
                forwarded: BTreeSet::new(),
                forwarders: Vec::new(),
            }),
            Err(e) => {
                let _ = ip(&["netns", "del", &name]);
                let _ = ip(&["link", "del", &host_if]);
                Err(e)
            }
        }
    }

    /// The container's `/etc/hosts`, as a kubelet writes one per pod.
    pub fn hosts_file(&self, hostname: &str) -> String {
        format!(
            "# Kubernetes-managed hosts file (harness kubelet).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
             {}\t{hostname}\n{}\t{HOST_NAME} {API_NAMES}\n",
            self.pod_ip, self.host_ip
        )
    }

    /// Starts a forwarder for every exposed port that has none yet.
    pub fn forward(&mut self, ports: &BTreeSet<u16>) {
        for &port in ports.difference(&self.forwarded.clone()) {
            let listen = SocketAddr::from((self.host_ip, port));
            let Ok(std_listener) = std::net::TcpListener::bind(listen) else {
                tracing::warn!(%listen, "cannot forward a host port to a pod");
                continue;
            };
            let _ = std_listener.set_nonblocking(true);
            let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
                continue;
            };
            self.forwarded.insert(port);
            self.forwarders.push(tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        if let Ok(mut outbound) =
                            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                }
            }));
        }
    }

    /// A copy of the namespace fd for the forked child's closure.
    pub fn entry(&self) -> std::io::Result<NetnsEntry> {
        Ok(NetnsEntry(self.ns.try_clone()?))
    }
}

/// What the child needs to enter the pod's network.
pub struct NetnsEntry(OwnedFd);

impl NetnsEntry {
    /// Enters the namespace; between fork and exec (one system call).
    pub fn enter(&self) -> std::io::Result<()> {
        // SAFETY: setns(2) on a namespace fd held open by this value.
        if unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        for f in &self.forwarders {
            f.abort();
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_subnet_is_a_slash_30_of_the_pod_range() {
        assert_eq!(
            subnet(1),
            (Ipv4Addr::new(10, 244, 0, 5), Ipv4Addr::new(10, 244, 0, 6))
        );
        assert_eq!(
            subnet(64),
            (Ipv4Addr::new(10, 244, 1, 1), Ipv4Addr::new(10, 244, 1, 2))
        );
        assert_eq!(subnet(16383).1, Ipv4Addr::new(10, 244, 255, 254));
    }
}
