"""`workbench reports import|list|show|decide|export`: users' flagged conversations, reviewed into a field suite."""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import Any

from workbench.cli._common import print_json
from workbench.printable import printable

HELP = "field reports: import users' flagged conversations, review them, export the decided ones as a field suite"
#: The decisions `workbench.reports.queue.DECISIONS` knows (spelled here: the parser must not import it).
DECISION_NAMES = ("hallucinated", "correct", "should-refuse", "not-factual")
EPILOG = ("A chat export (JSONL rows with `messages`) is read as is; any other JSONL/CSV/TSV is read by columns named "
          "by --columns. Redaction (--redact-pii, --redact) happens before anything is stored.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = _sub(sub, "import", "store the reports of a file (chat JSONL, or JSONL/CSV/TSV by --columns)")
    imp.add_argument("file", help="the export: .jsonl, .json, .csv or .tsv")
    imp.add_argument("--columns", metavar="FIELD=COLUMN,...",
                     help="read rows by columns, e.g. question=prompt,answer=response,comment=feedback (fields: "
                     "question, answer, comment, rating, reason, timestamp, conversation_id, system)")
    imp.add_argument("--skip-bad", action="store_true", help="skip bad rows (counted and listed) instead of stopping")
    imp.add_argument("--redact-pii", action="store_true", help="replace e-mail addresses and phone numbers")
    imp.add_argument("--redact", action="append", default=[], metavar="REGEX",
                     help="also replace what this regular expression matches (repeatable)")
    lst = _sub(sub, "list", "the queue: counts (new, decided, promoted) and the reports, oldest first")
    lst.add_argument("--status", choices=("new", "decided", "promoted"), help="only reports in this state")
    _filters(lst)
    show = _sub(sub, "show", "one report: the conversation, the model's answer, the complaint, the decision")
    show.add_argument("report", help="report id (or a unique prefix)")
    dec = _sub(sub, "decide", "record a reviewer's decision on a report (and the undecided reports asking the same)")
    dec.add_argument("report", help="report id (or a unique prefix)")
    dec.add_argument("--decision", required=True, choices=DECISION_NAMES,
                     help="hallucinated | correct | should-refuse | not-factual")
    dec.add_argument("--answer", action="append", default=[], metavar="TEXT",
                     help="the reference answer; repeat for aliases")
    dec.add_argument("--abstain", action="store_true", help="the right response is to abstain (I don't know)")
    dec.add_argument("--note", default="", help="why (kept with the decision)")
    dec.add_argument("--only", action="store_true", help="this report only, not the others asking the same")
    dec.add_argument("--reviewer", default=os.environ.get("WORKBENCH_REVIEWER") or getpass.getuser())
    exp = _sub(sub, "export", "write the decided reports as a field suite (suite.yaml + probes.jsonl)")
    exp.add_argument("--suite", required=True, metavar="DIR", help="the field suite's folder (rewritten whole)")
    exp.add_argument("--name", default="field", help="the suite's name (default: field)")
    exp.add_argument("--judge", metavar="MODEL", help="grade the suite with match-judge: a named reference by match, "
                     "other answers by this judge model (for sentence-long answers)")
    exp.add_argument("--judge-backend", default="hf", help="the judge's backend: hf | vllm | openai (default: hf)")


def _sub(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
    # Also after the action (`reports list --workspace W`); SUPPRESS keeps a value given before it.
    p.add_argument("--workspace", default=argparse.SUPPRESS, help="workspace directory (as before the action)")
    p.add_argument("--json", action="store_true")
    return p


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
    action: int = {"import": _import, "list": _list, "show": _show, "decide": _decide, "export": _export
                   }[args.action](store, args)
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


def _list(store: Any, args: argparse.Namespace) -> int:
    from workbench.reports import list_reports
    from workbench.reports.queue import queue_counts

    shown = list_reports(store, status=args.status, source=args.source, since=args.since, until=args.until)
    counts = queue_counts(list_reports(store, source=args.source, since=args.since, until=args.until))
    if args.json:
        print_json({"counts": counts, "reports": [_brief(r) for r in shown]})
        return 0
    print("queue: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    for r in shown:
        b = _brief(r)
        group = f" (+{r.group_size - 1} same)" if r.group_size > 1 else ""
        print(printable(f"{r.id}  {b['reported_at']}  {r.status:<8}  {b['decision'] or '-':<13}  "
                        f"{Path(r.source).name}:{r.line}  {_cut(r.question, 70)}{group}"))
    return 0


def _brief(r: Any) -> dict[str, Any]:
    from workbench.store.db import shown_time

    return {"id": r.id, "status": r.status, "reported_at": shown_time(r.reported_at), "source": r.source,
            "line": r.line, "question": r.question, "group_size": r.group_size,
            "decision": r.decision.decision if r.decision else None}


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
    for line in lines:
        print(printable(line))
    return 0


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
