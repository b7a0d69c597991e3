"""``ragkit eval QUESTIONS.jsonl``: retrieval quality on a user's own questions
(issue 31 item 3), as a user runs it, and its scoring rules.

The CLI tests index twelve MuSiQue passages with the replay LLM into two
workspaces: ``default`` (all twelve; passage 08 readable by alice only) and
``half`` (passages 00-05, from ``h/corpus/``; 08 was indexed from ``restricted/``), and check every figure the command prints against
what ``ragkit query --json --context-only`` returns for the same question.

Troubleshooting: run ``ragkit eval q.jsonl --json`` and ``ragkit query Q
--mode M --context-only --json`` by hand in the fixture's folder (set
RAGKIT_TEST_DOUBLES=1 and RAGKIT_LLM=replay).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.errors import InvalidValueError
from ragkit.evaluation import EvalQuestion, load_questions, ranks, score
from ragkit.testing.corpus import write_passages

RAGKIT = shutil.which("ragkit", path=str(Path(sys.executable).parent)) or "ragkit"
QUESTIONS = [
    {"id": "editor", "question": "Who is the current editor of the Journal of Mathematical Physics?",
     "documents": ["corpus/passage-00.txt"], "expected": ["jan philip SOLOVEJ"]},
    {"question": "Who publishes IEEE Transactions on Microwave Theory and Techniques?",
     "documents": "passage-08.txt"},
    {"question": "Who created the Riemann integral?", "documents": ["no-such-file.txt", "passage-04.txt"]},
]
MODES = ["naive", "local", "mix"]


def ragkit(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_") or k == "RAGKIT_MUSIQUE_DIR"}
    base.update(RAGKIT_LLM="replay", RAGKIT_TEST_DOUBLES="1", **env)
    return subprocess.run([RAGKIT, *args], cwd=cwd, env=base, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-eval")
    paths = write_passages(root / "corpus", limit=12)
    (root / "restricted").mkdir()
    paths[8].rename(root / "restricted" / paths[8].name)
    for args in (["index", "corpus"], ["index", "restricted", "--allow-user", "alice"]):
        out = ragkit(*args, cwd=root)
        assert out.returncode == 0, out.stderr
    (root / "h" / "corpus").mkdir(parents=True)
    for p in paths[:6]:
        shutil.copy(p, root / "h" / "corpus" / p.name)
    (root / "half.toml").write_text('workspace = "half"\n')
    out = ragkit("--config", "half.toml", "index", "h/corpus", cwd=root)
    assert out.returncode == 0, out.stderr
    (root / "q.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return root


def context_chunks(root: Path, question: str, mode: str, config: tuple = (), options: tuple = ()) -> list[dict]:
    out = ragkit(*config, "query", question, "--mode", mode, "--context-only", "--json", *options, cwd=root)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["chunks"]


def expected_recall(root: Path, mode: str, k: int, config: tuple = (), options: tuple = ()) -> tuple[float, float]:
    """Recall and recall@k recomputed here from ``ragkit query``'s chunks, by this
    fixture's own rules: a gold document is found by the path's file name."""
    scores = []
    for q in QUESTIONS:
        chunks = context_chunks(root, q["question"], mode, config, options)
        names = [Path(c["file_path"] or "").name for c in chunks]
        gold = [Path(d).name for d in ([q["documents"]] if isinstance(q["documents"], str) else q["documents"])]
        hits = [names.index(g) if g in names else None for g in gold]
        for text in q.get("expected", []):
            hits.append(next((i for i, c in enumerate(chunks) if text.lower() in c["content"].lower()), None))
        scores.append((sum(h is not None for h in hits) / len(hits), sum(h is not None and h < k for h in hits) / len(hits)))
    return (round(sum(s[0] for s in scores) / len(scores), 4), round(sum(s[1] for s in scores) / len(scores), 4))


def test_every_figure_matches_what_the_queries_returned(root):
    out = ragkit("eval", "q.jsonl", *(a for m in MODES for a in ("--mode", m)), "--k", "2", "--json", cwd=root)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["questions"] == 3 and len(data["reports"]) == 1
    report = data["reports"][0]
    assert report["workspace"] == "default" and [r["mode"] for r in report["rows"]] == MODES
    for row in report["rows"]:
        assert (row["recall"], row["recall_at_k"]) == expected_recall(root, row["mode"], 2), row["mode"]
        assert row["k"] == 2 and row["questions"] == 3 and row["max_total_tokens"] == 30000
        assert row["context_tokens_mean"] > 0 and 0 < row["latency_p50_ms"] <= row["latency_p95_ms"]
    naive = report["rows"][0]
    assert 0 < naive["recall"] < 1  # no-such-file.txt is never found


def test_budgets_each_get_their_rows_and_smaller_contexts(root):
    out = ragkit("eval", "q.jsonl", "--mode", "mix", "--budget", "30000", "--budget", "3000", "--json", cwd=root)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["reports"][0]["rows"]
    assert [(r["mode"], r["max_total_tokens"]) for r in rows] == [("mix", 30000), ("mix", 3000)]
    assert rows[1]["context_tokens_mean"] < rows[0]["context_tokens_mean"] <= 30000
    assert rows[1]["context_tokens_mean"] <= 3000


def test_a_principal_is_scored_on_what_it_may_read(root):
    def recall_of(*extra: str) -> float:
        out = ragkit("eval", "q.jsonl", "--mode", "naive", "--json", *extra, cwd=root)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["reports"][0]["rows"][0]["recall"]

    assert recall_of("--as-user", "bob") == expected_recall(root, "naive", 5, options=("--as-user", "bob"))[0]
    assert recall_of("--as-user", "alice") == recall_of() > recall_of("--as-user", "bob")


def test_compare_runs_the_other_configuration_side_by_side(root):
    out = ragkit("eval", "q.jsonl", "--mode", "naive", "--mode", "local", "--compare", "half.toml", "--json", cwd=root)
    assert out.returncode == 0, out.stderr
    a, b = json.loads(out.stdout)["reports"]
    assert (a["workspace"], b["workspace"], b["config"]) == ("default", "half", "half.toml")
    for mode, row_a, row_b in zip(["naive", "local"], a["rows"], b["rows"]):
        assert row_b["recall"] == expected_recall(root, mode, 5, config=("--config", "half.toml"))[0]
        assert row_b["recall"] < row_a["recall"], mode  # passage 08 is not in half
    table = ragkit("eval", "q.jsonl", "--mode", "naive", "--compare", "half.toml", cwd=root, RAGKIT_PROGRESS="plain")
    assert table.returncode == 0, table.stderr
    head, columns = table.stdout.splitlines()[:2]
    assert "A: workspace 'default'" in head and "B: workspace 'half' (half.toml)" in head
    assert columns.split()[:5] == ["mode", "budget", "recall", "A", "recall"]
    delta = round(b["rows"][0]["recall"] - a["rows"][0]["recall"], 3)
    assert f"{delta:+.3f}" in table.stdout.splitlines()[3]
    # 3 questions, warmed up then timed, in each configuration
    assert f"eval [2/2]: {'█' * 20} 12/12 queries (naive, budget 30000)" in table.stderr


@pytest.mark.parametrize(("line", "says"), [
    ('{"question": "q", "documents": ["a"]', "line 2 is not JSON"),
    ('["q"]', "line 2 is not a JSON object"),
    ('{"question": "q", "passage": ["a"]}', "line 2: passage: Extra inputs are not permitted"),
    ('{"question": "q"}', "names nothing to find: give passages, documents or expected"),
    ('{"question": " ", "expected": ["a"]}', "question is blank"),
    ('{"question": "q", "expected": [""]}', "holds an empty string"),
])
def test_a_bad_questions_file_names_the_line_and_the_fix(root, line, says):
    bad = root / "bad.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n" + line + "\n")
    out = ragkit("eval", "bad.jsonl", "--mode", "naive", cwd=root)
    assert out.returncode == 2 and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_missing_inputs_are_clear_errors_that_create_nothing(root, tmp_path):
    out = ragkit("eval", "nope.jsonl", cwd=root)
    assert out.returncode == 2 and "cannot read the questions file nope.jsonl" in out.stderr
    (root / "empty.jsonl").write_text("\n\n")
    out = ragkit("eval", "empty.jsonl", cwd=root)
    assert out.returncode == 2 and "holds no questions" in out.stderr
    out = ragkit("eval", "q.jsonl", "--compare", "nope.toml", cwd=root)
    assert out.returncode == 2 and "--compare nope.toml: no such settings file" in out.stderr
    (root / "ghost.toml").write_text('workspace = "ghost"\n')
    out = ragkit("eval", "q.jsonl", "--compare", "ghost.toml", cwd=root)
    assert out.returncode == 2 and "no workspace 'ghost'" in out.stderr
    assert not (root / "ragkit_data" / "ghost").exists()
    out = ragkit("eval", "q.jsonl", "--mode", "naive", "--k", "0", cwd=root)
    assert out.returncode == 2 and "k must be at least 1" in out.stderr
    out = ragkit("eval", "q.jsonl", "--mode", "nosuchmode", cwd=root)
    assert out.returncode == 2 and "nosuchmode" in out.stderr


# -- the scoring rules, without a workspace ---------------------------------------------------


def chunk(content: str, doc_id: str = "doc-1", file_path: str | None = None) -> dict:
    return {"content": content, "doc_id": doc_id, "file_path": file_path}


def test_a_passage_is_found_whole_in_a_chunk_or_mostly_covered_by_its_pieces():
    passage = "Alpha beta gamma.  Delta epsilon zeta. Eta theta iota."
    q = EvalQuestion(question="q", passages=[passage])
    assert ranks(q, [chunk("other"), chunk("x " + passage.replace("  ", " \n") + " y")]) == [1]
    # split by the chunker: pieces inside it count once they cover half of it
    assert ranks(q, [chunk("Alpha beta gamma."), chunk("nothing"), chunk("Delta epsilon zeta. Eta theta iota.")]) == [2]
    assert ranks(q, [chunk("Alpha beta gamma."), chunk("Alpha beta gamma.")]) == [None]  # the same piece twice
    assert ranks(q, [chunk("Eta")]) == [None]


def test_documents_are_found_by_id_path_or_path_tail_and_strings_without_case():
    q = EvalQuestion(question="q", documents=["doc-9", "b.txt", "corpus/c.txt", "orpus/c.txt"], expected=["Ünïcode  TEXT"])
    chunks = [chunk("none", "doc-1", "corpus/a.txt"), chunk("the ünïcode text here", "doc-9", "corpus/b.txt"),
              chunk("c", "doc-3", "corpus/c.txt")]
    assert ranks(q, chunks) == [1, 1, 2, None, 1]
    assert score(q, chunks, 2) == (0.8, 0.6)
    assert score(q, [], 5) == (0.0, 0.0)


def test_questions_load_one_object_per_line_and_accept_a_lone_string_and_a_bom(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('\ufeff{"question": "a?", "expected": "x"}\n\n{"question": "b?", "passages": ["p"], "id": "7"}\n')
    loaded = load_questions(path)
    assert [(q.question, q.expected, q.passages, q.id) for q in loaded] == [("a?", ["x"], [], None), ("b?", [], ["p"], "7")]
    path.write_text('{"question": "a?", "documents": [3]}\n')
    with pytest.raises(InvalidValueError, match="line 1: documents"):
        load_questions(path)
