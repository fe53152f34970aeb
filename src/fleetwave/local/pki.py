"""Throwaway PKI for the local fleet: one CA, a loopback serving certificate, a service-account key pair.

Generated per `fleetwave local up` and never reused across fleets, so nothing long-lived is ever
trusted. ECDSA P-256 keeps generation in the milliseconds.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True, slots=True)
class Pki:
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def generate(directory: Path, *, now: dt.datetime) -> Pki:
    """Write a CA, a serving cert for localhost/127.0.0.1 and an SA signing key pair into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    start, end = now - dt.timedelta(hours=1), now + _VALIDITY
    ca = _ca_certificate(ca_key, start, end)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _serving_certificate(serving_key.public_key(), ca, ca_key, start, end)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    pki = Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    pki.serving_key.write_bytes(_key_pem(serving_key))
    pki.sa_key.write_bytes(_key_pem(sa_key))
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    for private in (pki.serving_key, pki.sa_key):
        private.chmod(0o600)
    return pki


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, start: dt.datetime, end: dt.datetime
) -> x509.Certificate:
    """The self-signed CA (path length 0: what it signs cannot sign certificates in turn)."""
    return (
        x509.CertificateBuilder()
        .subject_name(_name("fleetwave-local-ca"))
        .issuer_name(_name("fleetwave-local-ca"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )


def _serving_certificate(
    public_key: ec.EllipticCurvePublicKey,
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    start: dt.datetime,
    end: dt.datetime,
) -> x509.Certificate:
    """The API servers' certificate, for the names clients reach them by on loopback."""
    return (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def new_token() -> str:
    return secrets.token_urlsafe(32)
