"""The gate over stored runs: outcomes from the store, the same-settings check, and the record.

`workbench regress`, `workbench watch` and the app all go through `gate_runs` (the app's Compare tab through
`compare_stored`, the same comparison unrecorded). Reviewers' decisions come from `workbench.reviews`, the
one reader of the reviews table; this module owns the `regressions` table.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from workbench.cards import refresh_for_run
from workbench.errors import WorkbenchError
from workbench.guard import guard_for_run, guard_runs, replayed_probe_ids, target_probe_ids
from workbench.guard.build import guard_store
from workbench.html.gate_report import write_reports
from workbench.probes import LoadResult, resolve_probes
from workbench.regression.compare import GuardOutcomes, ProbeOutcome, RunOutcomes, compare
from workbench.regression.comparison import ComparisonResult
from workbench.regression.policy import Policy, default_policy
from workbench.regression.recorded import BUILT_IN_SOURCE
from workbench.reports.queue import field_suite_path
from workbench.results import RunResults, load_results, probe_from_dict, suite_of_run
from workbench.reviews import effective_attributions, effective_verdicts, gate_decisions
from workbench.risk.shift import risk_shift
from workbench.runner import Limits, options_of_run, run_eval, spec_of_run
from workbench.store import RunRecord, Store, new_id, utcnow
from workbench.store.schema import regressions, runs
from workbench.types import ModelSpec, Verdict

if TYPE_CHECKING:
    from workbench.backends import Backend

# Options that change what a run measures; two runs compared must agree on all of them.
#: Where the field suite's gate runs live, inside the workspace (apart from the user's runs, as the guard's are).
FIELD_DIR = "field"
_MUST_MATCH_OPTIONS = ("samples", "paraphrases", "temperature", "top_p", "seed", "template")
_MUST_MATCH_SUITE = ("template", "system_prompt", "stop", "max_tokens", "abstention_phrases", "grader",
                     "grader_options")


def outcomes(store: Store, run: RunRecord, label: str | None = None, results: RunResults | None = None) -> RunOutcomes:
    """A run's greedy verdicts per probe with its attribution categories, both as reviewers left them
    (`workbench.reviews`: the latest override of a grade or a category wins; the app and the fix-set builder
    read them through the same functions). `results`: the run's results when the caller loaded them already."""

    res = results or load_results(store, run.id)
    verdicts = effective_verdicts(store, run.id)
    cats = effective_attributions(store, run.id)
    return RunOutcomes(run_id=run.id, label=label or run_label(run), outcomes={
        r.probe.id: ProbeOutcome(probe_id=r.probe.id, tags=r.probe.tags, verdict=verdicts[r.probe.id],
                                 answer=r.answer, category=cats[r.probe.id].category if r.probe.id in cats else None,
                                 question=r.probe.question)
        for r in res.probes
    })


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


def compare_stored(store: Store, baseline_id: str, candidate_id: str, policy: Policy | None = None,
                   guard: GuardOutcomes | None = None, field: GuardOutcomes | None = None,
                   ) -> tuple[ComparisonResult, RunOutcomes, RunOutcomes]:
    """The paired comparison of two stored, comparable runs (reviewers' decisions applied) and the outcomes
    it compared; `gate_runs` records it, the app's Compare tab shows it. `guard`: the guard set's runs
    (`guard_outcomes`), counted by the policy's `scope: guard` gates."""
    base, cand = store.get_run(baseline_id), store.get_run(candidate_id)
    check_comparable(base, cand)
    b_res, c_res = load_results(store, base.id), load_results(store, cand.id)  # once each: outcomes and risk
    b_out, c_out = outcomes(store, base, results=b_res), outcomes(store, cand, results=c_res)
    if guard is None:

        guard = GuardOutcomes(replayed=replayed_probe_ids(cand.adapter),
                              note="no guard set was evaluated with this comparison")
    result = compare(b_out, c_out, policy or default_policy(), guard, field, targets=target_probe_ids(cand.adapter))
    # Read beside the gates, not one of them: the risk shift needs no reference, so it speaks where grades cannot.
    wrong = tuple({p for p, o in out.outcomes.items() if o.verdict == Verdict.INCORRECT} for out in (b_out, c_out))
    result = dataclasses.replace(result, risk=risk_shift(b_res, c_res, (wrong[0], wrong[1])))
    return result, b_out, c_out


def guard_outcomes(store: Store, baseline_id: str, candidate_id: str, *, pool: Sequence[str] | None = None,
                   limits: Limits | None = None, enabled: bool = True,
                   progress: Callable[[int, int], None] | None = None) -> GuardOutcomes:
    """The guard set of the baseline run's model under its prompt settings (built at first use, workbench/guard)
    and both models' answers to its facts: what `workbench regress` compares beside the probes. `enabled` False
    (`--no-guard`): nothing evaluated, the fix set's lineage still read and the gate told why. `progress`
    (done, total) follows the guard build and the answers generated: minutes on a CPU the first time."""
    base, cand = store.get_run(baseline_id), store.get_run(candidate_id)
    check_comparable(base, cand)  # refused before a guard is built for a pair the gate would refuse anyway
    replayed = replayed_probe_ids(cand.adapter)
    if not enabled:
        return GuardOutcomes(replayed=replayed, note="left out with --no-guard")
    guard = guard_for_run(store, base, pool=pool, limits=limits, progress=progress).guard
    if not guard.facts:
        return GuardOutcomes(replayed=replayed, note=f"the baseline model knows none of the guard pool's "
                             f"{guard.pool_size} facts under these prompt settings (add your own: --guard-pool FILE)")
    gb, gc = guard_runs(store, guard, base, cand, limits=limits, progress=progress)
    gstore = guard_store(store)
    return GuardOutcomes(outcomes(gstore, gstore.get_run(gb)), outcomes(gstore, gstore.get_run(gc)), replayed)


def field_outcomes(store: Store, baseline_id: str, candidate_id: str, *, suite: str | Path | None = None,
                   limits: Limits | None = None, enabled: bool = True) -> GuardOutcomes:
    """Both models' answers to the field suite (`suite`, default the workspace's latest `workbench reports export`),
    asked as the baseline run asks its probes (its template, system prompt, token budget and stops; greedy only) and
    graded by the field suite's grader. The runs live in `WORKSPACE/field/`, out of the user's
    run list; the cache makes a repeated gate free. No suite, or `enabled` False: a note the gate reports."""
    if not enabled:
        return GuardOutcomes(note="left out with --no-field")
    path = Path(suite) if suite is not None else field_suite_path(store)
    if path is None:
        return GuardOutcomes(note="no field suite in this workspace (`workbench reports export --suite DIR` makes one)")
    if path.is_dir():
        path = path / "suite.yaml"
    base, cand = store.get_run(baseline_id), store.get_run(candidate_id)
    check_comparable(base, cand)
    field_suite, loaded = resolve_probes(str(path))
    # Asked as the baseline asks its probes, graded as the field suite says (match-judge for long answers).
    asked = suite_of_run(base).model_copy(update={"name": field_suite.name, "grader": field_suite.grader,
                                                  "grader_options": field_suite.grader_options})
    options = dataclasses.replace(options_of_run(base), samples=0, paraphrases=False, reuse_cache_from=None)
    fstore = Store.open(Path(store.workspace) / FIELD_DIR)
    runs = [run_eval(fstore, spec_of_run(r), asked, loaded, options, limits=limits or Limits()).run_id
            for r in (base, cand)]
    return GuardOutcomes(outcomes(fstore, fstore.get_run(runs[0])), outcomes(fstore, fstore.get_run(runs[1])))


def gate_runs(store: Store, baseline_id: str, candidate_id: str, policy: Policy | None = None, *,
              report_dir: Path | None = None, guard: GuardOutcomes | None = None,
              field: GuardOutcomes | None = None, policy_source: str | None = None) -> GateRecord:
    """Compare two stored runs under a policy (with the guard set's and the field suite's runs when given), write
    the reports, and record the verdict; `policy_source` names the policy file (`--policy`) in the record, so every
    view of the gate says which policy decided it."""
    source = policy_source or ("" if policy else BUILT_IN_SOURCE)  # kept: the built-in policy may change later
    policy = policy or default_policy()
    result, base, cand = compare_stored(store, baseline_id, candidate_id, policy, guard, field)
    gate_id = new_id("gate")
    reports = write_reports(result, report_dir or store.workspace / "reports" / gate_id)
    with store.write() as c:
        c.execute(insert(regressions).values(
            id=gate_id, created_at=utcnow(), baseline_run=base.run_id, candidate_run=cand.run_id,
            verdict=result.verdict, exit_code=result.exit_code, policy_json=json.dumps(policy.model_dump(mode="json")),
            result_json=json.dumps({**result.to_dict(), "policy_source": source}, default=str),
            report_path=str(reports.get("html", "")),
        ))

    refresh_for_run(store, cand.run_id)  # a job's adapter card says its latest gate
    return GateRecord(gate_id, result, reports)


def gate_as_regress(store: Store, baseline_id: str, candidate_id: str, policy: Policy | None = None) -> GateRecord:
    """`workbench regress BASE CAND` with its defaults, for a caller without its flags (the app's "Record gate"): the
    guard set and the workspace's field suite evaluated beside the probes, then the gate recorded."""
    guard = guard_outcomes(store, baseline_id, candidate_id)
    field = field_outcomes(store, baseline_id, candidate_id)
    return gate_runs(store, baseline_id, candidate_id, policy, guard=guard, field=field)


def history(store: Store) -> list[dict[str, Any]]:
    """Every gate, oldest first, with the candidate's model/adapter and the latest release decision recorded on
    that gate (a decision is about one gate: `reviews.gate_decisions`)."""

    with store.engine.connect() as c:
        gates = c.execute(select(regressions).order_by(regressions.c.created_at)).mappings().all()
    decisions = gate_decisions(store)
    out = []
    for g in gates:
        cand = store.get_run(g["candidate_run"])
        s = decisions.get(g["id"])
        out.append({"gate_id": g["id"], "created_at": g["created_at"], "baseline_run": g["baseline_run"],
                    "candidate_run": cand.id, "model": cand.model, "adapter": cand.adapter,
                    "verdict": g["verdict"], "exit_code": g["exit_code"], "report": g["report_path"],
                    "signoff": None if s is None else {"decision": s.new_value, "reviewer": s.reviewer,
                                                        "at": s.at, "reason": s.reason}})
    return out


def latest_gate(store: Store, baseline_id: str, candidate_id: str) -> tuple[str, dict[str, Any]] | None:
    """The latest recorded gate of a pair: its id and its result (`ComparisonResult.to_dict()`), or None."""
    with store.engine.connect() as c:
        row = c.execute(select(regressions.c.id, regressions.c.result_json)
                        .where(regressions.c.baseline_run == baseline_id, regressions.c.candidate_run == candidate_id)
                        .order_by(regressions.c.created_at.desc()).limit(1)).first()
    return None if row is None else (str(row.id), json.loads(row.result_json))


def run_label(run: RunRecord) -> str:
    """The candidate by what made it (`naming.candidate_name`), the way reports name a run."""
    from workbench.naming import candidate_name

    return candidate_name(run.model, run.adapter)


def rerun_like(store: Store, baseline_id: str, *, model: str | None = None, adapter: str | None = None,
               backend: str | None = None, backend_options: tuple[tuple[str, object], ...] = (),
               limits: Limits | None = None, backend_for: Callable[[ModelSpec], Backend | None] | None = None) -> str:
    """Evaluate a candidate (the baseline's model, or `model`, plus `adapter`; on the baseline's backend with
    its options, or on `backend` with `backend_options`) on exactly the baseline run's probes with its suite
    settings and options; returns the new run's id. `backend_for(spec)` may supply the backend (e.g. a Ray
    pool under --ray); None lets the runner build it."""

    base = store.get_run(baseline_id)
    probes = tuple(probe_from_dict(d) for d in store.probe_rows(base.id))
    suite = suite_of_run(base)  # the baseline's max_tokens, and where it came from (its rule, not "suite")
    spec = dataclasses.replace(spec_of_run(base), model=model or base.model, adapter=adapter)
    if backend is not None:
        spec = dataclasses.replace(spec, backend=backend, options=backend_options)
    loaded = LoadResult(probes=probes, skipped=base.skipped_bad, problems=(), source=f"run {base.id}")
    options = dataclasses.replace(options_of_run(base), reuse_cache_from=None)  # reuse is asked for per run
    return run_eval(store, spec, suite, loaded, options, limits=limits or Limits(),
                    backend=backend_for(spec) if backend_for else None).run_id


def gated_adapters(store: Store) -> set[str]:
    """Adapter paths that already have a gate verdict (watch skips them)."""

    with store.engine.connect() as c:
        rows = c.execute(select(runs.c.adapter).join(regressions, regressions.c.candidate_run == runs.c.id)).all()
    return {r[0] for r in rows if r[0]}


def complete_adapters(folder: Path, marker: str = "COMPLETE") -> list[Path]:
    """Adapter directories under `folder` that finished writing: peft files plus the completion marker
    written last by the trainer's checkpointing (a half-written checkpoint has no marker)."""
    found = [p.parent for p in folder.rglob("adapter_config.json") if (p.parent / marker).exists()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))
