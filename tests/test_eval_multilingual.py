"""The issue's case, as a new user meets it: `workbench eval` against a scripted OpenAI-compatible server
that answers 16 questions in Chinese, Japanese, Thai, Korean and English with whole sentences and
abstentions. Every answer must get the grade a native reader gives (before: 6 of 16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (question, accepted answer, the server's reply, the grade a native reader gives)
CASES = [
    ("意大利的首都是哪里？", "罗马", "意大利的首都是罗马。", "correct"),
    ("法国的首都是哪里？", "巴黎", "这个我不清楚。", "not_attempted"),
    ("中国的首都是哪里？", "北京", "中国的首都是上海。", "incorrect"),
    ("中华人民共和国是哪一年成立的？", "1949年", "一九四九年成立。", "correct"),
    ("フランスの首都はどこですか？", "パリ", "フランスの首都はパリです。", "correct"),
    ("イタリアの首都はどこですか？", "ローマ", "分かりません。", "not_attempted"),
    ("ドイツの首都はどこですか？", "ベルリン", "ミュンヘンです。", "incorrect"),
    ("เมืองหลวงของญี่ปุ่นคืออะไร", "โตเกียว", "ประเทศญี่ปุ่นมีเมืองหลวงคือโตเกียว", "correct"),
    ("เมืองหลวงของฝรั่งเศสคืออะไร", "ปารีส", "ไม่ทราบครับ", "not_attempted"),
    ("일본의 수도는 어디입니까?", "도쿄", "일본의 수도는 도쿄입니다.", "correct"),
    ("한국의 수도는 어디입니까?", "서울", "잘 모르겠습니다.", "not_attempted"),
    ("중국의 수도는 어디입니까?", "베이징", "상하이입니다.", "incorrect"),
    ("What is the capital of Spain?", "Madrid", "The capital of Spain is Madrid.", "correct"),
    ("What is the capital of Portugal?", "Lisbon", "I don't know.", "not_attempted"),
    ("What is the capital of Australia?", "Canberra", "Sydney.", "incorrect"),
    ("臺灣最高的山是哪座？", "玉山", "臺灣最高的山是玉山。", "correct"),
]
REPLIES = {q: reply for q, _, reply, _ in CASES}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body.get("prompt") or body["messages"][-1]["content"]
        text = next((r for q, r in REPLIES.items() if q in prompt), "?")
        data = json.dumps({"choices": [{"index": 0, "text": " " + text, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_sixteen_answers_in_five_languages_get_native_grades(server: str, tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    probes.write_text("".join(json.dumps({"id": f"q{i:02d}", "question": q, "answers": [a]}, ensure_ascii=False)
                              + "\n" for i, (q, a, _, _) in enumerate(CASES)), encoding="utf-8")
    ws = tmp_path / "ws"
    out = subprocess.run([sys.executable, "-m", "hallucination_workbench",
                          "eval", "--workspace", str(ws), "--model", "scripted",
                          "--backend", "openai", "--backend-option", f"base_url={server}", "--probes", str(probes),
                          "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "OPENAI_API_KEY": "test"})
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    from workbench.results import load_results
    from workbench.store import Store

    graded = {r.probe.id: str(r.verdict) for r in load_results(Store.open(ws), summary["run_id"]).probes}
    want = {f"q{i:02d}": grade for i, (_, _, _, grade) in enumerate(CASES)}
    assert graded == want
    assert summary["correct"] == 7 / 16 and summary["not_attempted"] == 5 / 16
