"""`workbench reports import|score|list|show|decide|export`: users' flagged conversations (or plain traffic), scored
for risk, reviewed into a field suite."""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import Any

from workbench.cli._common import (
    add_limit_arguments,
    add_model_arguments,
    bounded,
    max_tokens,
    print_json,
    samples_count,
    seed,
    stop_string,
    subcommand,
    temperature,
    template,
)
from workbench.printable import printable

HELP = ("field reports: import users' flagged conversations (or plain traffic), score their risk, review them, export "
        "the decided ones as a field suite")
#: The decisions `workbench.reports.queue.DECISIONS` knows (spelled here: the parser must not import it).
DECISION_NAMES = ("hallucinated", "correct", "should-refuse", "not-factual")
EPILOG = ("A chat export (JSONL rows with `messages`) is read as is; any other JSONL/CSV/TSV is read by columns named "
          "by --columns. Rows need no rating or comment: a traffic export of unflagged conversations imports too, and "
          "`reports score` ranks it by risk. Redaction (--redact-pii, --redact) happens before anything is stored.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = subcommand(sub, "import", "store the reports of a file (chat JSONL, or JSONL/CSV/TSV by --columns)")
    imp.add_argument("file", help="the export: .jsonl, .json, .csv or .tsv")
    imp.add_argument("--columns", metavar="FIELD=COLUMN,...",
                     help="read rows by columns, e.g. question=prompt,answer=response,comment=feedback (fields: "
                     "question, answer, comment, rating, reason, timestamp, conversation_id, system)")
    imp.add_argument("--skip-bad", action="store_true", help="skip bad rows (counted and listed) instead of stopping")
    imp.add_argument("--redact-pii", action="store_true", help="replace e-mail addresses and phone numbers")
    imp.add_argument("--redact", action="append", default=[], metavar="REGEX",
                     help="also replace what this regular expression matches (repeatable)")
    _score_arguments(subcommand(sub, "score", "ask the model under review each report's prompt again and score the "
                                "risk that the logged answer is made up (no reference needed)"))
    lst = subcommand(sub, "list", "the queue: counts (new, decided, promoted) and the reports, oldest first")
    lst.add_argument("--status", choices=("new", "decided", "promoted"), help="only reports in this state")
    _filters(lst)
    lst.add_argument("--sort", choices=("reported", "risk"), default="reported",
                     help="reported: oldest first (default); risk: riskiest first, unscored reports last")
    lst.add_argument("--min-risk", type=bounded(0, 1, whole=False), metavar="X",
                     help="only reports scored at risk >= X, 0-1 (leaves unscored reports out)")
    show = subcommand(sub, "show", "one report: the conversation, the model's answer, the complaint, the decision")
    show.add_argument("report", help="report id (or a unique prefix)")
    dec = subcommand(sub, "decide",
                     "record a reviewer's decision on a report (and the undecided reports asking the same)")
    dec.add_argument("report", help="report id (or a unique prefix)")
    dec.add_argument("--decision", required=True, choices=DECISION_NAMES,
                     help="hallucinated | correct | should-refuse | not-factual")
    dec.add_argument("--answer", action="append", default=[], metavar="TEXT",
                     help="the reference answer; repeat for aliases")
    dec.add_argument("--abstain", action="store_true", help="the right response is to abstain (I don't know)")
    dec.add_argument("--note", default="", help="why (kept with the decision)")
    dec.add_argument("--only", action="store_true", help="this report only, not the others asking the same")
    dec.add_argument("--reviewer", default=os.environ.get("WORKBENCH_REVIEWER") or getpass.getuser())
    exp = subcommand(sub, "export", "write the decided reports as a field suite (suite.yaml + probes.jsonl)")
    exp.add_argument("--suite", required=True, metavar="DIR", help="the field suite's folder (rewritten whole)")
    exp.add_argument("--name", default="field", help="the suite's name (default: field)")
    exp.add_argument("--judge", metavar="MODEL", help="grade the suite with match-judge: a named reference by match, "
                     "other answers by this judge model (for sentence-long answers)")
    exp.add_argument("--judge-backend", default="hf", help="the judge's backend: hf | vllm | openai (default: hf)")


def _score_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--samples", type=samples_count, default=5,
                   help="samples drawn per report, 1 or more (default 5): the risk reads how they agree with the "
                        "logged answer")
    p.add_argument("--temperature", type=temperature, default=1.0, help="temperature of the samples (default 1.0)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the samples")
    p.add_argument("--template", type=template, default="chat",
                   help='how a prompt is put to the model: "chat" (default: the tokenizer\'s chat template, with '
                        'the report\'s turns) or a plain template such as "Q: {question} A:"')
    p.add_argument("--max-tokens", type=max_tokens, metavar="N", help="new tokens at most per answer (default: the "
                   "template's budget)")
    p.add_argument("--stop", action="append", type=stop_string, metavar="STR",
                   help=r"stop string, repeatable (default: a newline; \n and \t are read as a newline and a tab)")
    p.add_argument("--status", choices=("new", "decided", "promoted"), help="only reports in this state")
    p.add_argument("--source", metavar="TEXT", help="only reports whose source file contains TEXT")
    p.add_argument("--unscored", action="store_true", help="only reports not scored yet (default: every selected "
                   "report, earlier scores replaced; the generation cache makes asking again free)")
    p.add_argument("--risk-model", metavar="FILE",
                   help="a risk model `workbench risk fit` wrote (default: the shipped one)")
    p.add_argument("--top", type=bounded(0, 100_000), default=10, help="how many of the riskiest to list (default 10)")
    add_limit_arguments(p)


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", metavar="TEXT", help="only reports whose source file contains TEXT")
    p.add_argument("--since", type=_date, metavar="DATE", help="only reports from DATE on (ISO, UTC)")
    p.add_argument("--until", type=_date, metavar="DATE", help="only reports before DATE (ISO, UTC)")


def _date(value: str) -> str:
    from workbench.errors import WorkbenchError
    from workbench.reports.queue import utc_stamp

    try:
        return utc_stamp(value, "date")
    except WorkbenchError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    from workbench.store import Store

    store = Store.open(args.workspace)
    action: int = {"import": _import, "score": _score, "list": _list, "show": _show, "decide": _decide,
                   "export": _export}[args.action](store, args)
    return action


def _import(store: Any, args: argparse.Namespace) -> int:
    from workbench.errors import InputError, WorkbenchError
    from workbench.reports import Redactor, parse_columns, read_reports
    from workbench.reports.queue import add_reports
    from workbench.store import utcnow

    columns = parse_columns(args.columns)
    redactor = Redactor(pii=args.redact_pii, patterns=args.redact)
    now, path = utcnow(), Path(args.file)
    good, bad = [], []
    for item in read_reports(path, columns=columns, redactor=redactor, imported_at=now):
        if isinstance(item, InputError):
            if not args.skip_bad:
                raise WorkbenchError(f"{item} (--skip-bad skips bad rows, counting them)")
            bad.append(str(item))
        else:
            good.append(item)
    if not good:
        raise WorkbenchError(f"{path}: no report could be read" + (f" ({len(bad)} bad row(s); first: {bad[0]})"
                                                                   if bad else ""))
    added, already = add_reports(store, good, imported_at=now)
    redacted = {k: v for k, v in redactor.counts.items() if v}
    questions = len({r.question_key for r in good})
    if args.json:
        print_json({"file": str(path), "read": len(good), "added": added, "already": already,
                    "questions": questions, "skipped_bad": len(bad), "bad": bad[:20], "redacted": redacted})
        return 0
    print(printable(f"{path}: {added} report(s) added, {already} already imported, {len(good)} read asking "
                    f"{questions} distinct question(s)"))
    if bad:
        print(f"skipped {len(bad)} bad row(s):")
        for line in bad[:20]:
            print(f"  {printable(line)}")
        if len(bad) > 20:
            print(f"  ... and {len(bad) - 20} more")
    if redactor.rules:
        shown = ", ".join(f"{v} {k}" for k, v in redacted.items()) or "nothing matched"
        print(f"redacted before storing: {shown}")
    return 0


def _score(store: Any, args: argparse.Namespace) -> int:
    from workbench.cli._common import limits_from_args, progress_bar
    from workbench.cli.eval import model_spec_from_args
    from workbench.errors import WorkbenchError
    from workbench.reports.scoring import score_reports, select_reports
    from workbench.risk.score import RiskModel, default_model

    reports = select_reports(store, status=args.status, source=args.source, unscored=args.unscored)
    if not reports:
        chosen = [f"--{k} {v}" for k, v in (("status", args.status), ("source", args.source)) if v]
        chosen += ["--unscored"] if args.unscored else []
        raise WorkbenchError(f"no report to score in {store.workspace}" + (f" ({' '.join(chosen)})" if chosen else "")
                             + ": import a traffic or feedback export first with `workbench reports import FILE`")
    model = RiskModel.load(Path(args.risk_model)) if args.risk_model else default_model()
    spec = model_spec_from_args(args)
    with progress_bar("asking again", not args.json) as progress:
        done = score_reports(store, spec, reports, samples=args.samples, temperature=args.temperature,
                             seed=args.seed, template=args.template, max_tokens=args.max_tokens, stop=args.stop,
                             model=model, limits=limits_from_args(args), progress=progress)
    questions = {r.id: r.question for r in reports}
    high = sum(risk >= 0.5 for _, risk in done.risks)
    if args.json:
        print_json({"run_id": done.run_id, "scored": done.scored, "high_risk": high, "risk_model": model.fitted_on,
                    "riskiest": [{"id": rid, "risk": risk, "question": questions[rid]}
                                 for rid, risk in done.risks[: args.top]]})
        return 0
    print(printable(f"scored {done.scored} report(s) by asking {spec.model} again (run {done.run_id}, "
                    f"{args.samples} samples each): {high} at risk >= 0.5 (risk model: {model.fitted_on})"))
    for rid, risk in done.risks[: args.top]:
        print(printable(f"  {risk:.2f}  {rid}  {_cut(questions[rid], 80)}"))
    print("the queue by risk: workbench reports list --sort risk; why one is risky: workbench reports show ID")
    return 0


def _list(store: Any, args: argparse.Namespace) -> int:
    from workbench.reports import list_reports
    from workbench.reports.queue import queue_counts

    shown = list_reports(store, status=args.status, source=args.source, since=args.since, until=args.until,
                         min_risk=args.min_risk, sort=args.sort)
    counts = queue_counts(list_reports(store, source=args.source, since=args.since, until=args.until))
    if args.json:
        print_json({"counts": counts, "reports": [_brief(r) for r in shown]})
        return 0
    print("queue: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    for r in shown:
        b = _brief(r)
        group = f" (+{r.group_size - 1} same)" if r.group_size > 1 else ""
        risk = "   -" if r.risk is None else f"{r.risk:4.2f}"
        print(printable(f"{r.id}  {b['reported_at']}  {r.status:<8}  {risk}  {b['decision'] or '-':<13}  "
                        f"{Path(r.source).name}:{r.line}  {_cut(r.question, 70)}{group}"))
    return 0


def _brief(r: Any) -> dict[str, Any]:
    from workbench.store.db import shown_time

    return {"id": r.id, "status": r.status, "reported_at": shown_time(r.reported_at), "source": r.source,
            "line": r.line, "question": r.question, "group_size": r.group_size,
            "decision": r.decision.decision if r.decision else None, "risk": r.risk}


def _show(store: Any, args: argparse.Namespace) -> int:
    from workbench.reports import get_report

    r = get_report(store, args.report)
    if args.json:
        print_json(r.to_dict())
        return 0
    # Every line through `printable`: a message, answer, complaint or note may hold terminal escapes and newlines.
    lines = [f"{r.id}  {r.status}  from {r.source}, line {r.line}  reported {r.reported_at[:19]}"]
    lines += [f"  {m['role']}: {m['content']}" for m in r.messages]
    lines.append(f"  model answered: {r.answer if r.answer is not None else '(not in the export)'}")
    lines.append(f"  user's complaint: {r.comment or '(none)'}" + (f"  feedback: {r.feedback}" if r.feedback else ""))
    if r.group_size > 1:
        lines.append(f"  {r.group_size - 1} other report(s) ask the same question")
    if r.decision:
        d = r.decision
        what = "abstain" if d.abstain else "; ".join(d.answers) or "-"
        lines.append(f"  decision: {d.decision} ({what}) by {d.reviewer} at {d.at[:19]}"
                     + (f": {d.note}" if d.note else ""))
    lines += _why(r)
    for line in lines:
        print(printable(line))
    return 0


def _why(r: Any) -> list[str]:
    """A scored report's risk and what it rests on: how many samples agree, the ones that do not."""
    e = r.evidence
    if r.risk is None or e is None:
        return ["  risk: not scored (`workbench reports score --model MODEL`)"]
    what = "the logged answer" if e.scored == "logged" else "the model's own answer (the export held none)"
    lines = [f"  risk: {r.risk:.2f} that {what} is made up (asked {e.model} again, run {e.run_id}; risk model: "
             f"{e.risk_model})",
             f"  {e.agreeing} of {e.samples} samples say the same; the model's greedy answer now: {e.greedy}"]
    if e.disagreeing:
        lines.append("  samples that say something else:")
        lines += [f"    - {s}" for s in e.disagreeing]
    return lines


def _decide(store: Any, args: argparse.Namespace) -> int:
    from workbench.reports import decide

    made = decide(store, args.report, decision=args.decision, answers=args.answer, abstain=args.abstain,
                  reviewer=args.reviewer, note=args.note, whole_group=not args.only)
    if args.json:
        print_json([{"report": d.report_id, "decision": d.decision, "answers": list(d.answers),
                     "abstain": d.abstain, "reviewer": d.reviewer, "at": d.at} for d in made])
        return 0
    d = made[0]
    what = "abstain" if d.abstain else "; ".join(d.answers) or "no probe"
    others = f" and {len(made) - 1} other report(s) asking the same" if len(made) > 1 else ""
    print(printable(f"decided {d.report_id}{others}: {d.decision} ({what}) by {d.reviewer}"))
    return 0


def _export(store: Any, args: argparse.Namespace) -> int:
    from workbench.reports import export_suite

    judge = {"model": args.judge, "backend": args.judge_backend} if args.judge else None
    e = export_suite(store, Path(args.suite), name=args.name, judge=judge)
    if args.json:
        print_json({"suite": str(e.suite_path), "probes": e.probes, "reports": e.reports,
                    "not_factual": e.not_factual, "undecided": e.undecided})
        return 0
    print(printable(f"{e.suite_path}: {e.probes} probe(s) from {e.reports} report(s); {e.not_factual} not "
                    f"factual, {e.undecided} undecided left out"))
    return 0


def _cut(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
