"""A team's own questions: `eval --limit` for a first look, the line `eval --paraphrases` prints when probes have no
paraphrases to ask, and `workbench paraphrase` writing marked paraphrases (its choice of candidates, and the command
through an OpenAI-compatible server scripted here). The same commands on the real chat model run in
tests/test_own_model_guide.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from clirun import assert_refused, workbench

from workbench.probes.paraphrase import BY_FIELD, GENERATED_TAG, clean, one_message, pick
from workbench.types import Probe


def _eval(world: Any, ws: Path, *extra: str) -> Any:
    return workbench("eval", "--model", str(world.model), "--probes", str(world.suite), "--workspace", str(ws),
                     *extra, timeout=300)


def test_limit_evaluates_the_first_n_probes_and_a_gate_asks_the_same(world: Any, tmp_path: Path) -> None:
    from workbench.store import Store

    ws = tmp_path / "ws"
    proc = _eval(world, ws, "--limit", "5", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    first = [json.loads(line)["id"] for line in world.probes.read_text().splitlines()]
    assert out["n"] == 5 and out["limited"] == {"first": 5, "of": len(first)}
    assert "--limit 5: the first 5 of" in proc.stderr
    assert [r["id"] for r in Store.open(ws).probe_rows(out["run_id"])] == first[:5]
    gate = workbench("regress", "--baseline", out["run_id"], "--candidate", str(world.model), "--workspace", str(ws),
                     "--no-guard", "--json", timeout=300)
    assert gate.returncode in (0, 3), gate.stderr[-2000:]
    assert json.loads(gate.stdout)["n_probes"] == 5
    whole = _eval(world, ws, "--limit", str(len(first) + 1), "--json")  # more than the file holds: every probe
    assert json.loads(whole.stdout)["n"] == len(first) and "limited" not in json.loads(whole.stdout)
    assert_refused(_eval(world, ws, "--limit", "0"), "--limit", "must be between 1 and")
    assert_refused(workbench("eval", "--resume", out["run_id"], "--limit", "3", "--workspace", str(ws)), "--limit")


def test_paraphrases_flag_says_when_probes_have_none(world: Any, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in world.probes.read_text().splitlines()][:4]
    bare = [{k: v for k, v in r.items() if k != "paraphrases"} for r in rows[:3]] + rows[3:]
    (tmp_path / "bare.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bare))
    suite = tmp_path / "bare.yaml"
    suite.write_text(world.suite.read_text().replace("data: probes.jsonl", "data: bare.jsonl"))
    proc = workbench("eval", "--model", str(world.model), "--probes", str(suite), "--paraphrases", "--workspace",
                     str(tmp_path / "ws"), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "--paraphrases:" in line]
    assert len(lines) == 1 and "3 of 4 probes have no paraphrases" in lines[0]
    assert "workbench paraphrase PROBES --model MODEL --out FILE" in lines[0]
    quiet = workbench("eval", "--model", str(world.model), "--probes", str(world.suite), "--paraphrases",
                      "--workspace", str(tmp_path / "ws"), "--limit", "3", "--json", timeout=300)
    assert quiet.returncode == 0 and "--paraphrases:" not in quiet.stderr  # every probe has its own


def test_pick_keeps_rewordings_and_drops_answers_copies_and_drift() -> None:
    probe = Probe("p", "What is the capital of France?", ("Paris",), subject="France")
    candidates = ["The capital of France is Paris.",  # an answer, not a question
                  "What is the capital of France?",  # the question again
                  "Which city is France's capital, Paris?",  # gives the answer away
                  "Which city is the capital?",  # lost the subject
                  '"Which city is the capital of France?"',  # kept, quotes taken off
                  "In other words: Which city serves as the capital of France?",  # kept, label taken off
                  "Which city is the capital of France?",  # a copy of a kept one
                  "What is France's capital city, the one where the government of the French Republic sits and "
                  "meets every week of the year?"]  # far longer than the question
    assert pick(probe, candidates, 5) == ("Which city is the capital of France?",
                                          "Which city serves as the capital of France?")
    assert pick(probe, candidates, 1) == ("Which city is the capital of France?",)
    # an answer the question itself names is no give-away
    named = Probe("q", "Is Paris the capital of France?", ("Paris",))
    assert pick(named, ["Is the capital of France Paris?"], 2) == ("Is the capital of France Paris?",)
    assert clean("  New question: 'Who wrote it?'\nmore") == "Who wrote it?"


class _Rewriter(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that rewrites the question of the last line of the message it is sent (the
    shape `one_message` asks in), from a fixed table: what a larger chat model behind a server would answer."""

    table: dict[str, list[str]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = body["messages"][-1]["content"]
        question = message.rsplit("Question: ", 1)[1].split("\n", 1)[0]
        texts = self.table.get(question, ["I don't know."])
        choices = [{"index": i, "message": {"role": "assistant", "content": texts[i % len(texts)]},
                    "finish_reason": "stop"} for i in range(body.get("n", 1))]
        data = json.dumps({"choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def rewriter() -> Iterator[str]:
    table = {"What is the capital of Australia?": ["Which city is the capital of Australia?",
                                                   "Australia's capital is which city?"],
             "Who wrote Middlemarch?": ["It was George Eliot."]}  # only answers: no paraphrase found
    handler = type("Handler", (_Rewriter,), {"table": table})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_paraphrase_command_writes_marked_paraphrases_through_a_server(rewriter: str, tmp_path: Path) -> None:
    from workbench.probes import load_probes

    probes = tmp_path / "questions.csv"  # a team's file: answers as a ';'-string, one row with its own paraphrase
    probes.write_text("id,question,answers,subject,paraphrases\n"
                      "au,What is the capital of Australia?,Canberra,Australia,\n"
                      "me,Who wrote Middlemarch?,George Eliot;Mary Ann Evans,Middlemarch,\n"
                      "fr,What is the capital of France?,Paris,France,Which city is the capital of France?\n")
    out = tmp_path / "questions-paraphrased.jsonl"
    proc = workbench("paraphrase", str(probes), "--backend", "openai", "--model", "big-chat-model", "--backend-option",
                     f"base_url={rewriter}", "--backend-option", "endpoint=chat", "--out", str(out),
                     "--workspace", str(tmp_path / "ws"), "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert (summary["paraphrased"], summary["paraphrases"]) == (1, 2)
    assert summary["kept_own"] == ["fr"] and summary["none_found"] == ["me"]
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["au"]["paraphrases"] == ["Which city is the capital of Australia?",
                                         "Australia's capital is which city?"]
    assert rows["au"]["tags"] == [GENERATED_TAG]
    assert rows["au"][BY_FIELD] == "big-chat-model (openai, workbench paraphrase)"
    assert "paraphrases" not in rows["me"] and BY_FIELD not in rows["me"]
    assert rows["fr"]["paraphrases"] == ["Which city is the capital of France?"] and "tags" not in rows["fr"]
    assert rows["me"]["answers"] == ["George Eliot", "Mary Ann Evans"]
    loaded = {p.id: p for p in load_probes(out).probes}  # the written file is a probe file
    assert loaded["au"].paraphrases == tuple(rows["au"]["paraphrases"]) and GENERATED_TAG in loaded["au"].tags
    assert "Question: What is the capital of Australia?" in one_message("What is the capital of Australia?")
    assert_refused(workbench("paraphrase", str(probes), "--model", "m", "--backend", "openai", "--out",
                             str(tmp_path / "x.csv"), "--workspace", str(tmp_path / "ws"), timeout=120),
                   "--out", ".jsonl")
