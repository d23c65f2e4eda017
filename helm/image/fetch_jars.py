"""Add jars to PySpark's classpath at image build, each checked against its SHA-256.

    python fetch_jars.py DEST_DIR "URL=SHA256 URL=SHA256 ..."

For what the pip-installed PySpark does not carry, e.g. Hadoop's S3A connector
(hadoop-aws of PySpark's Hadoop version, and the AWS SDK bundle it was built with) for
checkpoints in an object store. An empty list adds nothing.
"""

from __future__ import annotations

import hashlib
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlparse


def parse_specs(text: str) -> list[tuple[str, str]]:
    """(url, sha256) pairs from whitespace-separated URL=SHA256 items."""
    specs: list[tuple[str, str]] = []
    for item in text.split():
        url, sep, digest = item.rpartition("=")
        if not sep or urlparse(url).scheme != "https" or len(digest) != 64:
            raise SystemExit(f"not an https URL=SHA256 item: {item!r}")
        specs.append((url, digest.lower()))
    return specs


def fetch(url: str, digest: str, dest: Path) -> Path:
    with urllib.request.urlopen(url, timeout=120) as response:
        content: bytes = response.read()
    actual = hashlib.sha256(content).hexdigest()
    if actual != digest:
        raise SystemExit(f"{url}: SHA-256 is {actual}, expected {digest}")
    target = dest / Path(urlparse(url).path).name
    target.write_bytes(content)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    dest = Path(argv[0])
    for url, digest in parse_specs(argv[1]):
        print(f"added {fetch(url, digest, dest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
