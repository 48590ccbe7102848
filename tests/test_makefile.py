"""The Makefile's install step heals a broken venv: real ``make`` on a temporary copy of the
Makefile, with a stand-in project named ``confer`` (its own one-file build backend, no dependencies)
so that pip runs offline and fast."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STAMP = ".venv/.installed-stamp"

STAND_IN = """\
[build-system]
requires = []
build-backend = "standin"
backend-path = ["."]

[project]
name = "confer"
version = "0"

[project.optional-dependencies]
dev = []
"""

# A PEP 517/660 build backend in one file: the wheel holds only its metadata, enough for pip to
# install "confer" and for importlib.metadata to find it.
BACKEND = """\
import base64, hashlib, os, zipfile

NAME = "confer-0"
FILES = {
    f"{NAME}.dist-info/METADATA": "Metadata-Version: 2.1\\nName: confer\\nVersion: 0\\n"
    "Provides-Extra: dev\\n",
    f"{NAME}.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: standin\\n"
    "Root-Is-Purelib: true\\nTag: py3-none-any\\n",
}


def _wheel(directory):
    path = os.path.join(directory, "confer-0-py3-none-any.whl")
    record = []
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in FILES.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
            wheel.writestr(name, data)
        record.append(f"{NAME}.dist-info/RECORD,,")
        wheel.writestr(f"{NAME}.dist-info/RECORD", "\\n".join(record) + "\\n")
    return os.path.basename(path)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)
"""


def _make(workdir: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",  # offline: the stand-in has no dependencies
        "PIP_NO_BUILD_ISOLATION": "0",  # the stand-in's backend needs nothing
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["make", "--no-print-directory", f"PYTHON={sys.executable}", *targets],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _break_pip(workdir: Path) -> None:
    """What an interrupted ``pip install --upgrade pip`` leaves: the old pip uninstalled, the
    new one not yet in place."""
    [site] = (workdir / ".venv" / "lib").glob("python3*/site-packages")
    shutil.rmtree(site / "pip")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        pytest.skip("needs make")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text(STAND_IN)
    (tmp_path / "standin.py").write_text(BACKEND)
    return tmp_path


def test_a_broken_venv_is_rebuilt_instead_of_failing_every_later_make(workdir: Path) -> None:
    assert _make(workdir, "venv-check").returncode != 0  # no venv yet
    first = _make(workdir, STAMP)
    assert first.returncode == 0, first.stdout + first.stderr
    checked = _make(workdir, "venv-check")
    assert (checked.returncode, checked.stdout.strip()) == (0, "venv .venv: ok")
    assert _make(workdir, "--question", STAMP).returncode == 0  # up to date: nothing to redo

    # interrupted during pip's self-upgrade of a first install: no stamp, pip gone
    _break_pip(workdir)
    (workdir / STAMP).unlink()
    broken = _make(workdir, "venv-check")
    assert broken.returncode != 0
    assert "broken or missing (pip does not run)" in broken.stdout
    healed = _make(workdir, STAMP)
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert "is broken (an interrupted install?); building it afresh" in healed.stdout
    assert _make(workdir, "venv-check").returncode == 0

    # a stamped venv that no longer runs (say its pip was removed) is reinstalled too
    _break_pip(workdir)
    assert _make(workdir, "--question", STAMP).returncode != 0  # no longer "up to date"
    healed = _make(workdir, STAMP)
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert _make(workdir, "venv-check").returncode == 0
