"""Backends registered by installed packages (entry points in the group `workbench.backends`).

Each test builds a real installed distribution in tmp_path, as pip leaves one in site-packages: the package
and its `NAME-VERSION.dist-info` folder with METADATA and entry_points.txt. Nothing is installed into the venv.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench

from workbench.backends import BACKENDS, BackendPluginError, backend_class, backend_names, load_backend
from workbench.errors import WorkbenchError
from workbench.store import Store
from workbench.types import ModelSpec

ECHO_MODULE = '''
"""A backend that answers every prompt with its `answer` option: the run shows it was used."""
from workbench.backends import Backend
from workbench.types import Completion


class EchoBackend(Backend):
    name = "echo"
    local_model = False  # the model is a name: nothing to load

    def engine(self) -> str:
        return "echo-plugin 0.1"

    def generate(self, requests):
        answer = str(self.spec.option("answer", "Paris"))
        return [[Completion(text=answer, finish_reason="stop")] * r.sampling.n for r in requests]
'''


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    """Lay out an installed distribution `dist` under `site`: its modules and a dist-info folder declaring
    `entry_points` (name -> "module:Class") in the `workbench.backends` group."""
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[workbench.backends]\n{lines}")
    return site


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site folder on sys.path for this test (importlib.metadata reads sys.path when asked); the modules imported
    from it are forgotten afterwards, so the next test's module of the same name is imported afresh."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    yield path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(path)):
            del sys.modules[name]


def test_an_installed_plugin_is_found_and_loaded(site: Path) -> None:
    install(site, "echo-backend", {"echo": "wb_echo:EchoBackend"}, {"wb_echo": ECHO_MODULE})
    assert "echo" in backend_names() and "hf" in backend_names()
    cls = backend_class("echo")
    assert cls.__name__ == "EchoBackend" and cls.local_model is False


def test_unknown_name_lists_plugins_and_suggests(site: Path) -> None:
    install(site, "echo-backend", {"echo": "wb_echo:EchoBackend"}, {"wb_echo": ECHO_MODULE})
    with pytest.raises(WorkbenchError, match=r"unknown backend `ecoh`\. Did you mean `echo`\? Known: echo, hf, "):
        backend_class("ecoh")


@pytest.mark.parametrize(("target", "module", "needle"), [
    ("wb_broken:Backend", "import not_a_module_anywhere\n", "ModuleNotFoundError: No module named"),
    ("wb_broken:Missing", "X = 1\n", "AttributeError"),
    ("wb_broken:X", "X = 1\n", "names 1, not a subclass of workbench.backends.Backend"),
    ("wb_broken", "X = 1\n", "the value must read `module:Class`"),
], ids=["import-error", "no-such-class", "not-a-backend", "no-class"])
def test_a_broken_plugin_is_named(site: Path, target: str, module: str, needle: str) -> None:
    install(site, "broken-backend", {"broken": target}, {"wb_broken": module})
    with pytest.raises(BackendPluginError) as e:
        backend_class("broken")
    msg = str(e.value)
    assert f"plugin `broken-backend` (entry point `broken = {target}` in group `workbench.backends`)" in msg
    assert needle in msg


def test_a_plugin_that_fails_to_build_is_named(site: Path) -> None:
    source = ECHO_MODULE + "\n    def __init__(self, spec):\n        raise ValueError('no server configured')\n"
    install(site, "echo-backend", {"echo": "wb_echo:EchoBackend"}, {"wb_echo": source})
    with pytest.raises(BackendPluginError, match=r"plugin `echo-backend` \(entry point `echo = wb_echo:EchoBackend` "
                                                 r".*failed to build a backend: ValueError: no server configured"):
        load_backend(ModelSpec(model="m", backend="echo"))


def test_a_plugin_may_not_take_a_built_in_or_a_taken_name(site: Path) -> None:
    install(site, "fake-hf", {"hf": "wb_echo:EchoBackend"}, {"wb_echo": ECHO_MODULE})
    with pytest.raises(BackendPluginError, match=r"backend `hf` is built in; plugin `fake-hf` .* may not replace it"):
        backend_class("hf")
    install(site, "echo-a", {"echo": "wb_echo:EchoBackend"}, {})
    install(site, "echo-b", {"echo": "wb_echo:EchoBackend"}, {})
    with pytest.raises(BackendPluginError, match=r"registered twice: plugin `echo-[ab]` .* and plugin `echo-[ab]`"):
        backend_class("echo")
    assert backend_class("vllm").__name__ == "VLLMBackend"  # other names are unaffected


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "evaluate.md"


def guide_plugin() -> tuple[str, dict[str, str], dict[str, str]]:
    """The evaluate guide's example package ("Adding a backend"): its name, entry points and modules."""
    section = GUIDE.read_text(encoding="utf-8").split("### Adding a backend", 1)[1].split("\n### ", 1)[0]
    toml = tomllib.loads(re.findall(r"^```toml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)[0])
    (source,) = re.findall(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    entry_points: dict[str, str] = toml["project"]["entry-points"]["workbench.backends"]
    module = source.split("\n", 1)[0].removeprefix("# ").removesuffix(".py")
    return toml["project"]["name"], entry_points, {module: source}


def _probes(path: Path) -> Path:
    rows = [{"id": "p1", "question": "What is the capital of France?", "answers": ["Paris"]},
            {"id": "p2", "question": "What is the capital of Italy?", "answers": ["Rome"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _env(site: Path) -> dict[str, str]:
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(site), ENV.get("PYTHONPATH", "")])}


def test_eval_runs_on_an_installed_plugin(tmp_path: Path) -> None:
    """`workbench eval --backend echo` in a subprocess whose PYTHONPATH holds the evaluate guide's example package,
    installed."""
    site = tmp_path / "site"
    site.mkdir()
    dist, entry_points, modules = guide_plugin()
    assert entry_points == {"echo": "my_backend:EchoBackend"}
    install(site, dist, entry_points, modules)
    ws = tmp_path / "ws"
    proc = workbench("eval", "--workspace", str(ws), "--model", "echo-model", "--backend", "echo",
                     "--backend-option", "answer=Paris", "--probes", str(_probes(tmp_path / "p.jsonl")), "--json",
                     env=_env(site), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["engine"] == "echo 0.1.0" and out["generated"] == 2
    assert out["correct"] == pytest.approx(0.5) and out["incorrect"] == pytest.approx(0.5)
    run = Store.open(ws).get_run(out["run_id"])
    assert (run.backend, run.model) == ("echo", "echo-model")


def test_eval_refuses_a_broken_plugin_without_a_traceback(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install(site, "broken-backend", {"broken": "wb_broken:Backend"}, {"wb_broken": "raise RuntimeError('boom')\n"})
    proc = workbench("eval", "--workspace", str(tmp_path / "ws"), "--model", "m", "--backend", "broken",
                     "--probes", str(_probes(tmp_path / "p.jsonl")), env=_env(site), timeout=120)
    assert_refused(proc, "plugin `broken-backend` (entry point `broken = wb_broken:Backend`", "RuntimeError: boom")
    typo = workbench("eval", "--workspace", str(tmp_path / "ws"), "--model", "m", "--backend", "vlm",
                     "--probes", str(_probes(tmp_path / "p.jsonl")), env=_env(site), timeout=120)
    assert_refused(typo, "unknown backend `vlm`. Did you mean `vllm`? Known: broken, hf, openai, vllm")


def test_built_ins_stay_in_one_table() -> None:
    assert set(BACKENDS) == {"hf", "vllm", "openai"}
    assert all(backend_class(n).name == n for n in BACKENDS)
