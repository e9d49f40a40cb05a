"""The warm engine's parts that need no JVM: its messages and the descriptors they carry, the routing of each
command's prints (from every thread it starts), the privacy of the engines' folder, and the fingerprint that tells
an engine from the one a command would start now."""

from __future__ import annotations

import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ratui.engine.errors import RatuiError
from ratui.warm import place as places, stdio
from ratui.warm.wire import Reader, WireError, send


def test_messages_arrive_whole_in_order_with_the_descriptors_they_carry(tmp_path):
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    target = tmp_path / "out.txt"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    big = {"command": ["run"], "env": {f"V{i}": "x" * 100 for i in range(2000)}}  # over one read's 64 KiB

    def sender() -> None:
        send(left, big, [fd])
        send(left, {"signal": 2})
        send(left, {"signal": 15})  # two at once in the stream: read one by one

    sending = threading.Thread(target=sender)
    sending.start()
    reader = Reader(right)
    first, fds = reader.next(max_fds=3)
    assert first == big and len(fds) == 1
    os.write(fds[0], b"through the passed descriptor")
    os.close(fds[0])
    os.close(fd)
    assert target.read_text() == "through the passed descriptor"
    assert reader.next() == ({"signal": 2}, [])
    assert reader.next() == ({"signal": 15}, [])
    sending.join()
    left.close()
    assert reader.next() == (None, [])


def test_a_message_that_is_not_one_is_refused():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    left.sendall(b"\x00\x00\x00\x05[1,2]")
    with pytest.raises(WireError):
        Reader(right).next()
    left2, right2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    left2.sendall(b"\xff\xff\xff\xff")
    with pytest.raises(WireError, match="bytes"):
        Reader(right2).next()


def test_each_command_prints_to_its_own_streams_from_every_thread_it_starts(tmp_path):
    import io


    log = io.StringIO()
    uninstall = stdio.install(log)
    try:
        _two_commands_at_once(log)
    finally:
        uninstall()


def _two_commands_at_once(log) -> None:
    import io
    import sys

    outs = [io.StringIO(), io.StringIO()]
    barrier = threading.Barrier(2)

    def command(n: int) -> None:
        streams = stdio.Streams(io.StringIO(), outs[n], io.StringIO())
        with stdio.serving(streams):
            barrier.wait()
            print(f"main thread of {n}")
            with ThreadPoolExecutor(2) as pool:  # a pool started by the command works for it
                list(pool.map(lambda i: print(f"worker {i} of {n}"), range(3)))

    threads = [threading.Thread(target=command, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("not a command's", file=sys.stderr)
    for n in (0, 1):
        lines = sorted(outs[n].getvalue().splitlines())
        assert lines == sorted([f"main thread of {n}"] + [f"worker {i} of {n}" for i in range(3)])
    assert "not a command's" in log.getvalue() and "worker" not in log.getvalue()


def test_the_engines_folder_must_be_private(tmp_path, monkeypatch):
    folder = tmp_path / "engines"
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(folder))
    assert places.engines_folder() == folder
    assert folder.stat().st_mode & 0o777 == 0o700  # made private
    os.chmod(folder, 0o775)
    with pytest.raises(RatuiError) as caught:
        places.engines_folder()
    assert caught.value.code == "RAT-ENG-001" and "mode 0775" in caught.value.message
    os.chmod(folder, 0o700)
    link = tmp_path / "link"
    link.symlink_to(folder)
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(link))
    with pytest.raises(RatuiError, match="a link"):
        places.engines_folder()


def test_one_place_per_project_whatever_path_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(tmp_path / "engines"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "a")
    a, alias, b = (places.place_of(tmp_path / n) for n in ("a", "alias", "b"))
    assert a.socket == alias.socket != b.socket


def test_a_socket_in_a_folder_too_deep_for_a_socket_address_is_still_reached(tmp_path):
    deep = tmp_path.joinpath(*["a_rather_long_folder_name"] * 6)  # pytest's own tmp under xdist gets close
    deep.mkdir(parents=True)
    path = deep / "0123456789abcdef0123.sock"
    assert len(str(path)) > 107  # more than an AF_UNIX address holds
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with places.reachable(path) as name:
        listener.bind(name)
    listener.listen(1)
    assert path.exists()  # bound in the folder itself
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with places.reachable(path) as name:
        client.connect(name)
    conn, _ = listener.accept()
    send(client, {"hello": 1})
    assert Reader(conn).next() == ({"hello": 1}, [])
    for s in (client, conn, listener):
        s.close()


def test_the_fingerprint_follows_the_environment_and_names_no_value():
    env = {"HOME": "/root", "AWS_SECRET_ACCESS_KEY": "abc"}
    # a terminal's own variables (tmux sets SHELL for its panes where the shell that started it may have none)
    same = {**env, "TERM": "xterm", "COLUMNS": "80", "PWD": "/elsewhere", "SHELL": "/bin/zsh"}
    changed = {**env, "AWS_SECRET_ACCESS_KEY": "xyz"}
    assert places.fingerprint(env) == places.fingerprint(same)
    assert places.fingerprint(env) != places.fingerprint(changed)
    assert places.differences(env, changed) == ["AWS_SECRET_ACCESS_KEY"]
    assert places.differences(env, same) == []


def test_the_engines_log_is_rotated_one_older_file_kept_and_its_recent_lines_still_shown(tmp_path, capsys):
    from ratui.cli.warm import _logs
    from ratui.warm import logfile

    log = tmp_path / "key.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the engine's stderr
    try:
        assert logfile.writes_to(log, fd)

        def write(first: int, count: int) -> None:
            for n in range(first, first + count):
                os.write(fd, f"line {n:04d} {'x' * 40}\n".encode())

        write(0, 100)  # about 5 KB
        assert not logfile.rotate(log, (fd,), max_bytes=100_000)  # under the bound: as it is
        assert logfile.rotate(log, (fd,), max_bytes=2_000)
        write(100, 10)  # the engine's next lines: in the new file
        assert logfile.older(log).read_text().splitlines()[-1].startswith("line 0099")
        assert log.read_text().splitlines()[0].startswith("line 0100") and log.stat().st_size < 2_000
        assert log.stat().st_mode & 0o777 == 0o600
        assert logfile.recent_lines(log, 12)[0].startswith("line 0098")  # across both files, oldest first

        write(110, 100)
        assert logfile.rotate(log, (fd,), max_bytes=2_000)  # again: the older one replaced, never a third
        assert sorted(p.name for p in tmp_path.iterdir()) == ["key.log", "key.log.1"]
        assert logfile.older(log).read_text().splitlines()[0].startswith("line 0100")
        write(210, 1)
        assert _logs(log, 3) == 0
        assert [line[:9] for line in capsys.readouterr().out.splitlines()] == ["line 0208", "line 0209", "line 0210"]
    finally:
        os.close(fd)
    assert logfile.recent_lines(tmp_path / "other.log", 5) is None


def test_a_wedged_engines_wait_can_be_set_and_is_no_reason_to_replace_an_engine(monkeypatch):
    from ratui.warm import client

    monkeypatch.setenv("RATUI_ENGINE_ANSWER_SECONDS", "2.5")
    assert client.answer_seconds() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("RATUI_ENGINE_ANSWER_SECONDS", bad)
        assert client.answer_seconds() == client.ANSWER_SECONDS
    env = {"HOME": "/root"}
    assert places.fingerprint(env) == places.fingerprint({**env, "RATUI_ENGINE_ANSWER_SECONDS": "3"})


def test_an_engine_past_its_bounds_retires_and_the_next_command_is_told_once(tmp_path, monkeypatch):
    from ratui.warm import host as hosts

    monkeypatch.setenv("RATUI_ENGINE_DIR", str(tmp_path / "engines"))
    (tmp_path / "proj").mkdir()
    place = places.place_of(tmp_path / "proj")
    engine = hosts.Host(place, {"HOME": "/root"})
    engine.max_commands, engine.served_count = 3, 2
    engine.renew_if_due()
    assert engine.retired is None and place.take_note() is None  # within its bounds: serves on
    assert hosts.tree_rss() > 0

    engine.served_count = 3
    engine.renew_if_due()
    assert engine.retired == "renewing itself: it served 3 commands (engine.max_commands 3)"
    note = place.take_note()
    assert note == {"pid": os.getpid(), "why": "it served 3 commands (engine.max_commands 3)"}
    assert place.take_note() is None  # said once

    past_memory = hosts.Host(place, {"HOME": "/root"})
    past_memory.max_memory_mb = 1  # this test's own process uses more
    past_memory.renew_if_due()
    assert "engine.max_memory_mb 1)" in place.take_note()["why"] and past_memory.retired.startswith("renewing")


def test_the_engines_heap_is_collected_between_commands_never_under_one():
    """The policy of ratui/warm/heap.py: a full collection after a command once the engine has been idle for
    IDLE_SECONDS, and after every EVERY_COMMANDS commands when they keep coming, never while a command runs, one at
    a time. (The collection itself is the JVM's: tests/cli/test_warm_bounds.py sees it in a real engine's log.)"""
    from ratui.warm import heap

    asked = threading.Semaphore(0)
    release = threading.Event()
    lines: list[str] = []

    def collect() -> bool:
        asked.release()
        release.wait(10)
        return True

    collector = heap.Collector(collect, lines.append)
    collector.idle(in_flight=0, idle_seconds=60)
    assert not asked.acquire(timeout=0.2)  # no command since the start: nothing to give back
    collector.command_ended(in_flight=0)
    collector.idle(in_flight=1, idle_seconds=60)  # another command runs
    collector.idle(in_flight=0, idle_seconds=heap.IDLE_SECONDS / 2)  # not idle long enough
    assert not asked.acquire(timeout=0.2)
    collector.idle(in_flight=0, idle_seconds=heap.IDLE_SECONDS)
    assert asked.acquire(timeout=10)
    for _ in range(heap.EVERY_COMMANDS * 2):  # commands keep coming while it collects: no second one at once
        collector.command_ended(in_flight=0)
    assert not asked.acquire(timeout=0.2)
    release.set()
    wait_until(lambda: not collector.running)
    assert collector.collections == 1 and lines and "full collection" in lines[0]
    release.clear()
    collector.command_ended(in_flight=0)  # the commands that came meanwhile count: the next quiet moment collects
    assert asked.acquire(timeout=10)
    release.set()
    wait_until(lambda: not collector.running)

    release.clear()
    for n in range(heap.EVERY_COMMANDS - 1):  # a script's commands back to back
        collector.command_ended(in_flight=n % 2)
    assert not asked.acquire(timeout=0.2)
    collector.command_ended(in_flight=1)  # the tenth, but another is in flight: not yet
    assert not asked.acquire(timeout=0.2)
    collector.command_ended(in_flight=0)
    assert asked.acquire(timeout=10)
    release.set()
    wait_until(lambda: not collector.running)
    assert collector.collections == 3


def wait_until(condition, bound: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(bound / 0.05)):
        if condition():
            return
        done.wait(0.05)
    raise AssertionError(f"not within {bound:.0f} s")
