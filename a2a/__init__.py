"""Confer's A2A transport security: RFC 9421 HTTP Message Signatures and RFC 9530 Content-Digest."""
