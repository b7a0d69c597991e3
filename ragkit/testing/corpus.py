"""Write MuSiQue passages as text files, one document each.

    python -m ragkit.testing.corpus DIR [--limit N]

Each file holds one passage exactly as the recording saw it (title, newline,
text), so ``RAGKIT_LLM=replay ragkit index DIR`` replays the real recorded
extractions through the ordinary file loader.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ragkit.errors import RagkitError
from ragkit.testing.replay import load_musique


def write_passages(folder: Path | str, limit: int | None = None) -> list[Path]:
    """Write ``passage-NNNN.txt`` per passage (file order); returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    docs = load_musique()[1]
    docs = docs if limit is None else docs[:limit]
    width = len(str(len(docs)))
    paths = []
    for i, doc in enumerate(docs):
        path = folder / f"passage-{i:0{width}d}.txt"
        path.write_text(doc["passage"], encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragkit.testing.corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--limit", type=int, help="only the first N passages")
    args = parser.parse_args(argv)
    try:
        paths = write_passages(args.folder, args.limit)
    except RagkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(paths)} passages to {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
