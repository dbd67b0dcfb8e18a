"""Try an exported reader in place of the shipped one: its blend refitted, the newcomer tests run on it.

A final reader is judged on what its held-out folds cannot show: the single texts of the newcomer tests
(``tests/backends/test_local_everyday.py``, ``tests/backends/test_local_shapes.py``), where draws of one
recipe disagree (training/README.md). This puts the export (and, for an MPNet reader, MPNet's tokenizer)
into ``assets/``, fits the blend on the recipe's folds (``stack.py``, which writes ``blend.json``), runs
those tests, and puts the shipped files back, unless ``--keep`` leaves the trial in place to be shipped
(its sha256 then still goes into ``_assets.SHA256`` and ``NOTICE.md``, training/README.md).

    python training/try_reader.py training/.cache/reader-mpnet-6-soup.npz \\
        --heldout training/heldout/mpnet-6 --negated-reads one
    python training/stack.py --heldout training/heldout/mpnet-6 --negated-reads one --blend-out /tmp/blend.json
    python training/try_reader.py training/.cache/reader-mpnet-6-soup.npz --blend /tmp/blend.json  # tests alone

``--all`` runs the whole suite instead (the recorded hashes and the wheel's ceiling left out): a reader that
answers every newcomer example can still fail a test elsewhere that asks the local model a single text.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from bases import base_path

from decirank.backends.local._assets import ASSETS_DIR as ASSETS
from decirank.backends.local._reader import is_mpnet

REPO = Path(__file__).resolve().parents[1]
#: What a trial replaces, relative to the checkout: the shipped files are put back from git.
TRIED = ("reader.npz", "reader_tokenizer.json", "blend.json")
NEWCOMER_TESTS = ("tests/backends/test_local_everyday.py", "tests/backends/test_local_shapes.py")
#: A trial's files are not the recorded ones until it is shipped (nor, for an MPNet reader, is the wheel's
#: ceiling raised).
HASH_TESTS = (
    "tests/backends/test_local_everyday.py::test_the_reader_and_its_blend_ship_with_their_recorded_hashes",
    "tests/test_install.py::test_the_shipped_model_files_are_the_recorded_ones",
    "tests/test_install.py::test_the_wheel_carries_the_model_files",
)


def put_back() -> None:
    """The shipped files as committed; a file the commit does not hold (MPNet's tokenizer) is removed."""
    for name in TRIED:
        path = ASSETS / name
        tracked = subprocess.run(
            ["git", "ls-files", "--error-unmatch", str(path)], check=False, cwd=REPO, capture_output=True
        )
        if tracked.returncode == 0:
            subprocess.run(["git", "checkout", "--", str(path)], cwd=REPO, check=True)
        else:
            path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path, help="a reader as cross_encoder.py --reader-out or soup.py wrote it")
    parser.add_argument("--heldout", type=Path, help="the recipe's held-out folds, for the blend")
    parser.add_argument("--negated-reads", choices=("both", "one"))
    parser.add_argument(
        "--blend",
        type=Path,
        help="the blend.json stack.py fitted on these folds under this rule before (it depends on them alone, "
        "not on the final reader): copied in place instead of fitted again",
    )
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"), help="runs the tests")
    parser.add_argument("--keep", action="store_true", help="leave the trial in place instead of the shipped files")
    parser.add_argument(
        "--all",
        action="store_true",
        help="run the whole suite, not the newcomer tests alone (about 9 minutes): other tests ask the local "
        'model single texts too (a filter of "bread" asked whether it is about fleas)',
    )
    args = parser.parse_args()
    if not args.blend and not (args.heldout and args.negated_reads):
        parser.error("give --heldout and --negated-reads (the blend is fitted), or --blend")
    if not args.export.is_file():
        parser.error(f"export: no file at {args.export}")
    try:
        shutil.copyfile(args.export, ASSETS / "reader.npz")
        with np.load(args.export) as archive:
            mpnet = is_mpnet(archive)  # an NpzFile is a mapping: the key is looked up, nothing read
        if mpnet:
            shutil.copyfile(Path(base_path("mpnet")) / "tokenizer.json", ASSETS / "reader_tokenizer.json")
        if args.blend:
            shutil.copyfile(args.blend, ASSETS / "blend.json")
        else:
            stack = [sys.executable, str(REPO / "training" / "stack.py"), "--heldout", str(args.heldout)]
            subprocess.run([*stack, "--negated-reads", args.negated_reads], cwd=REPO, check=True)
        pytest = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        pytest += [argument for test in HASH_TESTS for argument in ("--deselect", test)]
        tests = subprocess.run([*pytest, *(() if args.all else NEWCOMER_TESTS)], check=False, cwd=REPO)
    finally:
        if not args.keep:
            put_back()
    sys.exit(tests.returncode)


if __name__ == "__main__":
    main()
