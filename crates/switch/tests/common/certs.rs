//! Certificates made at test time (rcgen), written as PEM files: a CA with a switch and a
//! controller certificate it signed, a client certificate it signed that has expired, and
//! a second CA with a certificate of its own (the wrong CA). Also the rustls ends a test
//! plays: a client of a `pssl:` listener and a controller for an `ssl:` target.
#![allow(dead_code)] // each test file uses its own part of it

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate and its private key, as PEM files.
#[derive(Clone, Debug)]
pub struct Cert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Everything a TLS test needs, in one directory.
pub struct Pki {
    pub ca: PathBuf,
    pub switch: Cert,
    pub controller: Cert,
    pub expired: Cert,
    /// Signed by another CA.
    pub wrong_ca: Cert,
}

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A certificate for `name` (also valid for 127.0.0.1 and localhost) signed by `by`,
/// valid from 1975 to 4096 unless `expired` (2000 to 2001).
fn leaf(dir: &Path, file: &str, name: &str, by: &Ca, expired: bool) -> Cert {
    let mut p =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    if expired {
        p.not_before = date_time_ymd(2000, 1, 1);
        p.not_after = date_time_ymd(2001, 1, 1);
    }
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &by.cert, &by.key).unwrap();
    let c = Cert {
        cert: dir.join(format!("{file}-cert.pem")),
        key: dir.join(format!("{file}-privkey.pem")),
    };
    std::fs::write(&c.cert, cert.pem()).unwrap();
    std::fs::write(&c.key, key.serialize_pem()).unwrap();
    c
}

impl Pki {
    /// Make the CAs and certificates in `dir`.
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let good = ca("flowpath test CA");
        let other = ca("some other CA");
        let ca_path = dir.join("cacert.pem");
        std::fs::write(&ca_path, good.cert.pem()).unwrap();
        Pki {
            ca: ca_path,
            switch: leaf(dir, "switch", "switch", &good, false),
            controller: leaf(dir, "controller", "controller", &good, false),
            expired: leaf(dir, "expired", "old controller", &good, true),
            wrong_ca: leaf(dir, "wrongca", "stranger", &other, false),
        }
    }

    fn roots(&self) -> Arc<rustls::RootCertStore> {
        let mut r = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&self.ca).unwrap() {
            r.add(c.unwrap()).unwrap();
        }
        Arc::new(r)
    }

    /// A client config trusting the CA, presenting `me` (or no certificate).
    pub fn client_config(&self, me: Option<&Cert>) -> Arc<rustls::ClientConfig> {
        let b = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(self.roots());
        Arc::new(match me {
            Some(c) => b.with_client_auth_cert(chain(c), key(c)).unwrap(),
            None => b.with_no_client_auth(),
        })
    }

    /// A controller's server config: presents `me`, requires a client certificate the
    /// CA signed.
    pub fn server_config(&self, me: &Cert) -> Arc<rustls::ServerConfig> {
        let v =
            rustls::server::WebPkiClientVerifier::builder_with_provider(self.roots(), provider())
                .build()
                .unwrap();
        Arc::new(
            rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_client_cert_verifier(v)
                .with_single_cert(chain(me), key(me))
                .unwrap(),
        )
    }

    /// Connect to `addr` over TLS as `me`: the stream (the handshake happens on first use).
    pub fn connect(
        &self,
        addr: std::net::SocketAddr,
        me: Option<&Cert>,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let c = rustls::ClientConnection::new(self.client_config(me), name).unwrap();
        rustls::StreamOwned::new(c, s)
    }
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[allow(deprecated)] // the provider the switch uses
    Arc::new(rustls::crypto::ring::default_provider())
}

fn chain(c: &Cert) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(&c.cert)
        .unwrap()
        .map(|x| x.unwrap())
        .collect()
}

fn key(c: &Cert) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(&c.key).unwrap()
}
