"""Key material for the test control plane: a self-made CA, a serving certificate for an
IP address signed by it, and the service-account signing key pair (all PEM files)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509 import oid


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files the control plane's processes read."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _builder(
    subject: str, issuer: str, pub: rsa.RSAPublicKey, days: int = 1
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, issuer)]))
        .public_key(pub)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def make_pki(directory: Path, ip: str, *more_ips: str) -> Pki:
    """Writes a CA, a serving certificate for ``ip`` and ``more_ips`` (and localhost,
    kubernetes.default) and a service-account key pair under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = (
        _builder("taugrid-test-ca", "taugrid-test-ca", ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    srv_key = _key()
    sans: list[x509.GeneralName] = [
        *(x509.IPAddress(ipaddress.ip_address(a)) for a in (ip, *more_ips)),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes.default.svc"),
    ]
    srv = (
        _builder("kube-apiserver", "taugrid-test-ca", srv_key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, pki.ca_key)
    pki.serving_cert.write_bytes(srv.public_bytes(serialization.Encoding.PEM))
    _write_key(srv_key, pki.serving_key)
    sa = _key()
    _write_key(sa, pki.sa_key)
    pki.sa_pub.write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def client_cert(pki: Pki, user: str, group: str, directory: Path) -> tuple[Path, Path]:
    """A client certificate for ``user`` in ``group`` signed by the control plane's CA
    (a kubelet's: ``system:node:<name>`` in ``system:nodes``); its cert and key paths."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    key = _key()
    subject = x509.Name(
        [
            x509.NameAttribute(oid.NameOID.ORGANIZATION_NAME, group),
            x509.NameAttribute(oid.NameOID.COMMON_NAME, user),
        ]
    )
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, "taugrid-test-ca")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([oid.ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    crt, pem = directory / "client.crt", directory / "client.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pem)
    return crt, pem


def _pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def make_webhook_secret(ca_name: str, dns_name: str, ip: str) -> dict[str, bytes]:
    """A Secret's data (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``, PEM) for a webhook
    server on ``ip`` whose certificate also names ``dns_name`` (the in-cluster Service
    name). The CA names itself ``ca_name`` (CN and DNS SAN) and both certificates last a
    year: the cert rotators Kueue uses (open-policy-agent/cert-controller) keep a Secret
    whose certificates verify for those names 90 days ahead instead of replacing it."""
    ca_key = _key()
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), days=365)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(ca_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(dns_name),
        x509.IPAddress(ipaddress.ip_address(ip)),
    ]
    srv = (
        _builder(dns_name, ca_name, key.public_key(), days=365)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": _pem(ca_key),
        "tls.crt": srv.public_bytes(serialization.Encoding.PEM),
        "tls.key": _pem(key),
    }
