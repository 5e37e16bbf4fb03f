"""The job defaults table (finetune/job/defaults.py): every value with a reason and a benchmark page that exists, jobs
read it (a changed line changes what a job gets), and `workbench train --explain` prints the row a job gets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from clirun import ENV, assert_refused, workbench
from ftworld import FtWorld

from finetune.fixset.manifest import INJECTION_SOURCES, FixSetManifest, load_manifest
from finetune.job.defaults import JOB_DEFAULTS, Default, row_for
from finetune.job.resolve import default_lr, size_defaults

ROOT = Path(__file__).resolve().parents[1]


def _anchors(page: Path) -> set[str]:
    """The heading anchors mkdocs' toc gives a page (lower case, punctuation dropped, spaces as dashes)."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
    return {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.lower()).strip()) for h in heads}


def test_every_default_has_a_reason_and_a_benchmark_page_that_exists() -> None:
    assert {m for _, m in JOB_DEFAULTS} == {"sft", "dpo", "grpo"} and len(JOB_DEFAULTS) == 5
    for (size, method), row in JOB_DEFAULTS.items():
        assert (row.size, row.method) == (size, method)
        assert len(row.values()) == 12
        for name, d in row.values().items():
            assert d.why.strip() and "\n" not in d.why and len(d.why) <= 110, (size, method, name)
            page, _, anchor = d.source.partition("#")
            assert page.startswith("docs/benchmarks/") and (ROOT / page).is_file(), d.source
            assert not anchor or anchor in _anchors(ROOT / page), d.source


def test_a_table_line_is_what_jobs_get(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing one value of one row changes that (size class, method) only: the size rule's words and the
    learning rate follow the table."""
    row = JOB_DEFAULTS[("pretrained-size", "sft")]
    assert size_defaults("sft", 576)[0].batch == 8 and default_lr("sft", 576)[0] == 6.7e-4
    monkeypatch.setitem(JOB_DEFAULTS, ("pretrained-size", "sft"),
                        replace(row, lora_r=Default(4, "changed", row.lora_r.source),
                                learning_rate=Default(1e-3, "changed", row.learning_rate.source)))
    assert row_for("sft", 576)[1].startswith("pretrained-size (width 576 > 128): LoRA r 4 alpha 16")
    assert default_lr("sft", 576) == (2.2e-4, "0.00022 (sft 0.001 x 128 / width 576)")
    assert row_for("dpo", 576)[0].lora_r.value == 8 and default_lr("dpo", 576)[0] == 6.7e-4  # the other rows hold
    assert row_for("sft", 64)[0].lora_r.value == 16
    with pytest.raises(ValueError, match="give `epochs` or `fixed_steps`"):
        replace(row, fixed_steps=Default(10, "both", row.fixed_steps.source))


def test_a_fix_set_that_injects_facts_gets_the_rows_injection_epochs() -> None:
    """Abstention rows share one phrase; each injected fact is its own answer: a pretrained SFT job on a set with
    any injection row gets the row's `injection_epochs`, one without gets `epochs`; rows without the field keep
    theirs either way."""
    plain = FixSetManifest(path="fs", run_id="r", model="m", strategy="auto", counts={},
                           sources={"sft": {"abstain": 46, "guard": 146, "replay": 2}, "dpo": {"inject": 3}},
                           train_rows={"sft": 194, "dpo": 3}, sha256="", abstention_phrase="", new_tokens=[],
                           heldout_probe_ids=[])
    row = JOB_DEFAULTS[("pretrained-size", "sft")]
    assert not plain.injects("sft") and plain.injects("dpo")  # each method reads its own split
    assert row.for_fixset(plain.injects("sft")) is row
    for source in INJECTION_SOURCES:
        injecting = replace(plain, sources={"sft": {"abstain": 46, source: 1}})
        assert injecting.injects("sft")
        inject_row = row.for_fixset(injecting.injects("sft"))
        assert inject_row.epochs is row.injection_epochs and inject_row.replay_kl is row.injection_replay_kl
        assert {k: v for k, v in inject_row.values().items() if k not in ("epochs", "replay_kl")} == \
            {k: v for k, v in row.values().items() if k not in ("epochs", "replay_kl")}  # the rest as it was
    assert row.injection_epochs.value is not None and row.epochs.value is not None
    assert row.injection_epochs.value > row.epochs.value
    # its longer job holds the base model's answers harder: the replay KL weight rises with it
    assert row.injection_replay_kl.value is not None and row.injection_replay_kl.value > row.replay_kl.value
    assert row.describe().endswith("(12 when it injects facts), at least 30 steps, replay KL 10 (20 when it injects "
                                   "facts)")
    for other in JOB_DEFAULTS.values():  # the other rows read every set alike
        if other is not row:
            assert other.injection_replay_kl.value is None and other.for_fixset(True) == other
    grpo = JOB_DEFAULTS[("world-size", "grpo")]
    with pytest.raises(ValueError, match="`injection_epochs` needs `epochs`"):
        replace(grpo, injection_epochs=Default(5.0, "steps are fixed", grpo.epochs.source))


def _job(tmp_path: Path, fixset: Path, **extra: object) -> Path:
    spec = {"fixset": str(fixset), "output_dir": str(tmp_path / "out"), "method": "sft", **extra}
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


@pytest.mark.slow  # the session's fine-tuning world (its fix set and model)
def test_train_explain_prints_the_row_without_training(w: FtWorld, tmp_path: Path) -> None:
    proc = workbench("train", "--explain", str(_job(tmp_path, w.fixset, lora={"r": 4})), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "defaults row (world-size, sft): world-size (width 64 <= 128): LoRA r 16 alpha 32" in out
    r_line = next(line for line in out.splitlines() if line.strip().startswith("lora.r "))
    assert " 4 " in r_line and "given by the job spec (the table's 16: r 8 fixed" in r_line
    assert "[docs/benchmarks/fix_efficacy.md#the-default-world-sft-and-dpo])" in r_line
    steps = next(line for line in out.splitlines() if line.strip().startswith("trainer.max_steps"))
    assert "20 epochs x" in steps and "steps come from the epochs [docs/benchmarks/" in steps
    assert not (tmp_path / "out").exists()  # nothing trained, nothing written
    # a wider model (its config.json is all --explain reads) gets the pretrained row; --json gives the same row
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 576}))
    proc = workbench("train", "--explain", "--json", str(_job(tmp_path, w.fixset, base_model=str(wide))), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert (got["size"], got["method"], got["width"]) == ("pretrained-size", "sft", 576)
    values = {v["key"]: v for v in got["values"]}
    assert values["lora.target_modules"]["value"] == "attention" and not values["lora.r"]["given"]
    assert values["trainer.learning_rate"]["value"].startswith("0.00067 (sft 0.003 x 128 / width 576)")
    # the world's fix set injects facts: on a pretrained model that is the row's injection epochs and replay KL
    assert load_manifest(w.fixset).injects("sft")
    row = JOB_DEFAULTS[("pretrained-size", "sft")]
    assert values["trainer.epochs"]["value"] == row.injection_epochs.value
    assert values["trainer.epochs"]["why"] == row.injection_epochs.why
    assert values["trainer.replay_kl"]["value"] == row.injection_replay_kl.value == 20.0
    kl = values["trainer.replay_kl"]
    assert kl["why"] == row.injection_replay_kl.why and not kl["given"]
    assert all(v["why"] and v["source"].startswith("docs/benchmarks/") for v in got["values"])
    # a job whose fix set is missing: refused naming it, exit 2
    assert_refused(workbench("train", "--explain", str(_job(tmp_path, tmp_path / "nope")), timeout=120), "nope")


@pytest.mark.slow
def test_train_explain_imports_no_torch(w: FtWorld, tmp_path: Path) -> None:
    code = ("import sys; from hallucination_workbench import main; rc = main(['train', '--explain', '--json', "
            f"{str(_job(tmp_path, w.fixset))!r}]); print('RESULT', rc, 'torch' in sys.modules, "
            "'transformers' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV,
                          stdin=subprocess.DEVNULL)
    assert proc.stdout.strip().splitlines()[-1] == "RESULT 0 False False", (proc.stdout[-2000:], proc.stderr[-2000:])
