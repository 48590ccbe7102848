"""did:web identifiers, DID documents with Ed25519 keys, and an async did:web resolver.

Pure library pieces with no FastAPI and no database: `did.web` maps DIDs to URLs and back,
`did.keys` encodes Ed25519 public keys (Multikey, JWK), `did.document` builds and validates DID
documents, `did.resolver` fetches them over httpx with SSRF, size and time limits, and
`did.errors` holds the error family the gateway maps to problem details.
"""
