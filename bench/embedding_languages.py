"""How the embedding grader's model (all-MiniLM-L6-v2, English-trained) scores answer pairs outside English.

Pairs an answer and an accepted answer that do not contain each other (only those reach the embedding
step); a good model scores the same-meaning pairs above the grader's threshold (0.75) and the others below.

    .venv/bin/python bench/embedding_languages.py
"""

from __future__ import annotations

from workbench.grading.embedding import DEFAULT_THRESHOLD, EmbeddingGrader

# (answer, accepted, same meaning?)
PAIRS: list[tuple[str, str, bool]] = [
    ("Mao Zedong", "Chairman Mao", True), ("Sydney", "Canberra", False),  # English, for reference
    ("毛主席", "毛泽东", True), ("首尔", "汉城", True), ("美利坚合众国", "美国", True), ("周树人", "鲁迅", True),
    ("北京", "上海", False), ("东京", "京都", False), ("唐朝", "宋朝", False), ("长江", "黄河", False),
    ("巴黎", "Paris", True), ("パリ", "巴黎", True), ("東京", "とうきょう", True), ("대한민국", "한국", True),
    ("大阪", "名古屋", False), ("부산", "서울", False), ("ปารีส", "ลอนดอน", False), ("Москва", "Moscou", True),
]


def main() -> None:
    g = EmbeddingGrader()
    right = graded = 0
    for a, b, same in PAIRS:
        sim, readable = g.similarity(a, b)
        unreadable = not readable
        ok = (sim >= DEFAULT_THRESHOLD) == same
        right += ok
        graded += (not unreadable and sim >= DEFAULT_THRESHOLD) == same  # unreadable: the match verdict
        print(f"{a:>12} | {b:<12} same={same!s:<5} cosine {sim:.3f} {'ok' if ok else 'WRONG'}"
              f"{'  (unreadable: match verdict)' if unreadable else ''}")
    print(f"cosine alone: {right}/{len(PAIRS)} pairs on the right side of the threshold {DEFAULT_THRESHOLD}; "
          f"the grader (unreadable strings keep the match verdict): {graded}/{len(PAIRS)}")


if __name__ == "__main__":
    main()
