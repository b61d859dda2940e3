"""Storage options: the Lance option keys the storage layer reads, which are secret,
and how their values are parsed, shown (``redact``) and handed on to Lance.

Split from ``storage`` so that option parsing, which several modules need
(``storage``, ``commit_safety``, the Spark options), has one home of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# Lance storage option keys (object_store's names, case-insensitive) this layer reads.
STORAGE_KEYS = {
    "access_key": ("aws_access_key_id", "access_key_id"),
    "secret_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token", "aws_token", "token"),
    "region": ("aws_region", "region", "aws_default_region", "default_region"),
    "endpoint": ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url"),
    "allow_http": ("allow_http", "aws_allow_http"),
    "virtual_hosted": ("aws_virtual_hosted_style_request", "virtual_hosted_style_request"),
    "timeout": ("timeout", "request_timeout"),
    "connect_timeout": ("connect_timeout",),
    "account_name": ("azure_storage_account_name", "account_name"),
    "account_key": ("azure_storage_account_key", "account_key", "access_key"),
    "azure_endpoint": ("azure_storage_endpoint", "azure_endpoint", "endpoint"),
    "use_emulator": ("azure_storage_use_emulator", "use_emulator"),
}
# Values of these keys are secrets: never shown (``redact``).
SECRET_KEYS = frozenset(
    {
        "aws_secret_access_key",
        "secret_access_key",
        "aws_session_token",
        "session_token",
        "aws_token",
        "token",
        "azure_storage_account_key",
        "account_key",
        "access_key",
        "azure_storage_sas_token",
        "sas_token",
        "azure_client_secret",
        "client_secret",
        "google_service_account_key",
        "service_account_key",
    }
)
# Our own options (never passed on to Lance).
TRUST_CONDITIONAL_PUT = "lp_trust_conditional_put"

# Azurite's well-known development account (published by Microsoft; not a secret)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def option(options: Mapping[str, str], name: str, env: Iterable[str] = ()) -> str | None:
    """The first non-empty value among option ``name``'s spellings (``STORAGE_KEYS``),
    case-insensitive, else among the environment variables ``env``; None when absent."""
    lowered = {k.lower(): v for k, v in options.items()}
    for key in STORAGE_KEYS[name]:
        if lowered.get(key) not in (None, ""):
            return str(lowered[key])
    for var in env:
        if os.environ.get(var):
            return os.environ[var]
    return None


def raw_option(options: Mapping[str, str], key: str) -> str | None:
    """The value of option ``key`` (case-insensitive), None when absent."""
    return next((str(v) for k, v in options.items() if k.lower() == key.lower()), None)


def duration_seconds(text: str | None, default: float) -> float:
    """``"30s"``, ``"500ms"``, ``"2m"`` or a bare number of seconds (Lance's duration form)."""
    if not text:
        return default
    t = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(t[: -len(suffix)]) * scale
    try:
        return float(t)
    except ValueError:
        return default


def truthy(text: str | None) -> bool:
    """Whether an option's text means yes (``1``, ``true``, ``yes``, ``on``)."""
    return (text or "").strip().lower() in ("1", "true", "yes", "on")


def redact(text: str, storage_options: Mapping[str, str] | None) -> str:
    """``text`` with the value of every secret storage option replaced by ``***``."""
    for key, value in (storage_options or {}).items():
        if key.lower() in SECRET_KEYS and value and len(str(value)) >= 4:
            text = text.replace(str(value), "***")
    return text


def lance_options(storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    """The options to hand Lance: ours (``lp_*``) removed."""
    if storage_options is None:
        return None
    return {k: v for k, v in storage_options.items() if not k.lower().startswith("lp_")}
