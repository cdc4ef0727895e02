//! Where OpenFlow connections come from: `ptcp:[IP:]PORT` listens for clients such as
//! `ovs-ofctl`, `tcp:HOST:PORT` connects out to a controller (OVS's target syntax).

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
}

/// The IANA OpenFlow port, used when `tcp:HOST` gives none.
pub const DEFAULT_PORT: u16 = 6653;

impl Target {
    /// Parse `ptcp:[IP:]PORT`, `ptcp:PORT`, `tcp:HOST:PORT` or `tcp:HOST` (IPv6 in
    /// brackets: `tcp:[::1]:6653`). The error says what is wrong with which part.
    pub fn parse(s: &str) -> Result<Target, String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("ptcp:") {
            let (ip, port) = match split_host_port(rest) {
                Some((h, p)) => (Some(h), p),
                None => (None, rest),
            };
            let port = parse_port(port, s)?;
            let ip: IpAddr = match ip {
                None | Some("") => IpAddr::V4(Ipv4Addr::LOCALHOST),
                Some(h) => h
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("'{s}': '{h}' is not an IP address to listen on"))?,
            };
            Ok(Target::Listen(SocketAddr::new(ip, port)))
        } else if let Some(rest) = s.strip_prefix("tcp:") {
            let (host, port) = match split_host_port(rest) {
                Some((h, p)) => (h, parse_port(p, s)?),
                None => (rest, DEFAULT_PORT),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() {
                return Err(format!("'{s}': tcp: needs a host (tcp:HOST[:PORT])"));
            }
            Ok(Target::Connect {
                host: host.to_string(),
                port,
            })
        } else if s.starts_with("ssl:") || s.starts_with("pssl:") {
            Err(format!(
                "'{s}': TLS connections are not supported yet (use tcp: or ptcp:, over a \
                 tunnel or on localhost)"
            ))
        } else if s.starts_with("unix:") || s.starts_with("punix:") {
            Err(format!(
                "'{s}': unix sockets are not supported for OpenFlow (use ptcp:127.0.0.1:PORT)"
            ))
        } else {
            Err(format!(
                "'{s}': expected ptcp:[IP:]PORT (listen) or tcp:HOST:PORT (connect to a controller)"
            ))
        }
    }

    /// Resolve a `Connect` target's address (DNS names allowed).
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        match self {
            Target::Listen(a) => Ok(*a),
            Target::Connect { host, port } => (host.as_str(), *port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other(format!("{host}: no address"))),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Listen(a) => write!(f, "ptcp:{a}"),
            Target::Connect { host, port } if host.contains(':') => {
                write!(f, "tcp:[{host}]:{port}")
            }
            Target::Connect { host, port } => write!(f, "tcp:{host}:{port}"),
        }
    }
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
        for bad in [
            "ptcp:99999",
            "tcp:",
            "6653",
            "ptcp:10.0.0.300:6653",
            "ssl:1.2.3.4:6653",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
