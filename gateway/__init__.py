"""Confer's HTTP and WebSocket edge: routes, services, storage, real-time fan-out and workers.

This is the only package that knows FastAPI and asyncpg; it composes the ``a2a`` and ``did``
libraries and the ``models`` types. Entry point: :func:`gateway.app.create_app`.
"""
