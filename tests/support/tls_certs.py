"""A throwaway certificate authority and the certificates signed by it, written as PEM files, for
tests of TLS listeners (server certificate for 127.0.0.1/localhost, client certificates for mTLS)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path

    @property
    def combined(self) -> Path:
        """Key and certificate in one PEM file (``ssl.keystore.location``)."""
        path = self.cert.with_suffix(".keystore.pem")
        path.write_bytes(self.key.read_bytes() + self.cert.read_bytes())
        return path

    def encrypted_key(self, password: str) -> Path:
        """The key again, encrypted with ``password`` (``ssl.key.password``)."""
        key = serialization.load_pem_private_key(self.key.read_bytes(), password=None)
        path = self.key.with_suffix(".encrypted.key")
        encryption = serialization.BestAvailableEncryption(password.encode())
        path.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        )
        return path


def _name(common_name: str, organization: str = "tabletopic tests") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "NL"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertFiles:
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    return CertFiles(cert_path, key_path)


class TestCA:
    """A CA valid for a day; :meth:`issue` signs server or client certificates with it."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: Path, name: str = "tabletopic test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._key, hashes.SHA256())
        )
        self.files = _write(directory, name.replace(" ", "-"), self._cert, self._key)

    @property
    def cert(self) -> Path:
        return self.files.cert

    def issue(
        self, common_name: str, *, server: bool = False, organization: str = "tabletopic tests"
    ) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        usage = (
            x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        )
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return _write(self.directory, common_name.replace(" ", "-"), cert, key)
