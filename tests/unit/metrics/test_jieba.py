"""One jieba per process: the metrics and the keyword retriever share the instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.mark.slow
def test_metrics_and_bm25_share_one_jieba_with_its_cache_in_the_user_cache(
    tmp_path: Path,
) -> None:
    code = textwrap.dedent(
        """
        import json, os, tempfile
        import jieba
        loads = []
        original = jieba.Tokenizer.initialize
        def counting(self, dictionary=None):
            if not self.initialized:
                loads.append(self is jieba.dt)
            return original(self, dictionary)
        jieba.Tokenizer.initialize = counting
        from pytest_ragev import MetricInput, score
        from pytest_ragev.pipelines.builtin.tokens import bm25_tokens
        from pytest_ragev.metrics import jieba_tokenizer
        text = "什么是深度学习？Deep learning。"
        tokens = bm25_tokens(text)
        score([MetricInput([[1]], [1], "今天天气很好", "天气很好")])
        bm25_tokens("计算机的操作系统")
        facts = {
            "loads": list(loads),
            "tokens": tokens,
            "module_default_loaded": jieba.dt.initialized,
            "metrics_loaded": jieba_tokenizer().initialized,
            "temp_files": sorted(os.listdir(tempfile.gettempdir())),
        }
        # BM25 tokens are those of jieba's default instance (same dictionary and HMM).
        facts["default_tokens"] = jieba.lcut("什么是深度学习", HMM=True) + ["deep", "learning"]
        print(json.dumps(facts))
        """
    )
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["loads"] == [False]  # one dictionary load, not of the module-level jieba.dt
    assert facts["module_default_loaded"] is False
    assert facts["metrics_loaded"] is True
    assert [p.name for p in (cache / "pytest-ragev").iterdir()] == ["jieba.cache"]
    assert facts["temp_files"] == []  # nothing in the system temp folder
    assert facts["tokens"] == facts["default_tokens"]
    assert "深度" in facts["tokens"]
