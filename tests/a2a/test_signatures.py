"""RFC 9421 signatures: Appendix B.2.6 signing/verification, round trip, attacks, interop.

Signature-base tests (RFC 9421 §2: Appendix B bases, derived components, field lines)
live in ``test_signature_base.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from http_message_signatures import HTTPMessageSigner, HTTPMessageVerifier, MappingKeyResolver
from http_message_signatures import algorithms as hms_algorithms
from http_sf import parse as sf_parse
from http_sf import ser as sf_ser
from http_sf.innerlist import ser_innerlist
from starlette.datastructures import Headers as StarletteHeaders

from a2a import errors
from a2a.digest import content_digest
from a2a.signatures import (
    CONFER_TAG,
    DEFAULT_COMPONENTS,
    SignatureInput,
    check_signature_params,
    parse_signature,
    sign_request,
    verify_request,
    verify_signature,
)
from tests.a2a.rfc9421_vectors import (
    B26_COMPONENTS,
    B26_PARAMS,
    B26_SIGNATURE,
    B26_SIGNATURE_INPUT,
    PRIVATE_PEM,
    PUBLIC_PEM,
    RFC_BODY,
    RFC_HEADERS,
    RFC_URL,
)

# --------------------------------------------------------------------------- RFC 9421 App. B


def _rfc_private_key() -> Ed25519PrivateKey:
    key = load_pem_private_key(PRIVATE_PEM, None)
    assert isinstance(key, Ed25519PrivateKey)
    return key


def _rfc_public_key() -> Ed25519PublicKey:
    key = load_pem_public_key(PUBLIC_PEM)
    assert isinstance(key, Ed25519PublicKey)
    return key


def test_b26_signing_reproduces_rfc_fields() -> None:
    added = sign_request(
        method="POST",
        url=RFC_URL,
        headers=RFC_HEADERS,
        body=RFC_BODY,
        private_key=_rfc_private_key(),
        keyid="test-key-ed25519",
        created=1618884473,
        expires=None,
        nonce=None,
        tag=None,
        components=B26_COMPONENTS,
        label="sig-b26",
        include_alg=False,
    )
    assert added == {"Signature-Input": B26_SIGNATURE_INPUT, "Signature": B26_SIGNATURE}


@pytest.mark.parametrize("wrap", [list, httpx.Headers], ids=["pairs", "httpx"])
def test_b26_verifies_with_public_key(wrap: type) -> None:
    headers = wrap(
        [*RFC_HEADERS, ("Signature-Input", B26_SIGNATURE_INPUT), ("Signature", B26_SIGNATURE)]
    )
    parsed = parse_signature(headers, tag=None)
    assert parsed.label == "sig-b26"
    assert parsed.components == B26_COMPONENTS
    assert parsed.params_value == B26_PARAMS
    assert parsed.signature.hex().startswith("c2a700a9b998")
    verify_request(
        parsed,
        method="POST",
        url=RFC_URL,
        headers=headers,
        body=RFC_BODY,
        public_key=_rfc_public_key(),
        now=1618884473 + 60,
        required_components=(),
        max_age=10**10,
        require_expires=False,
    )


# --------------------------------------------------------------------------- round trip

NOW = 1_700_000_000
URL = "https://gw.example/a2a/v1?x=1"
BODY = b'{"jsonrpc": "2.0", "method": "SendMessage", "id": 1}'
BASE_HEADERS = [("Host", "gw.example"), ("Content-Type", "application/json")]
KEY = Ed25519PrivateKey.generate()


def _sign_args(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments for ``sign_request`` on a request to ``URL`` signed by ``KEY``."""
    defaults: dict[str, Any] = {
        "method": "POST",
        "url": URL,
        "headers": BASE_HEADERS,
        "body": BODY,
        "private_key": KEY,
        "keyid": "did:web:peer.example#key-1",
        "created": NOW,
        "expires": NOW + 60,
        "nonce": "n-0001",
    }
    return defaults | overrides


def _sign(**overrides: Any) -> list[tuple[str, str]]:
    """All header lines of the signed request (``overrides`` as for ``_sign_args``)."""
    args = _sign_args(**overrides)
    return [*args["headers"], *sign_request(**args).items()]


def _verify(headers: list[tuple[str, str]], **overrides: Any) -> SignatureInput:
    """Parse and verify like the gateway does; keyword overrides go to verify_request."""
    parsed = parse_signature(headers)
    defaults: dict[str, Any] = {
        "method": "POST",
        "url": URL,
        "headers": headers,
        "body": BODY,
        "public_key": KEY.public_key(),
        "now": NOW + 1,
    }
    verify_request(parsed, **(defaults | overrides))
    return parsed


def _replace(headers: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(k, value if k.lower() == name.lower() else v) for k, v in headers]


def test_round_trip_exposes_parameters() -> None:
    headers = _sign()
    assert dict(headers)["Signature-Input"] == (
        'sig1=("@method" "@authority" "@path" "@query" "content-type" "content-digest")'
        f';created={NOW};keyid="did:web:peer.example#key-1";alg="ed25519"'
        f';expires={NOW + 60};nonce="n-0001";tag="confer-a2a"'
    )
    parsed = _verify(headers)
    assert parsed.components == DEFAULT_COMPONENTS
    assert (parsed.keyid, parsed.created, parsed.expires) == (
        "did:web:peer.example#key-1",
        NOW,
        NOW + 60,
    )
    assert (parsed.nonce, parsed.tag, parsed.alg) == ("n-0001", CONFER_TAG, "ed25519")


def test_signature_fields_are_written_and_read_back_as_http_sf_writes_them() -> None:
    """Signing writes each field, and parsing rebuilds ``@signature-params``, from identifiers
    serialised once per process: the text is exactly http_sf's serialisation of the same
    Dictionary, for a parameterised component too."""
    components = ("@method", '"@query-param";name="x"', "content-type", "content-digest")
    headers = _sign(components=components, label="s-1")
    fields = dict(headers)
    for name in ("Signature-Input", "Signature"):
        assert sf_ser(sf_parse(fields[name].encode(), tltype="dictionary")) == fields[name]
    member = sf_parse(fields["Signature-Input"].encode(), tltype="dictionary")["s-1"]
    parsed = _verify(headers, required_components=components)
    assert parsed.params_value == ser_innerlist(member)
    assert parsed.components == components


def test_verify_signature_checks_the_signature_over_the_received_request() -> None:
    headers = _sign()
    parsed = parse_signature(headers)
    verify_signature(parsed, method="POST", url=URL, headers=headers, public_key=KEY.public_key())
    for method, url in (("PUT", URL), ("POST", URL.replace("x=1", "x=2"))):
        with pytest.raises(errors.SignatureVerificationError):
            verify_signature(
                parsed, method=method, url=url, headers=headers, public_key=KEY.public_key()
            )
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(errors.SignatureVerificationError):
        verify_signature(parsed, method="POST", url=URL, headers=headers, public_key=other)


def test_sign_reuses_matching_content_digest_and_rejects_wrong_one() -> None:
    good = [*BASE_HEADERS, ("Content-Digest", content_digest(BODY))]
    assert "Content-Digest" not in sign_request(**_sign_args(headers=good))
    bad = [*BASE_HEADERS, ("Content-Digest", content_digest(b"other"))]
    with pytest.raises(errors.DigestMismatchError):
        sign_request(**_sign_args(headers=bad))


def test_selects_our_tag_among_other_signatures() -> None:
    ours = _sign()
    theirs = _sign(tag="proxy", label="sig2", keyid="proxy-key")
    headers = [*ours, *[(k, v) for k, v in theirs if k.startswith("Signature")]]
    assert _verify(headers).label == "sig1"


def test_verify_with_starlette_headers() -> None:
    raw = [(k.lower().encode(), v.encode()) for k, v in _sign()]
    headers = StarletteHeaders(raw=raw)
    parsed = parse_signature(headers)
    verify_request(
        parsed,
        method="POST",
        url=URL,
        headers=headers,
        body=BODY,
        public_key=KEY.public_key(),
        now=NOW,
    )


def test_policy_checks_run_before_key_lookup() -> None:
    parsed = parse_signature(_sign())
    check_signature_params(parsed, now=NOW)
    with pytest.raises(errors.SignatureExpiredError):
        check_signature_params(parsed, now=NOW + 3600)


def test_optional_expires_policy() -> None:
    _verify(_sign(expires=None), require_expires=False)


@pytest.mark.parametrize(
    ("headers", "verify_overrides", "error"),
    [
        (_sign(), {"body": BODY + b" "}, errors.DigestMismatchError),
        (_sign(), {"url": "https://gw.example/a2a/v2?x=1"}, errors.SignatureVerificationError),
        (_sign(), {"url": "https://gw.example/a2a/v1?x=2"}, errors.SignatureVerificationError),
        (_sign(), {"url": "https://evil.example/a2a/v1?x=1"}, errors.SignatureVerificationError),
        (_sign(), {"method": "PUT"}, errors.SignatureVerificationError),
        (
            _sign(),
            {"public_key": Ed25519PrivateKey.generate().public_key()},
            errors.SignatureVerificationError,
        ),
        (_sign(), {"now": NOW + 100}, errors.SignatureExpiredError),
        (_sign(), {"now": NOW - 10}, errors.SignatureExpiredError),
        (_sign(created=NOW - 400, expires=NOW + 60), {}, errors.SignatureExpiredError),
        (_sign(expires=None), {}, errors.SignatureExpiredError),
        (_sign(expires=NOW - 60), {}, errors.SignatureExpiredError),
        (_sign(components=DEFAULT_COMPONENTS[:-1]), {}, errors.SignatureComponentsError),
    ],
    ids=[
        "tampered-body",
        "tampered-path",
        "tampered-query",
        "tampered-authority",
        "tampered-method",
        "wrong-key",
        "expired",
        "created-in-future",
        "too-old",
        "missing-expires",
        "expires-before-created",
        "missing-required-component",
    ],
)
def test_verification_attacks(
    headers: list[tuple[str, str]], verify_overrides: dict[str, object], error: type
) -> None:
    with pytest.raises(error):
        _verify(headers, **verify_overrides)


def test_tampered_content_type() -> None:
    headers = _replace(_sign(), "content-type", "text/plain")
    with pytest.raises(errors.SignatureVerificationError):
        _verify(headers)


def test_tampered_content_digest_header() -> None:
    # Body and digest swapped together: the digest matches, but the signature covers it.
    headers = _replace(_sign(), "content-digest", content_digest(b"evil"))
    with pytest.raises(errors.SignatureVerificationError):
        _verify(headers, body=b"evil")


def test_missing_content_digest_header() -> None:
    headers = [(k, v) for k, v in _sign() if k != "Content-Digest"]
    with pytest.raises(errors.DigestMismatchError):
        _verify(headers)


def test_foreign_algorithm_is_rejected() -> None:
    headers = [(k, v.replace('alg="ed25519"', 'alg="rsa-pss-sha512"')) for k, v in _sign()]
    with pytest.raises(errors.SignatureAlgorithmError):
        _verify(headers)


def test_duplicate_signatures_with_our_tag() -> None:
    second = [(k, v) for k, v in _sign(label="sig2") if k.startswith("Signature")]
    with pytest.raises(errors.SignatureMalformedError):
        parse_signature([*_sign(), *second])


def test_signature_with_other_tag_only() -> None:
    with pytest.raises(errors.SignatureMissingError):
        parse_signature(_sign(tag="someone-else"))


def test_untagged_signature_is_not_ours() -> None:
    with pytest.raises(errors.SignatureMissingError):
        parse_signature(_sign(tag=None))


@pytest.mark.parametrize(
    "drop", [{"Signature"}, {"Signature-Input"}, {"Signature", "Signature-Input"}]
)
def test_missing_signature_fields(drop: set[str]) -> None:
    headers = [(k, v) for k, v in _sign() if k not in drop]
    with pytest.raises(errors.SignatureMissingError):
        parse_signature(headers)


def test_label_in_only_one_field() -> None:
    headers = [(k, v.replace("sig1=", "sig9=") if k == "Signature" else v) for k, v in _sign()]
    with pytest.raises(errors.SignatureMalformedError, match="only one"):
        parse_signature(headers)


GOOD_INPUT = 'sig1=("@method");created=1;keyid="k";tag="confer-a2a"'
GOOD_SIG = "sig1=:AAAA:"


@pytest.mark.parametrize(
    ("signature_input", "signature"),
    [
        ("not a dictionary!!", GOOD_SIG),
        (GOOD_INPUT, "sig1=AAAA"),  # token, not a byte sequence
        (GOOD_INPUT, "sig1=:not base64!:"),
        ('sig1="@method";keyid="k";tag="confer-a2a"', GOOD_SIG),  # not an inner list
        ('sig1=(@method);keyid="k";tag="confer-a2a"', GOOD_SIG),  # token component
        ('sig1=("@method");created=1;tag="confer-a2a"', GOOD_SIG),  # no keyid
        ('sig1=("@method");keyid="k";tag="confer-a2a";foo=1', GOOD_SIG),  # unknown param
        ('sig1=("@method");keyid="k";created="1";tag="confer-a2a"', GOOD_SIG),  # mistyped
        ('sig1=("@method");keyid="k";created=?1;tag="confer-a2a"', GOOD_SIG),  # boolean
        ('sig1=("@method");keyid="k";created=1;created=2;tag="confer-a2a"', GOOD_SIG),
        ('sig1=("@method" "@method");keyid="k";tag="confer-a2a"', GOOD_SIG),  # duplicate component
        ('sig1=("@Method");keyid="k";tag="confer-a2a"', GOOD_SIG),
        ('sig1=("content-type";bs);keyid="k";tag="confer-a2a"', GOOD_SIG),
        (f"{GOOD_INPUT}, sig1=()", f"{GOOD_SIG}"),  # duplicate label
        ('Sig1=("@method");keyid="k";tag="confer-a2a"', "Sig1=:AAAA:"),  # uppercase label
        ('sig1=("@method");keyid="caf\u00e9";tag="confer-a2a"', GOOD_SIG),
    ],
)
def test_garbage_signature_fields(signature_input: str, signature: str) -> None:
    headers = [("Signature-Input", signature_input), ("Signature", signature)]
    with pytest.raises(errors.SignatureMalformedError):
        parse_signature(headers)


def test_signature_fields_may_span_lines() -> None:
    headers = [
        ("Signature-Input", 'other=("@method");keyid="x";tag="x"'),
        ("Signature-Input", GOOD_INPUT),
        ("Signature", "other=:AAAA:"),
        ("Signature", GOOD_SIG),
    ]
    parsed = parse_signature(headers)
    assert (parsed.label, parsed.signature, parsed.created) == ("sig1", b"\x00\x00\x00", 1)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.SignatureError, "signature_invalid"),
        (errors.SignatureMissingError, "signature_missing"),
        (errors.SignatureMalformedError, "signature_malformed"),
        (errors.SignatureComponentsError, "signature_components_missing"),
        (errors.SignatureExpiredError, "signature_expired"),
        (errors.SignatureAlgorithmError, "signature_algorithm"),
        (errors.SignatureVerificationError, "signature_invalid"),
        (errors.DigestMismatchError, "content_digest_mismatch"),
    ],
)
def test_error_codes(error: type[errors.A2AError], code: str) -> None:
    exc = error("why")
    assert (exc.code, exc.detail, str(exc)) == (code, "why", "why")
    assert isinstance(exc, errors.SignatureError)


# --------------------------------------------------------------------------- interop


def _library_keys(key: Ed25519PrivateKey, keyid: str) -> MappingKeyResolver:
    return MappingKeyResolver(public_keys={keyid: key.public_key()}, private_keys={keyid: key})


INTEROP_COMPONENTS = (*DEFAULT_COMPONENTS, '"@query-param";name="bar"')
INTEROP_URL = "https://peer.example:8443/a2a/v1?x=1&bar=with+plus+whitespace"


def _interop_request() -> httpx.Request:
    return httpx.Request(
        "POST", INTEROP_URL, headers={"Content-Type": "application/json"}, content=BODY
    )


def test_our_signature_verifies_with_http_message_signatures() -> None:
    request = _interop_request()
    request.headers.update(
        sign_request(
            **_sign_args(
                url=str(request.url),
                headers=request.headers,
                keyid="peer-key",
                created=int(datetime.now(UTC).timestamp()),
                expires=int(datetime.now(UTC).timestamp()) + 60,
                nonce="interop-nonce",
                components=INTEROP_COMPONENTS,
            )
        )
    )
    verifier = HTTPMessageVerifier(
        signature_algorithm=hms_algorithms.ED25519, key_resolver=_library_keys(KEY, "peer-key")
    )
    [result] = verifier.verify(
        request, expect_tag=CONFER_TAG, body=BODY, require_components=INTEROP_COMPONENTS
    )
    assert result.nonce == "interop-nonce"
    assert result.parameters["alg"] == "ed25519"


def test_http_message_signatures_signature_verifies_with_ours() -> None:
    request = _interop_request()
    signer = HTTPMessageSigner(
        signature_algorithm=hms_algorithms.ED25519, key_resolver=_library_keys(KEY, "peer-key")
    )
    signer.sign(
        request,
        key_id="peer-key",
        created=datetime.fromtimestamp(NOW, UTC),
        expires=datetime.fromtimestamp(NOW + 60, UTC),
        nonce="library-nonce",
        tag=CONFER_TAG,
        include_alg=True,
        covered_component_ids=INTEROP_COMPONENTS,
        body=request.content,
    )
    parsed = parse_signature(request.headers)
    verify_request(
        parsed,
        method=request.method,
        url=str(request.url),
        headers=request.headers,
        body=request.content,
        public_key=KEY.public_key(),
        now=NOW + 2,
        required_components=INTEROP_COMPONENTS,
    )
    assert (parsed.label, parsed.nonce, parsed.alg) == ("pyhms", "library-nonce", "ed25519")
