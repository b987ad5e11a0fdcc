"""The examples in the module's docstrings run as written (from the
repository root, where they find examples/sample.pcap)."""

from __future__ import annotations

import doctest

import pytest

import sluice
import sluice._tables
from conftest import REPO

DOCUMENTED = [
    sluice,
    sluice.Filter,
    sluice.Filter.matches,
    sluice.Filter.verdicts,
    sluice.Filter.program,
    sluice.Classifier,
    sluice.open,
    sluice.Reader,
    sluice.Reader.read_batch,
    sluice.FilterSet,
    sluice.split,
    sluice.FlowGroup,
    sluice.Flow,
    sluice._tables.to_arrow,
]


@pytest.mark.parametrize("obj", DOCUMENTED, ids=lambda o: getattr(o, "__qualname__", getattr(o, "__name__", "?")))
def test_docstring_examples(obj, monkeypatch):
    monkeypatch.chdir(REPO)
    tests = doctest.DocTestFinder(recurse=False).find(obj, getattr(obj, "__name__", "obj"), globs={"sluice": sluice})
    examples = sum(len(t.examples) for t in tests)
    assert examples > 0, "no example in the docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0
