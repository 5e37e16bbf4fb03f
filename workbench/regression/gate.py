"""The gate over stored runs: outcomes from the store, the same-settings check, and the record.

`workbench regress`, `workbench watch` and the app all go through `gate_runs`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from workbench.errors import WorkbenchError
from workbench.regression.compare import ProbeOutcome, RunOutcomes, compare
from workbench.regression.policy import Policy, default_policy
from workbench.regression.report import write_reports
from workbench.regression.results import ComparisonResult
from workbench.store import RunRecord, Store, new_id, utcnow
from workbench.store.schema import regressions, reviews
from workbench.types import ModelSpec

if TYPE_CHECKING:
    from workbench.backends import Backend

# Options that change what a run measures; two runs compared must agree on all of them.
_MUST_MATCH_OPTIONS = ("samples", "paraphrases", "temperature", "top_p", "seed", "template")
_MUST_MATCH_SUITE = ("template", "stop", "max_tokens", "abstention_phrases", "grader", "grader_options")


def outcomes(store: Store, run: RunRecord, label: str) -> RunOutcomes:
    """A run's greedy verdicts per probe, with the baseline's attribution category when stored.
    Reviewer overrides of a grade (the latest per probe) replace the grader's verdict."""
    from workbench.attribution.types import load_attributions
    from workbench.results import load_results
    from workbench.types import Verdict

    res = load_results(store, run.id)
    cats = load_attributions(store, run.id)
    overrides = verdict_overrides(store, run.id)
    return RunOutcomes(run_id=run.id, label=label, outcomes={
        r.probe.id: ProbeOutcome(probe_id=r.probe.id, tags=r.probe.tags,
                                 verdict=Verdict(overrides.get(r.probe.id, r.verdict)), answer=r.answer,
                                 category=cats[r.probe.id].category if r.probe.id in cats else None)
        for r in res.probes
    })


def verdict_overrides(store: Store, run_id: str) -> dict[str, str]:
    with store.engine.connect() as c:
        rows = c.execute(select(reviews.c.probe_id, reviews.c.new_value)
                         .where(reviews.c.run_id == run_id, reviews.c.target == "verdict")
                         .order_by(reviews.c.id)).all()
    return {pid: value for pid, value in rows if pid}  # later rows win


def check_comparable(baseline: RunRecord, candidate: RunRecord) -> None:
    """Refuse runs that measured different things: a gate over them would compare apples and pears."""
    if baseline.status != "done" or candidate.status != "done":
        raise WorkbenchError(f"runs must be finished: {baseline.id} is {baseline.status}, "
                             f"{candidate.id} is {candidate.status}")
    diffs = [f"option `{k}`: {baseline.options.get(k)!r} vs {candidate.options.get(k)!r}"
             for k in _MUST_MATCH_OPTIONS if baseline.options.get(k) != candidate.options.get(k)]
    diffs += [f"suite `{k}`: {baseline.suite_config.get(k)!r} vs {candidate.suite_config.get(k)!r}"
              for k in _MUST_MATCH_SUITE if baseline.suite_config.get(k) != candidate.suite_config.get(k)]
    if diffs:
        raise WorkbenchError(f"runs {baseline.id} and {candidate.id} were made with different settings; "
                             "rerun one with the other's settings:\n  " + "\n  ".join(diffs))


@dataclass(frozen=True)
class GateRecord:
    id: str
    result: ComparisonResult
    reports: dict[str, Path]


def gate_runs(store: Store, baseline_id: str, candidate_id: str, policy: Policy | None = None, *,
              report_dir: Path | None = None) -> GateRecord:
    """Compare two stored runs under a policy, write the reports, and record the verdict."""
    policy = policy or default_policy()
    base, cand = store.get_run(baseline_id), store.get_run(candidate_id)
    check_comparable(base, cand)
    result = compare(outcomes(store, base, _label(base)), outcomes(store, cand, _label(cand)), policy)
    gate_id = new_id("gate")
    reports = write_reports(result, report_dir or store.workspace / "reports" / gate_id)
    with store.engine.begin() as c:
        c.execute(insert(regressions).values(
            id=gate_id, created_at=utcnow(), baseline_run=base.id, candidate_run=cand.id,
            verdict=result.verdict, exit_code=result.exit_code, policy_json=json.dumps(policy.model_dump(mode="json")),
            result_json=json.dumps(result.to_dict(), default=str), report_path=str(reports.get("html", "")),
        ))
    return GateRecord(gate_id, result, reports)


def history(store: Store) -> list[dict[str, Any]]:
    """Every gate, oldest first, with the candidate's model/adapter and any release sign-off."""
    with store.engine.connect() as c:
        gates = c.execute(select(regressions).order_by(regressions.c.created_at)).mappings().all()
        signoffs = c.execute(select(reviews).where(reviews.c.target == "release").order_by(reviews.c.id)
                             ).mappings().all()
    latest_signoff = {r["run_id"]: r for r in signoffs}
    out = []
    for g in gates:
        cand = store.get_run(g["candidate_run"])
        s = latest_signoff.get(cand.id)
        out.append({"gate_id": g["id"], "created_at": g["created_at"], "baseline_run": g["baseline_run"],
                    "candidate_run": cand.id, "model": cand.model, "adapter": cand.adapter,
                    "verdict": g["verdict"], "exit_code": g["exit_code"], "report": g["report_path"],
                    "signoff": None if s is None else {"decision": s["new_value"], "reviewer": s["reviewer"],
                                                        "at": s["at"], "reason": s["reason"]}})
    return out


def _label(run: RunRecord) -> str:
    return Path(run.model).name + (f" + {Path(run.adapter).name}" if run.adapter else "")


def rerun_like(store: Store, baseline_id: str, *, model: str | None = None, adapter: str | None = None,
               backend_for: Callable[[ModelSpec], Backend | None] | None = None) -> str:
    """Evaluate a candidate (the baseline's model, or `model`, plus `adapter`) on exactly the baseline
    run's probes with its suite settings and options; returns the new run's id. `backend_for(spec)` may
    supply the backend (e.g. a Ray pool under --ray); None lets the runner build it."""
    import dataclasses

    from workbench.probes import LoadResult, Suite
    from workbench.results import probe_from_dict
    from workbench.runner import EvalOptions, run_eval

    base = store.get_run(baseline_id)
    probes = tuple(probe_from_dict(d) for d in store.probe_rows(base.id))
    suite = Suite.model_validate(base.suite_config)
    known = {f.name for f in dataclasses.fields(EvalOptions)}
    options = EvalOptions(**{k: v for k, v in base.options.items() if k in known})
    spec = ModelSpec(model=model or base.model, adapter=adapter, backend=base.backend)
    loaded = LoadResult(probes=probes, skipped=base.skipped_bad, problems=(), source=f"run {base.id}")
    return run_eval(store, spec, suite, loaded, options, backend=backend_for(spec) if backend_for else None).run_id


def gated_adapters(store: Store) -> set[str]:
    """Adapter paths that already have a gate verdict (watch skips them)."""
    from workbench.store.schema import runs

    with store.engine.connect() as c:
        rows = c.execute(select(runs.c.adapter).join(regressions, regressions.c.candidate_run == runs.c.id)).all()
    return {r[0] for r in rows if r[0]}


def complete_adapters(folder: Path, marker: str = "COMPLETE") -> list[Path]:
    """Adapter directories under `folder` that finished writing: peft files plus the completion marker
    written last by the trainer's checkpointing (a half-written checkpoint has no marker)."""
    found = [p.parent for p in folder.rglob("adapter_config.json") if (p.parent / marker).exists()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))
