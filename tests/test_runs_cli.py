"""`workbench runs` in an 80-column terminal, as a user runs it (a subprocess with a time limit): every run id is
printed whole, on one line, whatever the other columns must give up."""

from __future__ import annotations

from pathlib import Path

from clirun import ENV, workbench

from workbench.store import Store


def test_run_ids_print_whole_at_80_columns(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    store = Store.open(ws)
    long_path = str(tmp_path / "a-long-folder-of-models" / "a-model-with-a-long-name")
    ids = []
    for adapter in (None, str(tmp_path / "fix" / "sft" / "adapter")):
        run_id = store.create_run(model=long_path, adapter=adapter, backend="hf", fingerprint="f",
                                  suite="a-suite-with-a-long-name", suite_config={}, options={}, n_probes=1200,
                                  skipped_bad=0)
        store.finish_run(run_id, status="finished", metrics={"overall": {"correct": 0.8125, "incorrect": 0.125}},
                         generated=1, cached=0)
        ids.append(run_id)
    proc = workbench("runs", "--workspace", str(ws), env={**ENV, "COLUMNS": "80"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), proc.stdout
    for run_id in ids:
        assert any(line.lstrip().startswith(run_id) for line in lines), proc.stdout
    assert "81.2" in proc.stdout and "…" not in proc.stdout  # nothing cut with an ellipsis either
