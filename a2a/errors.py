"""Error tree for request signing and verification.

Every class carries a stable wire ``code`` (rendered by the gateway as an RFC 9457
problem type) and a human-readable ``detail``. ``detail`` may name components or
parameters, but never echoes key material.
"""

from __future__ import annotations


class A2AError(Exception):
    """Base class of every error raised by the ``a2a`` package."""

    code: str = "a2a_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class SignatureError(A2AError):
    """An RFC 9421 signature could not be accepted."""

    code = "signature_invalid"


class SignatureMissingError(SignatureError):
    """No ``Signature``/``Signature-Input`` field, or no signature with the expected tag."""

    code = "signature_missing"


class SignatureMalformedError(SignatureError):
    """A signature field or component cannot be parsed or violates RFC 9421 syntax rules.

    Covers unparseable structured fields, labels present in only one field, bad byte
    sequences, several signatures with our tag, unknown parameters and non-ASCII bases.
    """

    code = "signature_malformed"


class SignatureComponentsError(SignatureError):
    """A required component is not covered, or a covered component is absent from the message."""

    code = "signature_components_missing"


class SignatureExpiredError(SignatureError):
    """``created``/``expires`` are missing or outside the accepted time window."""

    code = "signature_expired"


class SignatureAlgorithmError(SignatureError):
    """The signed ``alg`` parameter names an algorithm other than ``ed25519``."""

    code = "signature_algorithm"


class SignatureVerificationError(SignatureError):
    """The cryptographic check of the signature failed."""

    code = "signature_invalid"


class DigestMismatchError(SignatureError):
    """``Content-Digest`` is missing, malformed, has no supported algorithm, or does not match."""

    code = "content_digest_mismatch"
