"""Why a TLS handshake with a broker failed, in one line.

librdkafka reports every certificate problem as the same "certificate verify failed: broker
certificate could not be verified" (OpenSSL's generic 0A000086). An operator needs to know which
one it is - a wrong CA bundle, an expired broker certificate, a name mismatch - so after such a
failure the gateway makes one handshake of its own with Python's ``ssl`` module (the same OpenSSL,
the same CA file and the same hostname check) and reads OpenSSL's verify result from it. Nothing
here sends Kafka bytes: the handshake is closed as soon as it is done.
"""

from __future__ import annotations

import socket
import ssl

# X509_V_ERR_* codes (openssl/x509_vfy.h) -> what it means for the operator
_EXPIRED = {10}  # CERT_HAS_EXPIRED
_NOT_YET_VALID = {9}  # CERT_NOT_YET_VALID
_UNTRUSTED = {2, 18, 19, 20, 21, 27, 28}  # issuer unknown / self-signed / untrusted / rejected
_HOSTNAME = {62, 64}  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH


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
