"""RFC 9421 §2 signature base: Appendix B bases, derived components, field lines, errors."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from starlette.datastructures import Headers as StarletteHeaders

from a2a import errors
from a2a.signature_base import (
    _covered,
    _parse_component,
    _serialise_identifier,
    field_lines,
    signature_base,
)
from tests.a2a.rfc9421_vectors import (
    B26_BASE,
    B26_COMPONENTS,
    B26_PARAMS,
    RFC_DIGEST,
    RFC_HEADERS,
    RFC_URL,
)

# --------------------------------------------------------------------------- RFC 9421 App. B


def _rfc_base(components: tuple[str, ...], params_value: str) -> bytes:
    return signature_base(components, params_value, method="POST", url=RFC_URL, headers=RFC_HEADERS)


def test_b26_signature_base_is_exact() -> None:
    base = _rfc_base(B26_COMPONENTS, B26_PARAMS)
    assert base == B26_BASE
    assert len(base) == 284
    assert hashlib.sha256(base).hexdigest() == (
        "e6402577f54303accfda63dfbde1a7b8c5e5e6f3f7898637b7d78dc07ee1896a"
    )


def test_b21_base() -> None:
    params = '();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd"'
    assert _rfc_base((), params) == f'"@signature-params": {params}'.encode()


def test_b22_base() -> None:
    components = ("@authority", "content-digest", '"@query-param";name="Pet"')
    params = (
        '("@authority" "content-digest" "@query-param";name="Pet")'
        ';created=1618884473;keyid="test-key-rsa-pss";tag="header-example"'
    )
    expected = [
        '"@authority": example.com',
        f'"content-digest": {RFC_DIGEST}',
        '"@query-param";name="Pet": dog',
        f'"@signature-params": {params}',
    ]
    assert _rfc_base(components, params) == "\n".join(expected).encode()


def test_b23_base() -> None:
    components = (
        "date",
        "@method",
        "@path",
        "@query",
        "@authority",
        "content-type",
        "content-digest",
        "content-length",
    )
    params = (
        '("date" "@method" "@path" "@query" "@authority" "content-type" "content-digest" '
        '"content-length");created=1618884473;keyid="test-key-rsa-pss"'
    )
    expected = [
        '"date": Tue, 20 Apr 2021 02:07:55 GMT',
        '"@method": POST',
        '"@path": /foo',
        '"@query": ?param=Value&Pet=dog',
        '"@authority": example.com',
        '"content-type": application/json',
        f'"content-digest": {RFC_DIGEST}',
        '"content-length": 18',
        f'"@signature-params": {params}',
    ]
    assert _rfc_base(components, params) == "\n".join(expected).encode()


def test_b25_hmac_base() -> None:
    params = '("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret"'
    expected = [
        '"date": Tue, 20 Apr 2021 02:07:55 GMT',
        '"@authority": example.com',
        '"content-type": application/json',
        f'"@signature-params": {params}',
    ]
    assert _rfc_base(("date", "@authority", "content-type"), params) == "\n".join(expected).encode()


# --------------------------------------------------------------------------- components


def _line(component: str, url: str, headers: list[tuple[str, str]] | None = None) -> str:
    """The single base line produced for ``component`` on a GET of ``url``."""
    base = signature_base([component], "()", method="GET", url=url, headers=headers or [])
    return base.decode().split("\n")[0]


QUERY_EXAMPLE = (
    "https://example.com/?var=this%20is%20a%20big%0Amultiline%20value"
    "&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something"
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("var", "this%20is%20a%20big%0Amultiline%20value"),
        ("bar", "with%20plus%20whitespace"),
        ("fa%C3%A7ade%22%3A%20", "something"),
    ],
)
def test_query_param_worked_example(name: str, expected: str) -> None:
    component = f'"@query-param";name="{name}"'
    assert _line(component, QUERY_EXAMPLE) == f"{component}: {expected}"


def test_query_param_empty_value_keeps_trailing_space() -> None:
    assert _line('"@query-param";name="a"', "https://x.test/?a=&b=1") == '"@query-param";name="a": '


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com:443/", "example.com"),
        ("http://example.com:80/", "example.com"),
        ("https://example.com:8443/", "example.com:8443"),
        ("http://example.com:443/", "example.com:443"),
        ("https://EXAMPLE.com/", "example.com"),
        ("https://user:pw@example.com/", "example.com"),
        ("https://[::1]:443/", "[::1]"),
        ("https://[::1]:8443/", "[::1]:8443"),
    ],
)
def test_authority_drops_default_port(url: str, expected: str) -> None:
    assert _line("@authority", url) == f'"@authority": {expected}'


@pytest.mark.parametrize(
    ("component", "url", "expected"),
    [
        ("@path", "https://example.com", "/"),
        ("@path", "https://example.com?a=b", "/"),
        ("@path", "https://example.com/a%2Fb/c%20d", "/a%2Fb/c%20d"),
        ("@query", "https://example.com/p", "?"),
        ("@query", "https://example.com/p?", "?"),
        ("@query", "https://example.com/p?a=b%2Dc&d=e+f#frag", "?a=b%2Dc&d=e+f"),
        ("@target-uri", "https://example.com/p%20q?a=1#frag", "https://example.com/p%20q?a=1"),
        ("@scheme", "HTTPS://example.com/", "https"),
        ("@request-target", "https://example.com/p?a=1", "/p?a=1"),
        ("@request-target", "https://example.com", "/"),
        ("@method", "https://example.com/", "GET"),
    ],
)
def test_derived_components(component: str, url: str, expected: str) -> None:
    assert _line(component, url) == f'"{component}": {expected}'


def test_field_lines_are_trimmed_and_joined() -> None:
    headers = [("X-Multi", "  a, b "), ("x-multi", "c\r\n  d"), ("Other", "z")]
    assert _line("x-multi", "https://x.test/", headers) == '"x-multi": a, b, c d'
    assert _line("x-empty", "https://x.test/", [("X-Empty", "")]) == '"x-empty": '


@pytest.mark.parametrize(
    "headers",
    [
        [("X-A", "1"), ("x-a", "2")],
        httpx.Headers([("X-A", "1"), ("x-a", "2")]),
        StarletteHeaders(raw=[(b"x-a", b"1"), (b"x-a", b"2")]),
    ],
    ids=["pairs", "httpx", "starlette"],
)
def test_field_lines_keeps_every_line(headers: object) -> None:
    assert field_lines(headers, "X-A") == ["1", "2"]  # type: ignore[arg-type]


def test_field_lines_plain_mapping_is_case_insensitive() -> None:
    assert field_lines({"Content-Type": "text/plain"}, "content-type") == ["text/plain"]


@pytest.mark.parametrize(
    ("components", "url", "error"),
    [
        (["@unknown"], "https://x.test/", errors.SignatureMalformedError),
        (["@status"], "https://x.test/", errors.SignatureMalformedError),
        (["@signature-params"], "https://x.test/", errors.SignatureMalformedError),
        (["@method", '"@method"'], "https://x.test/", errors.SignatureMalformedError),
        (["Content-Type"], "https://x.test/", errors.SignatureMalformedError),
        (['"content-type";sf'], "https://x.test/", errors.SignatureMalformedError),
        (['"@method";req'], "https://x.test/", errors.SignatureMalformedError),
        (["@query-param"], "https://x.test/?a=1", errors.SignatureMalformedError),
        (['"@query-param";name="a"'], "https://x.test/?b=1", errors.SignatureComponentsError),
        (['"@query-param";name="a"'], "https://x.test/?a=1&a=2", errors.SignatureComponentsError),
        (["x-absent"], "https://x.test/", errors.SignatureComponentsError),
        (["x-unicode"], "https://x.test/", errors.SignatureMalformedError),
        (["@path"], "https://x.test/caf\u00e9", errors.SignatureMalformedError),
        (["@path"], "/relative", errors.SignatureMalformedError),
    ],
)
def test_signature_base_errors(components: list[str], url: str, error: type) -> None:
    headers = [("x-unicode", "caf\u00e9")]
    with pytest.raises(error):
        signature_base(components, "()", method="GET", url=url, headers=headers)


# --------------------------------------------------------------------------- identifier cache


def test_component_identifiers_are_cached_as_parsing_gives_them_and_bounded() -> None:
    """Each identifier is parsed and serialised once per process (``_covered``): the cached
    record is what parsing the string again gives, a refused identifier is refused every
    time (never cached), and a stranger's endless new identifiers cannot grow the cache."""
    _covered.cache_clear()
    for component in ("@method", '"@method"', '"@query-param";name="a"', "content-digest"):
        name, params = _parse_component(component)
        assert _covered(component) == (
            name,
            params,
            (name, frozenset(params.items())),
            _serialise_identifier(name, params),
        )
        assert _covered(component) is _covered(component)
    for _ in range(2):
        with pytest.raises(errors.SignatureMalformedError):
            _covered('"@query-param"')  # no name parameter
    assert _covered.cache_info().currsize == 4
    limit = _covered.cache_info().maxsize
    assert limit is not None
    for i in range(limit + 100):
        _covered(f"x-field-{i}")
    assert _covered.cache_info().currsize == limit
    # an evicted identifier comes back the same
    assert _covered("@method").identifier == '"@method"'
