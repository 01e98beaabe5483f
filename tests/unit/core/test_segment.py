"""The process-wide jieba instance and the user cache folder (``core/segment.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_ragev.metrics
from pytest_ragev.core import segment
from pytest_ragev.core.segment import cache_dir


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **env},
        check=False,
    )


def test_jieba_loads_once_quietly_with_its_cache_in_the_user_cache_dir(tmp_path: Path) -> None:
    code = """
        import sys, threading
        from pytest_ragev.core.segment import jieba_tokenizer
        from pytest_ragev.metrics import words
        assert "jieba" not in sys.modules
        results, instances = [], []
        start = threading.Barrier(8)
        def work():
            start.wait()
            results.append(words("我们今天去北京看天安门"))
            instances.append(jieba_tokenizer())
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        assert len(results) == 8 and all(r == results[0] for r in results), results
        assert len({id(i) for i in instances}) == 1
        print(jieba_tokenizer().tmp_dir)
    """
    done = _run(code, {"XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "pytest-ragev")
    assert (tmp_path / "pytest-ragev" / "jieba.cache").is_file()
    # jieba's "Building prefix dict ..." lines are silenced.
    assert "prefix dict" not in done.stderr
    assert done.stderr == ""


def test_cache_dir_follows_xdg_and_falls_back_to_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "pytest-ragev"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid per the XDG spec
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "pytest-ragev"
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cache_dir() is None


def test_the_metrics_package_names_the_same_functions() -> None:
    # docs/metrics.md names pytest_ragev.metrics.jieba_tokenizer and cache_dir.
    assert pytest_ragev.metrics.jieba_tokenizer is segment.jieba_tokenizer
    assert pytest_ragev.metrics.cache_dir is segment.cache_dir


def test_the_keyword_retriever_gets_jieba_without_the_metric_engine(tmp_path: Path) -> None:
    code = """
        import json, sys
        from pytest_ragev.pipelines.builtin.tokens import bm25_tokens
        tokens = bm25_tokens("什么是深度学习？Deep learning")
        print(json.dumps({
            "tokens": tokens,
            "metrics_imported": any(m.startswith("pytest_ragev.metrics") for m in sys.modules),
        }))
    """
    done = _run(code, {"XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["metrics_imported"] is False  # pipelines never reach into metrics for jieba
    assert facts["tokens"][-2:] == ["deep", "learning"]
    assert "深度" in facts["tokens"]
