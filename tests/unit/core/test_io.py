"""Unit tests of the file writes: atomic files and their permissions, streams written
through (#16 item 3), strict JSON (#16 item 12)."""

from __future__ import annotations

import errno
import gc
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.core.io import (
    atomic_write_json,
    atomic_write_text,
    dumps_json,
    is_stream,
    iter_json,
    rewrite_in_place,
    write_error_fix,
    write_output,
    write_output_json,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_mode_a_plain_open_gives(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "out" / "report.json"
    atomic_write_json(target, {"a": 1})
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert mode(target) == mode(plain) == 0o644


def test_umask_is_respected(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "r.md", "text")
    finally:
        os.umask(old)
    assert mode(tmp_path / "r.md") == 0o640


def test_existing_file_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "baseline.json"
    target.write_text("{}")
    os.chmod(target, 0o664)
    atomic_write_text(target, "{\"new\": true}\n")
    assert mode(target) == 0o664
    assert target.read_text() == "{\"new\": true}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]  # no temp file left


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, as `cat fifo` would be
    try:
        assert is_stream(fifo)
        write_output_json(fifo, {"问题": "埃菲尔铁塔有多高？"})
        received = os.read(reader, 65536)
    finally:
        os.close(reader)
    assert json.loads(received) == {"问题": "埃菲尔铁塔有多高？"}
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.fifo"]  # no temp file


def test_a_fifo_nobody_reads_fails_at_once_with_the_reason(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as caught:
        write_output(fifo, "{}\n")
    assert caught.value.errno == errno.ENXIO and "a FIFO needs a reader" in str(caught.value)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_atomic_write_never_replaces_a_device_or_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a file"):
        atomic_write_text(fifo, "{}")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert is_stream("/dev/null") and not is_stream(tmp_path / "new.json")
    assert not is_stream(tmp_path)  # a folder: the write fails, naming it


def test_files_are_replaced_atomically_and_a_link_by_the_new_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old", encoding="utf-8")
    before = os.stat(target).st_ino
    write_output(target, "Отчёт.\n")
    assert os.stat(target).st_ino != before  # a new file renamed into place
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    # One rule for every writer (as the baseline's atomic write): the link is replaced.
    write_output(link, "Der Bericht ist neu.\n")
    assert not link.is_symlink() and link.read_text(encoding="utf-8") == "Der Bericht ist neu.\n"
    assert target.read_text(encoding="utf-8") == "Отчёт.\n"
    baseline_link = tmp_path / "baseline.json"
    baseline_link.symlink_to(target)
    atomic_write_text(baseline_link, "{}")
    assert not baseline_link.is_symlink() and target.read_text(encoding="utf-8") == "Отчёт.\n"
    write_output(tmp_path / "sub" / "new.md", "새 보고서\n")
    assert (tmp_path / "sub" / "new.md").read_text(encoding="utf-8") == "새 보고서\n"


_WRITE_TO_STDOUT = """
import sys
from pytest_ragev.core.io import write_output
print("log line before", flush=True)
sys.stdout.write("buffered, not flushed\\n")
write_output(sys.argv[1], "REPORT\\n")
print("log line after")
"""


@pytest.mark.parametrize("name", ["/dev/stdout", "/proc/self/fd/1"])
def test_standard_output_redirected_to_a_file_is_appended_to_not_replaced(
    tmp_path: Path, name: str
) -> None:
    if not os.path.exists(name):
        pytest.skip(f"{name} does not exist here")
    log = tmp_path / "build.log"
    with log.open("w", encoding="utf-8") as handle:
        subprocess.run([sys.executable, "-c", _WRITE_TO_STDOUT, name], stdout=handle,
                       check=True, timeout=120)
    assert log.read_text(encoding="utf-8").splitlines() == [
        "log line before", "buffered, not flushed", "REPORT", "log line after"]


def test_standard_output_on_a_pipe_is_written_through() -> None:
    done = subprocess.run([sys.executable, "-c", _WRITE_TO_STDOUT, "/dev/stdout"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "log line before", "buffered, not flushed", "REPORT", "log line after"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_json_is_strict(value: float) -> None:
    with pytest.raises(ValueError):
        dumps_json({"meta": {"score": value}})
    assert dumps_json({"text": "Привет, мир"}) == '{\n  "text": "Привет, мир"\n}\n'


def test_record_lists_are_one_compact_object_per_line() -> None:
    data = {"run": {"questions": [{"qid": 1, "q": "什么是 RAG？"}, {"qid": 2, "q": "Was ist das?"}],
                    "settings": {"top_k": 5}},
            "questions": [], "other": [{"a": 1}]}
    text = dumps_json(data, records=("questions",))
    assert json.loads(text) == data
    assert '    "questions": [\n      {"qid":1,"q":"什么是 RAG？"},\n      {"qid":2,' in text
    # Other lists keep the indented layout; an empty record list stays [].
    assert '"other": [\n    {\n      "a": 1' in text and '"questions": [],' in text
    assert dumps_json(data) == json.dumps(data, ensure_ascii=False, indent=2) + "\n"



def test_record_lists_are_freed_with_the_collector_paused() -> None:
    # The end of a run writes the baseline and the report with the cyclic collector
    # paused: dumps_json must not keep the records alive until the next collection.
    class Row(dict[str, object]):  # a dict that a weak reference can watch
        pass

    rows = [Row(qid=qid, q=f"Frage {qid} 问题") for qid in range(50)]
    watched = [weakref.ref(row) for row in rows]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        text = dumps_json({"questions": rows}, records=("questions",))
        del rows
        alive = sum(ref() is not None for ref in watched)
    finally:
        if was_enabled:
            gc.enable()
    assert json.loads(text)["questions"][49] == {"qid": 49, "q": "Frage 49 问题"}
    assert alive == 0

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["questions", "samples", "x", "\u0000", '"']), inner,
                      max_size=4),
    max_leaves=20,
)


@given(_json)
def test_dumps_json_with_records_parses_to_the_same_value(value: object) -> None:
    assert json.loads(dumps_json(value, records=("questions", "samples"))) == value


@given(_json)
def test_a_json_file_is_written_piece_by_piece_with_the_same_text(value: object) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.json"
        atomic_write_json(path, value, records=("questions", "samples"))
        assert path.read_text(encoding="utf-8") == dumps_json(
            value, records=("questions", "samples"))


def _questions_then_nan(count: int) -> dict[str, object]:
    rows: list[dict[str, object]] = [
        {"qid": qid, "q": f"Wie hoch ist der Turm? 塔有多高？ {qid}"} for qid in range(count)]
    return {"schema": "x", "questions": [*rows, {"qid": count, "score": math.nan}]}


def test_record_lines_are_made_as_they_are_asked_for() -> None:
    # Lazy: the first pieces come before the last record is encoded (a NaN there
    # raises only when it is reached), one piece a record.
    pieces = iter_json(_questions_then_nan(3), records=("questions",))
    head = [next(pieces) for _ in range(4)]
    assert head[0].startswith('{\n  "schema": "x",\n  "questions": [\n    ')
    assert head[1] == '{"qid":0,"q":"Wie hoch ist der Turm? 塔有多高？ 0"}'
    assert head[3] == ',\n    {"qid":2,"q":"Wie hoch ist der Turm? 塔有多高？ 2"}'
    with pytest.raises(ValueError):
        next(pieces)


def test_a_json_write_that_fails_midway_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "ragev-report.json"
    path.write_text("old report\n", encoding="utf-8")
    # Past the first block of bytes: some of the new file was written when it fails.
    with pytest.raises(ValueError):
        atomic_write_json(path, _questions_then_nan(30_000), records=("questions",))
    assert path.read_text(encoding="utf-8") == "old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ragev-report.json"]


def test_a_stream_gets_nothing_when_the_json_fails_midway(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(ValueError):
            write_output_json(fifo, _questions_then_nan(30_000), records=("questions",))
        # Nothing came, and no writer ever opened it (a read without one is at its end).
        assert os.read(reader, 65536) == b""
    finally:
        os.close(reader)


# --- the in-place fallback of a full disk --------------------------------------------------------


def test_rewrite_in_place_keeps_the_file_and_replaces_its_content(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"status": 0, "padding": "' + "x" * 200 + '"}\n', encoding="utf-8")
    inode = path.stat().st_ino
    rewrite_in_place(path, '{"status": 3, "err_msg": "磁盘已满"}\n')
    assert json.loads(path.read_text(encoding="utf-8")) == {"status": 3, "err_msg": "磁盘已满"}
    assert path.stat().st_ino == inode  # no second copy was needed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_rewrite_in_place_never_creates_a_file_nor_writes_a_fifo(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        rewrite_in_place(tmp_path / "missing.json", "{}")
    assert not (tmp_path / "missing.json").exists()
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        rewrite_in_place(fifo, "{}")


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (errno.EISDIR, "the path is a folder: name a file, such as one inside it"),
        (errno.ENXIO, "no process reads the FIFO: start its reader first, or choose another path"),
        (errno.ENOSPC, "free space on that disk, or choose another path"),
        (errno.EACCES, "make the folder and the file writable, or choose another path"),
        (errno.EEXIST, "a file stands where a folder of the path must be: move it, or choose "
                       "another path"),
        (errno.EIO, "free space, make the folder writable, or choose another path"),
    ],
)
def test_the_fix_of_a_failed_write_matches_its_cause(code: int, fix: str) -> None:
    assert write_error_fix(OSError(code, os.strerror(code))) == fix


def test_the_fix_names_the_callers_other_path() -> None:
    fix = write_error_fix(OSError(errno.ENXIO, "no reader"), elsewhere="point [baseline] path "
                          "(--ragev-baseline) at another file")
    assert fix.endswith("or point [baseline] path (--ragev-baseline) at another file")
    assert write_error_fix(ValueError("Out of range float values are not JSON compliant")) == (
        "free space, make the folder writable, or choose another path")
