"""Throwaway certificates for the TLS tests, made with the ``openssl`` command line in a
test's temporary directory (no private key is ever committed): a CA, a server certificate
it signs for 127.0.0.1 and localhost, and a second CA that signs nothing the broker shows
(a client trusting only it must refuse the broker)."""

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


def _openssl(*arguments: str | Path) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, timeout=60)


def _self_signed(directory: Path, name: str, subject: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", subject, "-keyout", key, "-out", cert)  # fmt: skip
    return cert, key


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _self_signed(directory, "ca", "/CN=isrwatch test CA")
    other_ca, _ = _self_signed(directory, "other-ca", "/CN=isrwatch untrusted test CA")
    key, request = directory / "server.key", directory / "server.csr"
    cert, extensions = directory / "server.pem", directory / "server.ext"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
             "-keyout", key, "-out", request)  # fmt: skip
    # Clients check the broker's name (ssl_check_hostname): they connect to 127.0.0.1.
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    _openssl("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-days", "2", "-extfile", extensions, "-out", cert)  # fmt: skip
    return Certificates(ca=ca, server_cert=cert, server_key=key, other_ca=other_ca)
