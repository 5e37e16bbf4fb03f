"""The guard pool: simple, stable facts in several languages and topics (evals/data/guard/*.jsonl, written for
the project; SOURCE.md beside them), plus any probe files a user adds with `--guard-pool FILE`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.types import Probe

#: The shipped pool (package data of `evals`; located by path so that `workbench` does not import `evals`).
POOL_DIR = Path(__file__).resolve().parents[2] / "evals" / "data" / "guard"
#: `--guard-pool none`: leave the shipped pool out; alone, no pool at all (only a run's own known facts guard a fix).
NONE = "none"


def shipped_pool() -> list[Path]:
    """The shipped pool's files, sorted (empty when the package data is missing)."""
    return sorted(POOL_DIR.glob("*.jsonl"))


def everyday_pool() -> list[str]:
    """`--guard-pool` arguments for the shipped pool's everyday files alone (662 facts in five languages, without
    `general_en.jsonl`): `workbench demo --real` builds its guard from them, so that a first run on a CPU asks a
    quarter of the questions the whole pool would."""
    return [NONE, *(str(p) for p in shipped_pool() if p.name.startswith("everyday_"))]


def pool_files(given: Sequence[str | Path] | None) -> list[Path]:
    """The files a guard is built from: the shipped pool plus `given` (None or empty: the shipped pool alone;
    with `none` among them: `given`'s files without the shipped pool, so `none` alone is no pool at all)."""
    given = [str(g) for g in given or ()]
    shipped = [] if NONE in given else shipped_pool()
    extra = [Path(g) for g in given if g != NONE]
    for p in extra:
        given_file(p, "--guard-pool", "a probe file: JSONL, CSV, ...")
    return [*shipped, *extra]


def given_file(path: Path, flag: str, kind: str) -> None:
    """`path` is a regular file (a symlink to one is fine); a FIFO, a device (`/dev/zero`), a directory or a
    missing file is a WorkbenchError naming the flag and what the path is (workbench.safeopen)."""
    from workbench.safeopen import UnsafeInputError, check_regular

    try:
        check_regular(path, what=flag)
    except FileNotFoundError:
        raise WorkbenchError(f"{flag}: no such file `{path}` ({kind})") from None
    except UnsafeInputError as e:
        raise WorkbenchError(f"{e} ({kind})") from None
    except OSError as e:  # a loop of links, a name too long, a folder without access
        raise WorkbenchError(f"{flag} {path}: cannot read it ({e.strerror or e})") from None


def load_pool(files: Sequence[Path]) -> tuple[Probe, ...]:
    """Every probe of `files`, in order, tagged `guard`; a probe id or question seen twice is an error naming
    both files (two facts under one id would make a broken fact unaccountable)."""
    from workbench.grading.normalize import normalize
    from workbench.probes import resolve_probes

    out: list[Probe] = []
    ids: dict[str, Path] = {}
    questions: dict[str, Path] = {}
    for f in files:
        _, loaded = resolve_probes(f)
        for p in loaded.probes:
            if p.id in ids:
                raise WorkbenchError(f"{f}: probe id `{p.id}` is also in {ids[p.id]}; guard pool ids must be unique")
            q = normalize(p.question)
            if q in questions:
                raise WorkbenchError(f"{f}: probe `{p.id}` asks what {questions[q]} already asks "
                                     f"(`{p.question}`); leave one out")
            ids[p.id], questions[q] = f, f
            tags = p.tags if "guard" in p.tags else ("guard", *p.tags)
            out.append(Probe(id=p.id, question=p.question, answers=p.answers, incorrect_answers=p.incorrect_answers,
                             paraphrases=p.paraphrases[:1], subject=p.subject, relation=p.relation, tags=tags,
                             source=p.source, language=p.language))
    return tuple(out)


def pool_digest(files: Sequence[Path]) -> str:
    """sha256 over the pool files' names and bytes: a changed pool is a new guard set."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()
