"""Fixtures for the agent runtime: a loopback LLM provider and a pgvector-capable PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from gateway import migrations
from gateway.embedded import embedded_postgres_url, with_database
from tests.agents.llmserver import FakeLLM
from tests.conftest import ROOT
from tests.gateway.harness import free_port, serve


@dataclass
class LLMServer:
    """The fake provider and its base URL (``http://127.0.0.1:<port>/v1``)."""

    fake: FakeLLM
    base_url: str


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMServer]:
    """A real HTTP server on loopback speaking the OpenAI and Anthropic wire formats."""
    fake = FakeLLM()
    port = free_port()
    async with serve(fake.app(), port):
        yield LLMServer(fake, f"http://127.0.0.1:{port}/v1")


@pytest.fixture(scope="session")
def vector_admin_dsn() -> str:
    """An embedded PostgreSQL (pgserver) with the pgvector extension, started once."""
    return embedded_postgres_url(ROOT / ".data" / "test-pg-vector")


@pytest.fixture
async def vector_database_url(vector_admin_dsn: str) -> AsyncIterator[str]:
    """A fresh database on the pgvector server, migrated to head (so ``embeddings`` exists)."""
    name = f"confer_v_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(vector_admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(vector_admin_dsn, name)
    await asyncio.to_thread(migrations.upgrade, url)
    yield url
    admin = await asyncpg.connect(vector_admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
