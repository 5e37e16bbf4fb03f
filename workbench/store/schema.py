"""The store's tables, all in one place so every layer shares one schema.

Bump SCHEMA_VERSION when the tables change. A column added to an existing table is listed in
`ADDED_COLUMNS` under the version that added it: `Store.open` adds it to older stores in place
(ALTER TABLE ... ADD COLUMN, nullable), so a workspace survives an upgrade. A store newer than this
code is refused with a clear message.
Per-answer rows can be large: `workbench export` writes them to Parquet beside the store.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text

SCHEMA_VERSION = 5
metadata = MetaData()

meta = Table("meta", metadata, Column("key", String, primary_key=True), Column("value", Text, nullable=False))

runs = Table(
    "runs", metadata,
    Column("id", String, primary_key=True),
    Column("created_at", String, nullable=False),
    Column("finished_at", String),
    Column("status", String, nullable=False),  # running | done | failed | interrupted
    Column("model", String, nullable=False),
    Column("adapter", String),
    Column("backend", String, nullable=False),
    Column("fingerprint", String, nullable=False),
    Column("suite", String, nullable=False),
    Column("suite_json", Text, nullable=False),  # the resolved suite, so a run is reproducible alone
    Column("options_json", Text, nullable=False),  # samples, paraphrases, seed, temperature, ...
    Column("n_probes", Integer, nullable=False),
    Column("skipped_bad", Integer, nullable=False, default=0),
    Column("generated", Integer, nullable=False, default=0),
    Column("cached", Integer, nullable=False, default=0),
    Column("metrics_json", Text),
    # Liveness of a `running` run (v2): the writing process and its last sign of life, so a run whose
    # process is gone reads as interrupted instead of running forever.
    Column("pid", Integer),
    Column("host", String),
    Column("heartbeat_at", String),
)

probes = Table(
    "probes", metadata,
    Column("run_id", String, primary_key=True),
    Column("probe_id", String, primary_key=True),
    Column("position", Integer, nullable=False),
    Column("data_json", Text, nullable=False),
)

answers = Table(
    "answers", metadata,
    Column("run_id", String, primary_key=True),
    Column("probe_id", String, primary_key=True),
    Column("variant", Integer, primary_key=True),  # 0 = the question, 1.. = paraphrases
    Column("kind", String, primary_key=True),  # greedy | sample
    Column("sample_index", Integer, primary_key=True),
    Column("prompt", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("verdict", String, nullable=False),
    Column("mean_logprob", Float),
    Column("finish_reason", String, nullable=False),
    Column("engine", String),  # v2: what produced the text, e.g. "vllm 0.32.0 float32" (None: before v2)
    Column("graded_by", String),  # v4: which grader decided, when a grader combines two (match-judge: match | judge)
)

# Content-addressed: key = sha256(model fingerprint, adapter, prompt, sampling settings, seed, sample index).
gen_cache = Table(
    "gen_cache", metadata,
    Column("key", String, primary_key=True),
    Column("fingerprint", String, nullable=False),
    Column("text", Text, nullable=False),
    Column("finish_reason", String, nullable=False),
    Column("logprobs_json", Text),
    Column("created_at", String, nullable=False),
    Column("engine", String),  # v2: the engine that generated it (provenance; also part of the key)
)

attributions = Table(
    "attributions", metadata,
    Column("run_id", String, primary_key=True),
    Column("probe_id", String, primary_key=True),
    Column("category", String, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("knowledge", String),
    Column("fix", String),
    Column("evidence_json", Text, nullable=False),
    Column("created_at", String, nullable=False),
)

jobs = Table(
    "jobs", metadata,
    Column("id", String, primary_key=True),
    Column("created_at", String, nullable=False),
    Column("finished_at", String),
    Column("status", String, nullable=False),  # pending | running | done | failed | stopped
    Column("method", String, nullable=False),
    Column("spec_json", Text, nullable=False),
    Column("run_id", String),  # the eval run the fix set came from (lineage)
    Column("fixset_path", String),
    Column("fixset_hash", String),
    Column("adapter_path", String),
    Column("metrics_json", Text),
)

job_metrics = Table(
    "job_metrics", metadata,
    Column("job_id", String, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("name", String, primary_key=True),
    Column("value", Float, nullable=False),
)

job_events = Table(
    "job_events", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String, nullable=False),
    Column("at", String, nullable=False),
    Column("kind", String, nullable=False),  # nan | spike | early_stop | checkpoint | resume | ...
    Column("message", Text, nullable=False),
    Column("data_json", Text),
)

regressions = Table(
    "regressions", metadata,
    Column("id", String, primary_key=True),
    Column("created_at", String, nullable=False),
    Column("baseline_run", String, nullable=False),
    Column("candidate_run", String, nullable=False),
    Column("verdict", String, nullable=False),  # pass | warn | fail
    Column("exit_code", Integer, nullable=False),
    Column("policy_json", Text, nullable=False),
    Column("result_json", Text, nullable=False),
    Column("report_path", String),
)

# Reviews never overwrite: each override or sign-off is a new row; the latest row per target wins.
reviews = Table(
    "reviews", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", String, nullable=False),
    Column("reviewer", String, nullable=False),
    Column("target", String, nullable=False),  # verdict | attribution | release
    Column("run_id", String, nullable=False),
    Column("probe_id", String),
    Column("old_value", String),
    Column("new_value", String, nullable=False),
    Column("reason", Text, nullable=False),
    Column("gate_id", String),  # v2: a release decision is about one recorded gate (regressions.id)
    # v3: why a sign-off stands although its gate did not clear (fail, inconclusive) or there is none; None
    # for every other row. Kept apart from `reason` so that an override is found and shown as one.
    Column("override_reason", Text),
)

# v4: field reports (workbench/reports): users' flagged conversations, stored as imported (redacted first).
field_reports = Table(
    "field_reports", metadata,
    Column("id", String, primary_key=True),  # rep-<hash of source name, line, content>: a re-import adds nothing
    Column("imported_at", String, nullable=False),
    Column("source", String, nullable=False),  # the file as given to `workbench reports import`
    Column("line", Integer, nullable=False),  # its 1-based line (CSV: the record's first line)
    Column("original_json", Text, nullable=False),  # the record as read, after redaction
    Column("messages_json", Text, nullable=False),  # the chat prompt: context turns + the asked user turn
    Column("question", Text, nullable=False),  # the asked user turn
    Column("question_key", String, nullable=False),  # the normalised question: reports asking the same are one group
    Column("answer", Text),  # the model's answer the user flagged (None: the export held none)
    Column("comment", Text),  # the user's complaint
    Column("feedback_json", Text, nullable=False),  # rating, reason, conversation id, ... as the export gave them
    Column("reported_at", String, nullable=False),  # the export's timestamp, else the import time
    Column("promoted_at", String),  # when `reports export` last wrote it into a field suite
    Column("promoted_to", String),  # that suite's folder
    Column("risk", Float),  # v5: estimated probability the logged answer is made up (`reports score`); None: unscored
    Column("risk_json", Text),  # v5: its evidence: features, run id, risk model, disagreeing samples
)

# A reviewer's decisions on field reports; never overwritten: the latest row per report wins.
report_decisions = Table(
    "report_decisions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("report_id", String, nullable=False),
    Column("at", String, nullable=False),
    Column("reviewer", String, nullable=False),
    Column("decision", String, nullable=False),  # hallucinated | correct | should-refuse | not-factual
    Column("answers_json", Text, nullable=False),  # the reference answer and aliases ([] : abstain or not factual)
    Column("abstain", Integer, nullable=False),  # 1: the right response is to abstain
    Column("note", Text, nullable=False),
)

# v5: the hallucination risk of each asked question's greedy answer, from the model's own generations
# (workbench/risk): no reference needed. One row per answer; scoring a run again replaces its rows.
answer_risk = Table(
    "answer_risk", metadata,
    Column("run_id", String, primary_key=True),
    Column("probe_id", String, primary_key=True),
    Column("variant", Integer, primary_key=True),  # 0: the question (paraphrases are evidence, not scored)
    Column("risk", Float, nullable=False),  # estimated probability that the answer is made up
    Column("features_json", Text, nullable=False),  # the evidence: workbench/risk/features.py Features
    Column("scored_by", Text, nullable=False),  # the risk model: what it was fitted on
    Column("scored_at", String, nullable=False),
)

#: Columns added after v1, by the version that added them: (table, column DDL). All nullable.
ADDED_COLUMNS: dict[int, list[tuple[str, str, str]]] = {
    2: [("runs", "pid", "INTEGER"), ("runs", "host", "VARCHAR"), ("runs", "heartbeat_at", "VARCHAR"),
        ("answers", "engine", "VARCHAR"), ("gen_cache", "engine", "VARCHAR"), ("reviews", "gate_id", "VARCHAR")],
    3: [("reviews", "override_reason", "TEXT")],
    4: [("answers", "graded_by", "VARCHAR")],
    5: [("field_reports", "risk", "FLOAT"), ("field_reports", "risk_json", "TEXT")],
}

Index("ix_answers_run", answers.c.run_id)
Index("ix_job_events_job", job_events.c.job_id)
Index("ix_reviews_run", reviews.c.run_id)
Index("ix_field_reports_key", field_reports.c.question_key)
Index("ix_report_decisions_report", report_decisions.c.report_id)
