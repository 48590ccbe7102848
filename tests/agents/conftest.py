"""Fixtures for the agent runtime: a loopback LLM provider and a pgvector-capable PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from gateway import migrations
from gateway.embedded import with_database
from tests.agents.llmserver import FakeLLM
from tests.agents.vector_cluster import vector_cluster
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
async def vector_admin_dsn() -> AsyncIterator[str]:
    """A PostgreSQL cluster with the pgvector extension (pgserver's binaries), of this test
    session alone: started in a temporary directory on first use, stopped at the end."""
    async with vector_cluster() as dsn:
        yield dsn


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
