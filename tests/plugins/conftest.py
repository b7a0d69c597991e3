"""Throwaway environments with plugins really installed by pip.

A full venv per test (pip, setuptools, ragkit and its dependencies) would take
a minute. Instead each environment is a ``venv --without-pip`` whose
site-packages holds one ``.pth`` line that adds this test run's own
site-packages (``site.addsitedir``, so ragkit's editable install, pytest and
pip itself are importable). pip then runs *in the new interpreter* and installs
the plugin distributions into the new venv only, with their entry points, as a
user's ``pip install`` would. Nothing leaks back into the environment running
the tests.

Fixtures:

- ``plugin_venv(name, *installables)``: a session-cached ``PluginVenv`` with
  those distributions installed (paths to project directories or wheels).
- ``build_wheel(dist, version, files, entry_points)``: writes a pure-Python
  wheel of a throwaway distribution and returns its path (installing a wheel
  needs no build backend, so this is fast and works offline).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class PluginVenv:
    root: Path
    python: Path

    def run(
        self, *args: str | os.PathLike[str], cwd: Path, env: Mapping[str, str] | None = None,
        timeout: float = 600,
    ) -> subprocess.CompletedProcess[str]:
        """Run this venv's python with ``args`` and no inherited RAGKIT_* variables."""
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
        full_env.pop("PYTHONPATH", None)
        full_env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in the source trees run from
        full_env.update(env or {})
        return subprocess.run(
            [str(self.python), *map(str, args)], cwd=cwd, env=full_env,
            capture_output=True, text=True, timeout=timeout,
        )

    def ragkit(self, *args: str, cwd: Path, env: Mapping[str, str] | None = None):
        """The ``ragkit`` command as this venv's interpreter runs it (``python -m ragkit``
        calls the same ``main`` as the console script)."""
        return self.run("-m", "ragkit", *args, cwd=cwd, env=env)


def _needs_build_isolation() -> bool:
    """Whether setuptools here can build a wheel by itself (it can from 70.1, or
    with the ``wheel`` package); if not, pip must fetch the build requirements."""
    if importlib.util.find_spec("wheel") is not None:
        return False
    try:
        from importlib.metadata import version

        major, minor = (int(p) for p in re.findall(r"\d+", version("setuptools"))[:2])
    except Exception:
        return True
    return (major, minor) < (70, 1)


def _create(root: Path) -> PluginVenv:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    child_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    parent_site = sysconfig.get_paths()["purelib"]
    (Path(child_site) / "_ragkit_test_parent.pth").write_text(
        f"import site; site.addsitedir({parent_site!r})\n", encoding="utf-8"
    )
    return PluginVenv(root, python)


def _pip_install(venv: PluginVenv, installables: tuple[Path, ...], cwd: Path) -> None:
    args = ["-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "--quiet"]
    if not any(p.is_dir() for p in installables) or not _needs_build_isolation():
        args.append("--no-build-isolation")
    out = venv.run(*args, *installables, cwd=cwd)
    if out.returncode != 0:
        pytest.fail(f"pip install {installables} failed:\n{out.stdout}\n{out.stderr}")


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory) -> Callable[..., PluginVenv]:
    cache: dict[str, PluginVenv] = {}

    def make(name: str, *installables: str | os.PathLike[str]) -> PluginVenv:
        if name not in cache:
            root = tmp_path_factory.mktemp(f"venv-{name}")
            venv = _create(root / "venv")
            if installables:
                _pip_install(venv, tuple(Path(p).resolve() for p in installables), cwd=root)
            cache[name] = venv
        return cache[name]

    return make


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def write_wheel(
    out_dir: Path, dist: str, version: str, files: Mapping[str, str],
    entry_points: Mapping[str, Mapping[str, str]],
) -> Path:
    """A minimal valid py3-none-any wheel holding ``files`` (path -> source)."""
    stem = re.sub(r"[-_.]+", "_", dist).lower()
    info = f"{stem}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Dist: ragkit\n"
    )
    contents[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: ragkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    contents[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in entry_points.items()
    )
    record = []
    path = out_dir / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in contents.items():
            data = text.encode("utf-8")
            zf.writestr(name, data)
            record.append(f"{name},{_record_hash(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="session")
def build_wheel(tmp_path_factory) -> Callable[..., Path]:
    out_dir = tmp_path_factory.mktemp("wheels")

    def build(
        dist: str, files: Mapping[str, str], entry_points: Mapping[str, str],
        version: str = "1.0",
    ) -> Path:
        """``entry_points`` are the ``ragkit`` group's: name -> module."""
        return write_wheel(out_dir, dist, version, files, {"ragkit": entry_points})

    return build
