"""The embedded PostgreSQL (pgserver): ``confer demo`` stops a server it started, not others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pgserver.utils import PostmasterInfo

START = (
    "import sys; from pathlib import Path; from gateway.embedded import embedded_postgres_url; "
    "print(embedded_postgres_url(Path(sys.argv[1]), stop_at_exit=sys.argv[2] == 'stop'))"
)


def _start(data_dir: Path, mode: str) -> None:
    subprocess.run(
        [sys.executable, "-c", START, str(data_dir), mode],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )


def _running(data_dir: Path) -> bool:
    info = PostmasterInfo.read_from_pgdata(data_dir)
    return info is not None and info.is_running()


def test_a_server_started_to_stop_at_exit_is_stopped_and_a_running_one_is_kept(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "pg"
    _start(data_dir, "stop")
    assert not _running(data_dir)  # started by that process, stopped when it exited
    _start(data_dir, "keep")
    try:
        assert _running(data_dir)  # the default: the server outlives the process
        _start(data_dir, "stop")
        assert _running(data_dir)  # already running before: left alone
    finally:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pgserver.postgres_server import get_server;"
                " get_server(sys.argv[1], cleanup_mode='stop')",
                str(data_dir),
            ],
            timeout=120,
        )
    assert not _running(data_dir)
