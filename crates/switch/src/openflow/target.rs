//! Where OpenFlow connections come from: `ptcp:[IP:]PORT` listens for clients such as
//! `ovs-ofctl`, `tcp:HOST:PORT` connects out to a controller, and `pssl:`/`ssl:` do the
//! same over TLS (OVS's target syntax).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// One OpenFlow connection target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Listen on this address (`ptcp:`); the address defaults to 127.0.0.1, so a switch
    /// is not programmable from the network unless asked.
    Listen(SocketAddr),
    /// Connect to a controller (`tcp:`), reconnecting with backoff.
    Connect { host: String, port: u16 },
    /// Listen for TLS clients (`pssl:`), which must present a certificate the CA signed.
    ListenTls(SocketAddr),
    /// Connect to a controller over TLS (`ssl:`), checking its certificate against the CA.
    ConnectTls { host: String, port: u16 },
}

/// The IANA OpenFlow port, used when `tcp:HOST` gives none.
pub const DEFAULT_PORT: u16 = 6653;

impl Target {
    /// Parse `ptcp:[IP:]PORT`, `ptcp:PORT`, `tcp:HOST:PORT` or `tcp:HOST` (IPv6 in
    /// brackets: `tcp:[::1]:6653`). The error says what is wrong with which part.
    pub fn parse(s: &str) -> Result<Target, String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("ptcp:") {
            Ok(Target::Listen(parse_listen(rest, s)?))
        } else if let Some(rest) = s.strip_prefix("pssl:") {
            Ok(Target::ListenTls(parse_listen(rest, s)?))
        } else if let Some(rest) = s.strip_prefix("tcp:") {
            let (host, port) = parse_connect(rest, s)?;
            Ok(Target::Connect { host, port })
        } else if let Some(rest) = s.strip_prefix("ssl:") {
            let (host, port) = parse_connect(rest, s)?;
            Ok(Target::ConnectTls { host, port })
        } else if s.starts_with("unix:") || s.starts_with("punix:") {
            Err(format!(
                "'{s}': unix sockets are not supported for OpenFlow (use ptcp:127.0.0.1:PORT)"
            ))
        } else {
            Err(format!(
                "'{s}': expected ptcp:[IP:]PORT or pssl:[IP:]PORT (listen), tcp:HOST:PORT or \
                 ssl:HOST:PORT (connect to a controller)"
            ))
        }
    }

    /// Is this a listener (`ptcp:` or `pssl:`)? Its address if so.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        match self {
            Target::Listen(a) | Target::ListenTls(a) => Some(*a),
            _ => None,
        }
    }

    /// Does this target speak TLS (`ssl:` or `pssl:`)?
    pub fn is_tls(&self) -> bool {
        matches!(self, Target::ListenTls(_) | Target::ConnectTls { .. })
    }

    /// The host an active target connects to (the name its certificate must carry).
    pub fn host(&self) -> Option<&str> {
        match self {
            Target::Connect { host, .. } | Target::ConnectTls { host, .. } => Some(host),
            _ => None,
        }
    }

    /// Resolve a `Connect` target's address (DNS names allowed).
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        match self {
            Target::Listen(a) | Target::ListenTls(a) => Ok(*a),
            Target::Connect { host, port } | Target::ConnectTls { host, port } => {
                (host.as_str(), *port)
                    .to_socket_addrs()?
                    .next()
                    .ok_or_else(|| std::io::Error::other(format!("{host}: no address")))
            }
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Listen(a) => write!(f, "ptcp:{a}"),
            Target::ListenTls(a) => write!(f, "pssl:{a}"),
            Target::Connect { host, port } | Target::ConnectTls { host, port } => {
                let scheme = if self.is_tls() { "ssl" } else { "tcp" };
                if host.contains(':') {
                    write!(f, "{scheme}:[{host}]:{port}")
                } else {
                    write!(f, "{scheme}:{host}:{port}")
                }
            }
        }
    }
}

/// `[IP:]PORT` of a listener (`whole` is the target, for errors); the IP defaults to
/// 127.0.0.1.
fn parse_listen(rest: &str, whole: &str) -> Result<SocketAddr, String> {
    let (ip, port) = match split_host_port(rest) {
        Some((h, p)) => (Some(h), p),
        None => (None, rest),
    };
    let port = parse_port(port, whole)?;
    let ip: IpAddr = match ip {
        None | Some("") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(h) => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| format!("'{whole}': '{h}' is not an IP address to listen on"))?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// `HOST[:PORT]` of an active target; the port defaults to [`DEFAULT_PORT`].
fn parse_connect(rest: &str, whole: &str) -> Result<(String, u16), String> {
    let (host, port) = match split_host_port(rest) {
        Some((h, p)) => (h, parse_port(p, whole)?),
        None => (rest, DEFAULT_PORT),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        let scheme = whole.split(':').next().unwrap_or("tcp");
        return Err(format!(
            "'{whole}': {scheme}: needs a host ({scheme}:HOST[:PORT])"
        ));
    }
    Ok((host.to_string(), port))
}

/// `HOST:PORT` → (HOST, PORT) where HOST may be `[v6]`; `None` when there is no port part.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if s.starts_with('[') {
        let end = s.find(']')?;
        let rest = &s[end + 1..];
        return rest.strip_prefix(':').map(|p| (&s[..end + 1], p));
    }
    if s.matches(':').count() == 1 {
        let i = s.find(':')?;
        return Some((&s[..i], &s[i + 1..]));
    }
    None
}

fn parse_port(p: &str, whole: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{whole}': '{p}' is not a TCP port (0-65535)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_like_ovs() {
        assert_eq!(
            Target::parse("ptcp:6653").unwrap(),
            Target::Listen("127.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            Target::parse("ptcp:0.0.0.0:6633").unwrap(),
            Target::Listen("0.0.0.0:6633".parse().unwrap())
        );
        assert_eq!(
            Target::parse("ptcp:[::1]:6653").unwrap(),
            Target::Listen("[::1]:6653".parse().unwrap())
        );
        assert_eq!(
            Target::parse("tcp:10.0.0.1:6653").unwrap(),
            Target::Connect {
                host: "10.0.0.1".into(),
                port: 6653
            }
        );
        assert_eq!(
            Target::parse("tcp:ctl.example").unwrap(),
            Target::Connect {
                host: "ctl.example".into(),
                port: 6653
            }
        );
        assert_eq!(
            Target::parse("tcp:[fd00::1]:6633").unwrap().to_string(),
            "tcp:[fd00::1]:6633"
        );
        assert_eq!(
            Target::parse("pssl:6653").unwrap(),
            Target::ListenTls("127.0.0.1:6653".parse().unwrap())
        );
        assert_eq!(
            Target::parse("ssl:ctl.example").unwrap(),
            Target::ConnectTls {
                host: "ctl.example".into(),
                port: 6653
            }
        );
        assert_eq!(
            Target::parse("ssl:[fd00::1]:6633").unwrap().to_string(),
            "ssl:[fd00::1]:6633"
        );
        assert_eq!(
            Target::parse("pssl:0.0.0.0:6653").unwrap().to_string(),
            "pssl:0.0.0.0:6653"
        );
        for bad in [
            "ptcp:99999",
            "tcp:",
            "6653",
            "ptcp:10.0.0.300:6653",
            "ssl:",
            "pssl:x",
            "punix:/tmp/s",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
