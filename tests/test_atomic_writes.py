"""Faults while writing (issue 21, class 10): a write that fails names its target, never the hidden temporary
file, and leaves nothing behind; a temporary file left by a killed writer is removed by the next write to the
same target, and a live writer's is not. Real faults: a file-size limit (``RLIMIT_FSIZE``, the same ``write``
failure a full disk gives) and ``SIGKILL``, each in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import synergy_opt as so
from synergy_opt import files
from synergy_opt.files import atomic_open

# Run in a child: a file-size limit of 4 KiB, SIGXFSZ ignored so that a write past it fails with EFBIG.
LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
"""


def _child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())


def _temporaries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if ".tmp" in path.name)


def test_a_failed_write_names_the_target_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "big.csv"
    result = _child(LIMITED + """
from synergy_opt.files import atomic_open
try:
    with atomic_open(sys.argv[1]) as handle:
        handle.write("x" * 100_000)
except OSError as error:
    print(type(error).__name__, error.errno, error.filename, error.strerror)
""", str(target))
    name, errno, filename, *_ = result.stdout.split()
    assert (name, int(errno), filename) == ("OSError", 27, str(target)), result  # EFBIG, naming the target
    assert not target.exists() and _temporaries(tmp_path) == []


def test_a_cli_that_cannot_write_says_which_file_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    result = _child(LIMITED + """
from synergy_opt.sim.cli import main
sys.exit(main(["--gpus", "16", "--jobs", "40", "--load", "1", "--mechanisms", "proportional", "--no-progress",
               "--out", sys.argv[1]]))
""", str(out))
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    # The first file past the limit is the record of the finished run: named, and no half line left in it.
    assert str(out / "runs.jsonl") in lines[0] and "File too large" in lines[0], lines[0]
    assert ".tmp" not in lines[0] and _temporaries(out) == []
    assert (out / "runs.jsonl").read_text() == ""


WRITER = """
import sys, time
from synergy_opt.files import atomic_open
with atomic_open(sys.argv[1]) as handle:
    handle.write("partial")
    handle.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def _writer(target: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(target)], stdout=subprocess.PIPE,
                               text=True, env=os.environ.copy())
    assert process.stdout is not None and process.stdout.readline().strip() == "writing"
    return process


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "summary.csv"
    killed = _writer(target)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    assert len(_temporaries(tmp_path)) == 1 and not target.exists()  # what a SIGKILL mid-write leaves
    live = _writer(target)
    try:
        with atomic_open(target) as handle:
            handle.write("complete\n")
        left = _temporaries(tmp_path)
        assert len(left) == 1 and f"-{live.pid}." in left[0], left  # the killed one's is gone, the live one's kept
        assert target.read_text() == "complete\n"
    finally:
        live.kill()
        live.wait(timeout=60)


def test_an_old_untagged_temporary_file_is_removed_only_once_stale(tmp_path: Path) -> None:
    target = tmp_path / "rows.csv"
    fresh, old = tmp_path / ".rows.csv.abc123.tmp.csv", tmp_path / ".rows.csv.def456.tmp.csv"
    fresh.write_text("x")
    old.write_text("x")
    os.utime(old, (0, 0))
    other = tmp_path / ".rows.csv.otherhost-1.abc.tmp.csv"  # another host's writer may be alive
    other.write_text("x")
    with atomic_open(target) as handle:
        handle.write("ok")
    assert fresh.exists() and other.exists() and not old.exists()


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), PermissionError(13, "Permission denied")])
def test_the_error_keeps_its_kind(error: OSError, tmp_path: Path) -> None:
    named = files._naming(error, tmp_path / "x.csv")
    assert type(named) is type(error) and named.errno == error.errno and named.filename == str(tmp_path / "x.csv")


@pytest.mark.parametrize("where", [".", "folder"])
def test_writing_onto_a_folder_says_it_is_one(tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # save_instance(r, ".") raised "[Errno 16] Device or resource busy: '.'" (the rename's error).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError, match=f"is a folder: give a file's path to write to: '{where}'"):
        so.save_instance(so.generate_round(gpus=16), where)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # nothing written beside it


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_and_a_link_written_through(tmp_path: Path) -> None:
    # The rename replaced whatever was at the path: a FIFO became a regular file, and as root /dev/null did (a
    # tester's finding). A link was replaced by a file and the file it named left as it was.
    instance = so.generate_round(gpus=8, seed=0)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=r"is not a regular file .*pipe\.json"):
        so.save_instance(instance, fifo)
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["pipe.json"]
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    so.save_instance(instance, link)
    assert link.is_symlink() and so.load_instance(real).jobs == instance.jobs
    loop, back = tmp_path / "loop.json", tmp_path / "back.json"
    loop.symlink_to(back)
    back.symlink_to(loop)
    with pytest.raises(OSError, match=r"loop of symbolic links: .*loop\.json"):  # was a bare RuntimeError
        so.save_instance(instance, loop)
