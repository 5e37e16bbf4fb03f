"""bench/attribution_accuracy.py's argument contract, in-process (its evaluations are minutes: the bench itself runs
them): an unknown world or engine is refused naming what is known, before anything is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchload import run_main


def test_unknown_worlds_and_engines_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main("attribution_accuracy", ["--out", str(tmp_path / "out"), "--worlds", "default,s99"],
                         monkeypatch, capsys)
    assert code == 2 and "--worlds: unknown world(s) s99; known: default," in err
    code, err = run_main("attribution_accuracy", ["--out", str(tmp_path / "out"), "--engine", "lucene"],
                         monkeypatch, capsys)
    assert code == 2 and "invalid choice: 'lucene'" in err and "infini-gram" in err
    assert not (tmp_path / "out").exists()
