"""The `did` error family: one class per failure kind, each with a stable wire `code`."""


class DIDError(Exception):
    """Base of every error raised by `did`; `code` is the stable wire code, `detail` the reason."""

    code: str = "did_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidDIDError(DIDError):
    """The DID (or DID URL, or base URL) is malformed; raised before any network call."""

    code = "did_invalid"


class DIDResolutionError(DIDError):
    """The DID document could not be fetched: network failure, timeout, unexpected status,
    oversized or non-JSON body, forbidden address or refused redirect."""

    code = "did_unresolvable"


class DIDHostUnreachableError(DIDResolutionError):
    """The DID's host could not be reached or did not finish answering in time (connection
    refused or reset, TLS failure, timeout): a failure of the host, not of one DID."""


class AddressRefusedError(DIDResolutionError):
    """The URL's host resolves to an address the outbound policy forbids (loopback, private,
    link-local, …; ``did.outbound``). Nothing was sent to it."""


class DIDDocumentError(DIDError):
    """The DID document (or a key inside it) fails validation."""

    code = "did_document_invalid"


class DIDKeyError(DIDError):
    """The keyid is not in the DID document, or not authorised for the requested relationship."""

    code = "did_key_unknown"
