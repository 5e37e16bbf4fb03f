"""Load a script of bench/ as a module, for tests of its pieces (bench/ is scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py as the module NAME (registered in sys.modules: dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_main(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """bench/NAME.py's `main()` with `argv` as its command line, in this process: (exit code, stderr). For the
    argument checks: these scripts import torch and transformers at the top, which a test worker holds already
    and a subprocess pays 5-12 s to import again."""
    module = load_bench(name)
    monkeypatch.setattr(sys, "argv", [f"bench/{name}.py", *argv])
    try:
        code = module.main()
    except SystemExit as e:  # argparse's refusals
        code = e.code
    return (code if isinstance(code, int) else 0 if code is None else 1), capsys.readouterr().err
