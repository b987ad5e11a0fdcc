"""What the tests share: the repository, the shared conformance corpus
(``../shared/conformance`` beside the repository, as the Rust tests find it)
and the ``sluice`` command to compare with.

Set ``SLUICE_CORPUS_REQUIRED=1`` (``scripts/test.sh`` does) to fail rather
than skip when the corpus or the command is missing."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "conformance"
SAMPLE = REPO / "examples" / "sample.pcap"
REQUIRED = os.environ.get("SLUICE_CORPUS_REQUIRED") == "1"


def _missing(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"{what} is required (SLUICE_CORPUS_REQUIRED=1) but missing")
    pytest.skip(f"{what} not found")


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not (CORPUS / "pcaps").is_dir():
        _missing(f"the conformance corpus at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def pcaps(corpus: Path) -> List[Path]:
    return sorted((corpus / "pcaps").iterdir())


@pytest.fixture(scope="session")
def expressions(corpus: Path) -> List[str]:
    return (corpus / "expressions.txt").read_text().splitlines()


def read_oracle(path: Path) -> Dict[Tuple[str, int], str]:
    """(capture, expression line) -> one '0'/'1' per packet, or 'ERR'."""
    out: Dict[Tuple[str, int], str] = {}
    with gzip.open(path, "rt") as f:
        for row in f:
            capture, line, status, rest = row.rstrip("\n").split("\t", 3)
            out[(capture, int(line))] = rest if status == "OK" else "ERR"
    return out


@pytest.fixture(scope="session")
def oracle(corpus: Path) -> Dict[Tuple[str, int], str]:
    return read_oracle(corpus / "oracle" / "verdicts-master.tsv.gz")


@pytest.fixture(scope="session")
def oracle_unopt(corpus: Path) -> Dict[Tuple[str, int], str]:
    return read_oracle(corpus / "oracle" / "verdicts-master-unopt.tsv.gz")


@pytest.fixture(scope="session")
def sluice_bin() -> Path:
    given = os.environ.get("SLUICE_BIN")
    candidates = [Path(given)] if given else []
    candidates += [REPO / "target" / "release" / "sluice", REPO / "target" / "debug" / "sluice"]
    found = shutil.which("sluice")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    _missing("the sluice command (cargo build, or SLUICE_BIN)")
    raise AssertionError("unreachable")


def run_cli(binary: Path, *args: str) -> str:
    """The command's standard output (it must succeed)."""
    done = subprocess.run([str(binary), *args], capture_output=True, text=True)
    assert done.returncode == 0, f"sluice {' '.join(args)}: {done.stderr}"
    return done.stdout
