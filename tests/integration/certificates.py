"""Throwaway certificates for the TLS tests, made with the ``openssl`` command line in a
test's temporary directory (no private key is ever committed): a CA, a server certificate
it signs for 127.0.0.1 and localhost, and a second CA that signs nothing the broker shows
(a client trusting only it must refuse the broker).

For mutual TLS: a client CA (the one a broker requiring client certificates trusts), a
client certificate it signs, and a client certificate signed by an untrusted CA (the
broker must refuse it)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certificates", "make_certificates"]


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA that signed server_cert
    server_cert: Path
    server_key: Path
    other_ca: Path  # an unrelated CA
    client_ca: Path  # the CA that signed client_cert: what the broker trusts for clients
    client_cert: Path
    client_key: Path
    untrusted_client_cert: Path  # signed by a CA the broker does not trust
    untrusted_client_key: Path


def _openssl(*arguments: str | Path) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, timeout=60)


def _self_signed(directory: Path, name: str, subject: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        subject,
        "-keyout",
        key,
        "-out",
        cert,
    )
    return cert, key


def _signed(
    directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: str
) -> tuple[Path, Path]:
    """A certificate for ``subject`` with ``extensions`` (openssl's extfile lines) that
    ``ca`` (certificate, key) signs, and its key."""
    key, request = directory / f"{name}.key", directory / f"{name}.csr"
    cert, extfile = directory / f"{name}.pem", directory / f"{name}.ext"
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", key, "-out", request
    )
    extfile.write_text(extensions, encoding="utf-8")
    _openssl(
        "x509",
        "-req",
        "-in",
        request,
        "-CA",
        ca[0],
        "-CAkey",
        ca[1],
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        extfile,
        "-out",
        cert,
    )
    return cert, key


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _self_signed(directory, "ca", "/CN=isrwatch test CA")
    other_ca, _ = _self_signed(directory, "other-ca", "/CN=isrwatch untrusted test CA")
    # Clients check the broker's name (ssl_check_hostname): they connect to 127.0.0.1.
    cert, key = _signed(
        directory, "server", "/CN=localhost", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    client_ca = _self_signed(directory, "client-ca", "/CN=isrwatch test client CA")
    rogue_ca = _self_signed(directory, "rogue-client-ca", "/CN=isrwatch untrusted client CA")
    usage = "extendedKeyUsage=clientAuth\n"
    client = _signed(directory, "client", "/CN=isrwatch", client_ca, usage)
    untrusted = _signed(directory, "untrusted-client", "/CN=isrwatch", rogue_ca, usage)
    return Certificates(
        ca=ca[0],
        server_cert=cert,
        server_key=key,
        other_ca=other_ca,
        client_ca=client_ca[0],
        client_cert=client[0],
        client_key=client[1],
        untrusted_client_cert=untrusted[0],
        untrusted_client_key=untrusted[1],
    )
