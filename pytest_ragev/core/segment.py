"""The process-wide jieba instance that segments Chinese, and the user cache folder it uses.

The metric tokenizer (``metrics/text.py``) and the keyword retriever's tokenizer
(``pipelines/builtin/tokens.py``) both segment Han text with this one instance, so jieba's
dictionary loads once per process whichever needs it first. It lives in this L0 leaf so
that neither layer reaches into the other for it.

jieba is imported and its dictionary loaded on the first call of :func:`jieba_tokenizer`
only, under a lock (pipelines run in a thread pool), with its log lines and import
warnings silenced; its dictionary cache file goes to :func:`cache_dir`. jieba's own
module-level instance (``jieba.dt``) is never touched.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "jieba_tokenizer", "jieba_unchanged"]

_jieba_lock = threading.Lock()
_jieba_instance: Any = None
#: (the dictionary object, its size, jieba's total) as the instance loaded them.
_jieba_loaded: tuple[int, int, int] | None = None
#: Calls of the instance's add_word (del_word, suggest_freq and load_userdict use it).
_jieba_word_changes = 0


def cache_dir() -> Path | None:
    """The user cache folder of pytest-ragev (``$XDG_CACHE_HOME/pytest-ragev`` or
    ``~/.cache/pytest-ragev``), created on demand; ``None`` when it cannot be created."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    folder = root / "pytest-ragev"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


def jieba_tokenizer() -> Any:
    """The process-wide ``jieba.Tokenizer`` used for Chinese, loaded on first call.

    Thread-safe; the dictionary cache goes to :func:`cache_dir` (jieba's default, the
    system temp folder, when that is unavailable) and jieba's log lines and import
    warnings are silenced while it loads. The metrics and the knowledge base's keyword
    retriever use the same instance, so both see the same segmentation.
    """
    instance = _jieba_instance
    if instance is not None:
        return instance
    with _jieba_lock:
        if _jieba_instance is None:
            _load_jieba()
        return _jieba_instance


def jieba_unchanged() -> bool:
    """Whether the Chinese segmentation is still that of jieba's own dictionary.

    True before the instance is loaded (nothing can have changed it then). False once
    project code changed its dictionary: through ``add_word`` (which ``del_word``,
    ``suggest_freq`` and ``load_userdict`` call), or with another dictionary
    (``set_dictionary``, ``initialize``). The text metrics' memo of earlier runs' scores
    (``evaluation.TextScoreMemo``) is used only while this holds: the same texts may
    segment otherwise after such a change.
    """
    instance = _jieba_instance
    if instance is None:
        return True
    if _jieba_word_changes or not instance.initialized:
        return False
    return (id(instance.FREQ), len(instance.FREQ), instance.total) == _jieba_loaded


def _counting_add_word(original: Any) -> Any:
    def add_word(word: str, freq: int | None = None, tag: str | None = None) -> Any:
        global _jieba_word_changes
        _jieba_word_changes += 1
        return original(word, freq, tag)

    return add_word


def _load_jieba() -> None:
    global _jieba_instance, _jieba_loaded
    with warnings.catch_warnings():
        # jieba 0.42 imports pkg_resources and has invalid escapes in its sources.
        warnings.simplefilter("ignore")
        import jieba

    jieba_logger = logging.getLogger("jieba")
    previous_level = jieba_logger.level
    jieba_logger.setLevel(logging.WARNING)
    try:
        instance = jieba.Tokenizer()
        folder = cache_dir()
        if folder is not None:
            instance.tmp_dir = str(folder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance.initialize()
    finally:
        jieba_logger.setLevel(previous_level)
    _jieba_loaded = (id(instance.FREQ), len(instance.FREQ), instance.total)
    # jieba's own methods reach add_word through the instance: counted, whoever calls.
    instance.add_word = _counting_add_word(instance.add_word)
    _jieba_instance = instance
