"""Storage options: the Lance option keys the storage layer reads, which are secret,
and how their values are parsed, shown (``redact``) and handed on to Lance.

Split from ``storage`` so that option parsing, which several modules need
(``storage``, ``commit_safety``, the Spark options), has one home of its own.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping

from lance_partitioned.errors import UnknownStorageOptionWarning

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

# Keys Lance reads that no store prefix below covers: Lance's own and object_store's
# client keys (https://lancedb.github.io/lance/object_store.html, object_store's
# ClientConfigKey), and the unprefixed aliases of the S3, GCS and Azure keys.
_KNOWN_KEYS = frozenset(
    {
        # every store
        "allow_http",
        "allow_invalid_certificates",
        "client_max_retries",
        "client_retry_timeout",
        "connect_timeout",
        "default_content_type",
        "download_retry_count",
        "expires_at_millis",
        "http1_only",
        "http2_only",
        "http2_keep_alive_interval",
        "http2_keep_alive_timeout",
        "http2_keep_alive_while_idle",
        "http2_max_frame_size",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_ca_certificate",
        "proxy_excludes",
        "proxy_url",
        "randomize_addresses",
        "request_timeout",
        "timeout",
        "user_agent",
        # S3
        "access_key_id",
        "bucket",
        "bucket_name",
        "checksum_algorithm",
        "conditional_put",
        "copy_if_not_exists",
        "default_region",
        "disable_tagging",
        "endpoint",
        "endpoint_url",
        "imdsv1_fallback",
        "metadata_endpoint",
        "region",
        "request_payer",
        "s3_express",
        "secret_access_key",
        "session_token",
        "skip_signature",
        "token",
        "unsigned_payload",
        "virtual_hosted_style_request",
        # GCS
        "application_credentials",
        "service_account",
        "service_account_key",
        "service_account_path",
        # Azure
        "access_key",
        "account_key",
        "account_name",
        "authority_host",
        "authority_id",
        "bearer_token",
        "client_id",
        "client_secret",
        "container_name",
        "federated_token_file",
        "identity_endpoint",
        "master_key",
        "msi_endpoint",
        "msi_resource_id",
        "object_id",
        "sas_key",
        "sas_token",
        "tenant_id",
        "use_azure_cli",
        "use_emulator",
        "use_fabric_endpoint",
    }
)
# A store's own keys carry its prefix, and each store has many (and gains more with
# new Lance releases): any key with one of these prefixes is taken as known.
_KNOWN_PREFIXES = ("aws_", "google_", "gcs_", "azure_", "object_store_", "oss_", "hf_", "lp_")


def unknown_options(options: Mapping[str, str] | None) -> list[str]:
    """The keys of ``options`` that neither Lance nor this library is known to read
    (case-insensitive), in their given spelling, sorted."""
    return sorted(
        key
        for key in options or {}
        if key.lower() not in _KNOWN_KEYS
        and key.lower() not in SECRET_KEYS
        and not any(key.lower() in spellings for spellings in STORAGE_KEYS.values())
        and not key.lower().startswith(_KNOWN_PREFIXES)
    )


def warn_unknown_options(options: Mapping[str, str] | None) -> None:
    """Warn (``UnknownStorageOptionWarning``) naming each key of ``options`` that
    ``unknown_options`` finds: Lance ignores such a key silently, and it is usually a
    misspelling. A warning, not an error: the list of keys cannot be complete."""
    unknown = unknown_options(options)
    if unknown:
        warnings.warn(
            f"unknown storage option(s) {unknown}: Lance ignores keys it does not know "
            "(a misspelling?); known are the object-store keys such as aws_region, "
            "aws_endpoint, allow_http, timeout, azure_storage_account_name, "
            "google_service_account",
            UnknownStorageOptionWarning,
            stacklevel=4,
        )


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
