"""Why a TLS handshake with a broker failed, in one line.

librdkafka reports every certificate problem as the same "certificate verify failed: broker
certificate could not be verified" (OpenSSL's generic 0A000086). An operator needs to know which
one it is - a wrong CA bundle, an expired broker certificate, a name mismatch - so after such a
failure the gateway makes one handshake of its own with Python's ``ssl`` module (the same OpenSSL,
the same CA file and the same hostname check) and reads OpenSSL's verify result from it. Nothing
here sends Kafka bytes: the handshake is closed as soon as it is done.
"""

from __future__ import annotations

import re
import socket
import ssl

# X509_V_ERR_* codes (openssl/x509_vfy.h) -> what it means for the operator
_EXPIRED = {10}  # CERT_HAS_EXPIRED
_NOT_YET_VALID = {9}  # CERT_NOT_YET_VALID
_UNTRUSTED = {2, 18, 19, 20, 21, 27, 28}  # issuer unknown / self-signed / untrusted / rejected
_HOSTNAME = {62, 64}  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH


_PEM_CERT = b"-----BEGIN CERTIFICATE-----"
_PEM_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def _head(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(1 << 20)  # a CA bundle is kilobytes; a megabyte is enough to find the markers


def unusable_files(
    ca: tuple[str, str | None], cert: tuple[str, str | None], key: tuple[str, str | None], password: str | None
) -> list[str]:
    """The TLS files (each ``(setting, path)``) that exist but OpenSSL cannot use, each as
    "setting path (why; what to fix)". librdkafka says only "ssl.ca.location failed: ..." with
    neither the bot's setting nor the file: this names both, before librdkafka is asked."""
    out = []
    (ca_setting, ca_path), (cert_setting, cert_path), (key_setting, key_path) = ca, cert, key
    if ca_path:
        if _PEM_CERT not in _head(ca_path):
            out.append(f"{ca_setting} {ca_path} (not a PEM certificate bundle: no BEGIN CERTIFICATE block)")
        else:
            try:
                ssl.create_default_context(cafile=ca_path)
            except ssl.SSLError as exc:
                out.append(f"{ca_setting} {ca_path} (OpenSSL cannot load it as CA certificates: {exc.reason or exc})")
    if cert_path and key_path:
        bad = []
        if _PEM_CERT not in _head(cert_path):
            bad.append(f"{cert_setting} {cert_path} (not a PEM certificate: no BEGIN CERTIFICATE block)")
        if not _PEM_KEY.search(_head(key_path)):
            bad.append(f"{key_setting} {key_path} (not a PEM private key: no BEGIN PRIVATE KEY block)")
        if not bad:
            try:
                # a callable, never None: with None OpenSSL would prompt on the terminal for the password
                ssl.create_default_context().load_cert_chain(cert_path, key_path, password=lambda: password or "")
            except ssl.SSLError as exc:
                bad.append(
                    f"{cert_setting} {cert_path} with {key_setting} {key_path} (OpenSSL cannot load the pair: "
                    f"{exc.reason or exc}; the key must be the certificate's own, and its password the one set)"
                )
        out += bad
    return out


def _context(cafile: str | None, certfile: str | None, keyfile: str | None, password: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
    if certfile and keyfile:
        ctx.load_cert_chain(certfile, keyfile, password=password)
    return ctx


def diagnose(
    host: str,
    port: int,
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    timeout: float = 3.0,
) -> str | None:
    """One line naming the certificate problem of ``host:port`` as this client sees it, or None
    when the handshake verifies (or cannot be made at all: the caller keeps its own message)."""
    ca = f"the CA in {cafile} (ssl_ca)" if cafile else "the system CA store (no ssl_ca set)"
    try:
        ctx = _context(cafile, certfile, keyfile, password)
    except (OSError, ssl.SSLError) as exc:
        return f"the TLS files cannot be loaded ({type(exc).__name__}: {exc}); check ssl_ca / ssl_cert / ssl_key"
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=host):
                return None
    except ssl.SSLCertVerificationError as exc:
        code, why = exc.verify_code, exc.verify_message
        if code in _EXPIRED:
            return f"the broker certificate of {host}:{port} has expired ({why}); renew it on the broker"
        if code in _NOT_YET_VALID:
            return f"the broker certificate of {host}:{port} is not valid yet ({why}); check the clocks"
        if code in _UNTRUSTED:
            return (
                f"the broker certificate of {host}:{port} is not signed by {ca} ({why}); "
                f"point ssl_ca at the CA that signed the brokers' certificates"
            )
        if code in _HOSTNAME:
            return (
                f"the broker certificate of {host}:{port} is not issued for {host} ({why}); "
                f"connect by a name or address in its subjectAltName"
            )
        return f"the broker certificate of {host}:{port} failed verification ({why})"
    except (OSError, ssl.SSLError):
        return None
