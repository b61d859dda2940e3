"""Azurite (Microsoft's Azure Blob emulator, from npm) on 127.0.0.1 for the ``az://`` tests.

``Azurite.start()`` installs the pinned ``azurite`` package into the project-local
``.cache/azurite`` with npm (once; a fresh clone needs the npm registry), starts
its blob service on a free loopback port with its data in a temporary directory,
and ``stop()`` ends exactly that process (by its pid). Lance reaches it through
``azure_storage_endpoint`` (``options``); the test looks at the container with
``pyarrow.fs.AzureFileSystem`` directly, not through the code under test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

AZURITE_VERSION = "3.35.0"  # pinned
ACCOUNT = "devstoreaccount1"  # Azurite's published development account and key
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.path.join(os.path.dirname(HERE), ".cache", "azurite")


class Unavailable(Exception):
    """Azurite cannot run here (no node/npm, or the package cannot be installed)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install() -> str:
    """The ``azurite-blob`` executable of the pinned version, installed if needed."""
    exe = os.path.join(PREFIX, "node_modules", ".bin", "azurite-blob")
    version_file = os.path.join(PREFIX, "node_modules", "azurite", "package.json")
    if os.path.exists(exe) and os.path.exists(version_file):
        with open(version_file, encoding="utf-8") as fh:
            if f'"version": "{AZURITE_VERSION}"' in fh.read():
                return exe
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise Unavailable("node and npm are not installed (Azurite is an npm package)")
    os.makedirs(PREFIX, exist_ok=True)
    try:
        subprocess.run(
            ["npm", "install", "--prefix", PREFIX, "--no-audit", "--no-fund",
             f"azurite@{AZURITE_VERSION}"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    except (subprocess.SubprocessError, OSError) as exc:
        raise Unavailable(f"npm install azurite@{AZURITE_VERSION} failed: {exc}") from exc
    return exe


class Azurite:
    """One Azurite blob service on 127.0.0.1 (``start``/``stop``)."""

    def __init__(self) -> None:
        exe = install()
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        self.data = tempfile.mkdtemp(prefix="lp-azurite-")
        self.proc = subprocess.Popen(
            [exe, "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", self.data, "--silent", "--skipApiVersionCheck", "--loose"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise Unavailable("Azurite did not start") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.data, ignore_errors=True)

    def options(self) -> dict[str, str]:
        """Lance ``storage_options`` for this service."""
        return {
            "azure_storage_account_name": ACCOUNT,
            "azure_storage_account_key": KEY,
            "azure_storage_endpoint": self.endpoint,
            "allow_http": "true",
        }

    def filesystem(self):  # type: ignore[no-untyped-def]
        """A ``pyarrow.fs.AzureFileSystem`` on this service (the tests' independent view)."""
        import pyarrow.fs as pafs

        netloc = f"127.0.0.1:{self.port}"
        return pafs.AzureFileSystem(
            account_name=ACCOUNT, account_key=KEY,
            blob_storage_authority=netloc, dfs_storage_authority=netloc,
            blob_storage_scheme="http", dfs_storage_scheme="http",
        )  # fmt: skip

    def new_container(self) -> str:
        name = f"lp{uuid.uuid4().hex[:16]}"
        self.filesystem().create_dir(name)
        return name


if __name__ == "__main__":
    # `make test` installs Azurite here, before pytest starts, so the test run itself
    # downloads nothing; without node/npm the az:// tests skip with the reason.
    try:
        print(f"Azurite {AZURITE_VERSION}: {install()}")
    except Unavailable as exc:
        print(f"Azurite unavailable, the az:// tests will skip: {exc}")
