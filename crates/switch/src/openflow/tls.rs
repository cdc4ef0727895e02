//! TLS for `ssl:` and `pssl:` targets (rustls, TLS 1.2 and 1.3, the `ring` provider):
//! the switch's private key and certificate, and the CA certificate every peer's
//! certificate must chain to. Both directions authenticate: a client of a `pssl:` listener
//! must present a certificate the CA signed, and a controller reached over `ssl:` must too.
//! As in Open vSwitch, a controller's certificate is checked against the CA, not against
//! the host name in the target (an OpenFlow PKI signs switch and controller certificates
//! that name no hosts).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The files TLS needs (OVS's `--private-key`, `--certificate`, `--ca-cert`), PEM.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub private_key: PathBuf,
    /// The switch's certificate, optionally followed by intermediate certificates.
    pub certificate: PathBuf,
    /// The CA certificate(s) peers' certificates must chain to.
    pub ca_cert: PathBuf,
}

/// Loaded TLS settings, ready to start sessions.
#[derive(Clone)]
pub struct TlsContext {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsContext")
    }
}

impl TlsFiles {
    /// The three files, given all together or not at all; `names` are what the caller
    /// calls them (flags or config keys), for the error.
    pub fn from_parts(
        private_key: Option<&Path>,
        certificate: Option<&Path>,
        ca_cert: Option<&Path>,
        names: [&str; 3],
    ) -> Result<Option<TlsFiles>, String> {
        match (private_key, certificate, ca_cert) {
            (None, None, None) => Ok(None),
            (Some(k), Some(c), Some(ca)) => Ok(Some(TlsFiles {
                private_key: k.to_path_buf(),
                certificate: c.to_path_buf(),
                ca_cert: ca.to_path_buf(),
            })),
            _ => Err(format!(
                "{}, {} and {} go together: give all three",
                names[0], names[1], names[2]
            )),
        }
    }

    /// Read and check the files; the error names the file and what is wrong with it.
    pub fn load(&self) -> Result<TlsContext, String> {
        // ring builds with nothing but a C compiler (aws-lc-rs also wants cmake); rustls
        // marks it deprecated only because it lacks post-quantum key exchange.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::from_pem_file(&self.private_key)
            .map_err(|e| format!("private key {}: {e}", self.private_key.display()))?;
        let chain = certs(&self.certificate, "certificate")?;
        let mut roots = RootCertStore::empty();
        for c in certs(&self.ca_cert, "CA certificate")? {
            roots
                .add(c)
                .map_err(|e| format!("CA certificate {}: {e}", self.ca_cert.display()))?;
        }
        let roots = Arc::new(roots);
        let versions = &[&rustls::version::TLS13, &rustls::version::TLS12];
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| format!("CA certificate {}: {e}", self.ca_cert.display()))?;
        let bad_key = |e: rustls::Error| {
            format!(
                "private key {} and certificate {}: {e}",
                self.private_key.display(),
                self.certificate.display()
            )
        };
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(bad_key)?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("CA certificate {}: {e}", self.ca_cert.display()))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaOnly(server_verifier)))
            .with_client_auth_cert(chain, key)
            .map_err(bad_key)?;
        Ok(TlsContext {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// Every certificate in a PEM file; at least one.
fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let v: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{what} {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if v.is_empty() {
        return Err(format!(
            "{what} {}: no PEM CERTIFICATE block in it",
            path.display()
        ));
    }
    Ok(v)
}

impl TlsContext {
    /// A session for a client that connected to a `pssl:` listener.
    pub(crate) fn accept(&self) -> Result<rustls::Connection, String> {
        rustls::ServerConnection::new(self.server.clone())
            .map(rustls::Connection::Server)
            .map_err(|e| e.to_string())
    }

    /// A session to the controller at `host` (an `ssl:` target).
    pub(crate) fn connect(&self, host: &str) -> Result<rustls::Connection, String> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("'{host}' as a TLS server name: {e}"))?;
        rustls::ClientConnection::new(self.client.clone(), name)
            .map(rustls::Connection::Client)
            .map_err(|e| e.to_string())
    }
}

/// The WebPKI verifier, except that the name the certificate is for is not checked: any
/// certificate that chains to the CA and is valid now is the controller's.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
