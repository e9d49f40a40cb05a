"""A confined child process: what a Python pipeline's code can no longer reach, and what it still can.

Each test starts `python -I -c SCRIPT`: the script puts this checkout on sys.path (-I ignores PYTHONPATH), applies
the limits, the parent-death signal, Landlock (read: the interpreter's runtime paths, this checkout and a project
folder; write: a scratch folder; connect: one TCP port the test listens on) and seccomp, as the pipeline child
does, then tries one thing and prints a JSON verdict. The blocked tries also run unconfined first where that is
harmless, so a denial shows the confinement at work, not a missing file or a closed port.

The 'parent' a child aims signals and ptrace at is a sleeper process the tests start, never pytest itself.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from ratui.engine.isolation import ConfinementError, landlock, seccomp
from ratui.engine.isolation.limits import Limits, child_environment

REPO = Path(__file__).resolve().parents[3]
MISSING = "/nonexistent-ratui-confinement-path"
DEFAULT_LIMITS = {"cpu_seconds": 20, "memory_bytes": 1 << 30, "file_bytes": 64 << 20, "open_files": 256}

HARNESS = """\
import json, os, sys
params = json.loads(sys.argv[1])
sys.path.insert(0, params["repo"])
from ratui.engine.isolation import landlock, seccomp
from ratui.engine.isolation.limits import Limits, die_with_parent
{imports}

def probe(p):
{body}

if params["confine"]:
    Limits(**params["limits"]).apply()
    die_with_parent(params["parent"])
    p = params
    LANDLOCK = landlock.restrict(read=[*landlock.runtime_read_paths(), p["repo"], p["project"], p["missing"]],
                                 write=[p["scratch"]], connect_ports=[p["port"]])
    SECCOMP = seccomp.install()
try:
    result = probe(params)
except BaseException as exc:
    print(json.dumps({{"ok": False, "error": type(exc).__name__, "errno": getattr(exc, "errno", None),
                      "message": str(exc)}}), flush=True)
else:
    print(json.dumps({{"ok": True, "result": result}}), flush=True)
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A user's machine in miniature: a home with cloud credentials, a project, a folder beside it, a scratch
    folder, two loopback listeners (the allowed port and another), and a sleeper standing in for the parent."""
    root = tmp_path_factory.mktemp("confinement")
    home = root / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = do-not-leak\n")
    project = root / "work" / "project"
    project.mkdir(parents=True)
    (project / "data.csv").write_text("a,b\n1,2\n")
    sibling = root / "work" / "sibling"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("another project's data\n")
    scratch = root / "work" / "scratch"
    scratch.mkdir()
    allowed, other = socket.socket(), socket.socket()
    for listener in (allowed, other):
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
    # a UNIX socket with a path outside the allowed ones, as the user's ssh-agent or D-Bus session bus has
    (root / "agent").mkdir()
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(root / "agent" / "agent.sock"))
    agent.listen(16)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield {
        "repo": str(REPO), "project": str(project), "scratch": str(scratch), "missing": MISSING,
        "root": str(root), "aws": str(home / ".aws" / "credentials"), "sibling": str(sibling / "secret.txt"),
        "beside": str(root / "work"), "port": allowed.getsockname()[1], "other_port": other.getsockname()[1],
        "agent": str(root / "agent" / "agent.sock"), "sleeper": sleeper.pid, "sleeper_proc": sleeper,
    }
    sleeper.kill()
    sleeper.wait()
    for listener in (allowed, other, agent):
        listener.close()


def run_child(place: dict, body: str, *, confine: bool = True, imports: str = "", limits: dict | None = None,
              **extra) -> subprocess.CompletedProcess:
    params = {k: v for k, v in place.items() if k != "sleeper_proc"}
    params.update(confine=confine, limits=DEFAULT_LIMITS if limits is None else limits, parent=os.getpid(),
                  **extra)
    script = HARNESS.format(imports=imports, body=textwrap.indent(textwrap.dedent(body).strip(), "    "))
    return subprocess.run([sys.executable, "-I", "-c", script, json.dumps(params)], capture_output=True, text=True,
                          timeout=60, env=child_environment(os.environ, Path(place["scratch"])))


def verdict(proc: subprocess.CompletedProcess) -> dict:
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"child ended with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


def confined(place: dict, body: str, **kw) -> dict:
    return verdict(run_child(place, body, **kw))


def denied(outcome: dict, code: int) -> bool:
    return outcome["ok"] is False and outcome["errno"] == code


# --- blocked: files outside the allowed paths (Landlock: EACCES), each also readable or writable unconfined ---

READS = {
    "cloud credentials in the user's home": "open(p['aws']).read()",
    "the environment of the parent": "open(f'/proc/{os.getppid()}/environ', 'rb').read()",
    "a file in a folder beside the project": "open(p['sibling']).read()",
    "/etc/passwd": "open('/etc/passwd').read()",
}


@pytest.mark.parametrize("what", READS)
def test_reading_outside_the_allowed_paths_is_denied(place, what):
    body = f"return len({READS[what]})"
    assert confined(place, body, confine=False)["ok"]
    assert denied(confined(place, body), errno.EACCES)


def test_reading_the_environment_of_process_1_is_denied(place):
    # no unconfined control: whether process 1's environ is readable at all depends on who runs it (in a
    # container its init may hold capabilities the tests lack)
    assert denied(confined(place, "open('/proc/1/environ', 'rb').read()"), errno.EACCES)


@pytest.mark.parametrize("where", ["beside", "project"])
def test_writing_beside_the_project_or_in_it_is_denied(place, where):
    body = "open(os.path.join(p[p['where']], p['name']), 'w').write('x')"
    control = f"control-{where}.txt"
    assert confined(place, body, confine=False, where=where, name=control)["ok"]
    os.unlink(Path(place[where]) / control)
    assert denied(confined(place, body, where=where, name="written.txt"), errno.EACCES)
    assert not (Path(place[where]) / "written.txt").exists()
    # an existing file of the project cannot be changed either
    assert denied(confined(place, "open(os.path.join(p['project'], 'data.csv'), 'a').write('3,4')"), errno.EACCES)
    assert (Path(place["project"]) / "data.csv").read_text() == "a,b\n1,2\n"


# --- blocked: network beyond the allowed TCP port ---

NETWORK = {
    "another loopback TCP port": ("socket.create_connection(('127.0.0.1', p['other_port']), timeout=5).close()",
                                  errno.EACCES),
    "a UDP socket": ("socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()", errno.EPERM),
    "an IPv6 socket": ("socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()", errno.EPERM),
    "an MPTCP socket (Landlock's port rules see TCP only)": (
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close()", errno.EPERM),
    # Landlock does not check connecting to a UNIX socket with a path: seccomp denies socket(AF_UNIX)
    "a UNIX socket with a path (an ssh-agent)": ("socket.socket(socket.AF_UNIX).connect(p['agent'])", errno.EPERM),
    # listen() on an unbound socket binds an ephemeral port on every interface, past Landlock's bind rule
    "listening on a TCP port": ("socket.socket().listen()", errno.EPERM),
}


@pytest.mark.parametrize("what", NETWORK)
def test_network_beyond_the_allowed_port_is_denied(place, what):
    body, code = NETWORK[what]
    unconfined = confined(place, body, confine=False, imports="import socket")
    # MPTCP needs the kernel's support (net.mptcp.enabled); where it is off the denial below is seccomp's anyway
    assert unconfined["ok"] or what.startswith("an MPTCP"), unconfined
    assert denied(confined(place, body, imports="import socket"), code)


# --- blocked: new processes, programs, other processes (seccomp: EPERM) ---

def test_fork_is_denied(place):
    body = """
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    """
    assert confined(place, body, confine=False)["ok"]
    assert denied(confined(place, body), errno.EPERM)


def test_a_subprocess_cannot_start(place):
    body = "subprocess.run(['/bin/true'], check=True)"
    assert confined(place, body, confine=False, imports="import subprocess")["ok"]
    assert denied(confined(place, body, imports="import subprocess"), errno.EPERM)


def test_exec_is_denied(place):
    # unconfined, execv would replace the child and print no verdict: no control here
    assert denied(confined(place, "os.execv('/bin/true', ['true'])"), errno.EPERM)


def test_libc_system_runs_no_shell(place):
    marker = Path(place["scratch"]) / "system-ran"
    body = "return ctypes.CDLL(None).system(f\"touch {p['marker']}\".encode())"
    outcome = confined(place, body, imports="import ctypes", marker=str(marker))
    assert outcome["ok"] and outcome["result"] != 0  # 127 << 8: the shell could not be started
    assert not marker.exists()


def test_ptrace_of_the_parent_is_denied(place):
    body = """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, p['sleeper'], None, None) == -1:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), 'ptrace')
    """
    assert denied(confined(place, body, imports="import ctypes"), errno.EPERM)
    assert psutil.Process(place["sleeper"]).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


def test_signals_cannot_reach_the_parent(place):
    assert denied(confined(place, "os.kill(p['sleeper'], signal.SIGTERM)", imports="import signal"), errno.EPERM)
    assert place["sleeper_proc"].poll() is None


# --- blocked: resource exhaustion ends cleanly ---

def test_a_thread_bomb_ends_with_an_error(place):
    body = """
    hold, count = threading.Event(), 0
    try:
        while True:
            threading.Thread(target=hold.wait, daemon=True).start()
            count += 1
    except RuntimeError as exc:
        return {'threads': count, 'error': str(exc)}
    """
    outcome = confined(place, body, imports="import threading")
    assert outcome["ok"] and outcome["result"]["threads"] > 8, outcome
    assert "can't start new thread" in outcome["result"]["error"]


def test_a_memory_bomb_gets_memory_error(place):
    outcome = confined(place, "bytearray(4 << 30)")
    assert outcome["ok"] is False and outcome["error"] == "MemoryError", outcome


def test_a_busy_loop_ends_at_the_cpu_limit(place):
    proc = run_child(place, "while True: pass", limits={**DEFAULT_LIMITS, "cpu_seconds": 1})
    assert proc.returncode == -signal.SIGXCPU, (proc.returncode, proc.stdout, proc.stderr)


def test_a_file_beyond_the_size_limit_fails_to_write(place):
    body = "open(os.path.join(p['scratch'], 'big.bin'), 'wb').write(bytes(2 << 20))"
    outcome = confined(place, body, limits={**DEFAULT_LIMITS, "file_bytes": 1 << 20})
    assert denied(outcome, errno.EFBIG), outcome


# --- still works ---

def test_threads_start_and_join(place):
    body = """
    done = []
    threads = [threading.Thread(target=done.append, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(done)
    """
    assert confined(place, body, imports="import threading") == {"ok": True, "result": list(range(8))}


def test_reading_a_project_file(place):
    assert confined(place, "return open(os.path.join(p['project'], 'data.csv')).read()") == {
        "ok": True, "result": "a,b\n1,2\n"}


def test_writing_in_scratch(place):
    body = """
    folder = os.path.join(p['scratch'], 'out')
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'part.txt'), 'w') as fh:
        fh.write('x')
    os.replace(os.path.join(folder, 'part.txt'), os.path.join(p['scratch'], 'final.txt'))
    with tempfile.NamedTemporaryFile(delete=True) as tmp:  # TMPDIR is the scratch folder
        where = os.path.dirname(tmp.name)
    return [open(os.path.join(p['scratch'], 'final.txt')).read(), where]
    """
    assert confined(place, body, imports="import tempfile") == {"ok": True, "result": ["x", place["scratch"]]}


def test_connecting_to_the_allowed_port(place):
    body = "socket.create_connection(('127.0.0.1', p['port']), timeout=5).close()"
    assert confined(place, body, imports="import socket")["ok"]


def test_pyarrow_writes_and_reads_parquet_in_scratch(place):
    # imported after confinement, as a pipeline's module does: from the allowed read paths
    body = """
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})
    path = os.path.join(p['scratch'], 't.parquet')
    pq.write_table(table, path)
    return pq.read_table(path).to_pydict()
    """
    assert confined(place, body) == {"ok": True, "result": {"k": ["a", "b", "a"], "v": [1, 2, 3]}}


def test_pandas_groupby(place):
    body = """
    import pandas as pd
    frame = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})
    return frame.groupby('k')['v'].sum().to_dict()
    """
    assert confined(place, body) == {"ok": True, "result": {"a": 4, "b": 2}}


def test_unix_socketpair(place):
    body = """
    a, b = socket.socketpair()
    a.sendall(b'ping')
    return b.recv(4).decode()
    """
    assert confined(place, body, imports="import socket") == {"ok": True, "result": "ping"}


def test_standard_library_imports(place):
    body = """
    import datetime, decimal, json
    return json.dumps([str(decimal.Decimal('1.10') * 2), datetime.date(2024, 2, 29).isoformat()])
    """
    assert confined(place, body) == {"ok": True, "result": '["2.20", "2024-02-29"]'}


# --- what the confinement reports, how it degrades, what it refuses ---

def test_landlock_abi_is_a_number():
    assert isinstance(landlock.abi(), int) and landlock.abi() >= 0


def test_restrict_skips_a_missing_path_and_says_what_it_covered(place):
    body = "return [LANDLOCK.describe(), LANDLOCK.net, LANDLOCK.scoped, LANDLOCK.skipped, SECCOMP]"
    level = min(landlock.abi(), landlock.KNOWN_ABI)
    assert confined(place, body) == {
        "ok": True, "result": [f"landlock-abi{level}", level >= 4, level >= 6, [MISSING], "seccomp"]}


def test_restrict_refuses_while_another_thread_runs(place):
    # a thread that runs already would stay unconfined (Landlock confines the calling thread and what it starts)
    body = """
    hold = threading.Event()
    threading.Thread(target=hold.wait, daemon=True).start()
    try:
        landlock.restrict(read=[p['project']])
    finally:
        hold.set()
    """
    outcome = confined(place, body, confine=False, imports="import threading")
    assert outcome["ok"] is False and outcome["error"] == "ConfinementError", outcome
    assert "other thread" in outcome["message"]


def test_seccomp_refuses_another_architecture(place):
    other = "aarch64" if os.uname().machine == "x86_64" else "x86_64"
    outcome = confined(place, f"seccomp.install({other!r})", confine=False)
    assert outcome["ok"] is False and outcome["error"] == "ConfinementError", outcome


def test_unix_sockets_can_be_allowed(place):
    body = """
    landlock.restrict(read=landlock.runtime_read_paths())
    seccomp.install(unix_sockets=True)
    socket.socket(socket.AF_UNIX).close()
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except PermissionError:
        return 'UNIX socket made, UDP still denied'
    """
    assert confined(place, body, confine=False, imports="import socket") == {
        "ok": True, "result": "UNIX socket made, UDP still denied"}


def test_the_filters_of_both_architectures_assemble():
    for arch in seccomp.SYSCALLS:
        program = seccomp.build_filter(arch, 1234)
        assert 0 < len(program) < 4096
    with pytest.raises(ConfinementError):
        seccomp.build_filter("riscv64", 1234)


def test_a_child_whose_parent_is_gone_ends_at_once(place):
    proc = run_child(place, "return 'still running'", confine=False,
                     imports="die_with_parent(os.getppid() + 1000000)")
    assert proc.returncode == -signal.SIGKILL and proc.stdout == ""


def test_a_child_dies_with_its_parent(place):
    # an intermediate process starts a child that asks to die with it, then ends without waiting for it
    script = textwrap.dedent("""\
        import os, subprocess, sys
        child = subprocess.Popen([sys.executable, '-I', '-c', 'import os, sys, time; sys.path.insert(0, sys.argv[1]);'
                                  'from ratui.engine.isolation.limits import die_with_parent;'
                                  'die_with_parent(int(sys.argv[2])); print("ready", flush=True); time.sleep(600)',
                                  sys.argv[1], str(os.getpid())], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == 'ready\\n'
        print(child.pid, flush=True)
        os._exit(0)
        """)
    proc = subprocess.run([sys.executable, "-I", "-c", script, str(REPO)], capture_output=True, text=True,
                          timeout=60)
    orphan = psutil.Process(int(proc.stdout))
    try:
        orphan.wait(timeout=30)  # re-parented to init, which reaps it
    except psutil.TimeoutExpired:
        assert orphan.status() == psutil.STATUS_ZOMBIE  # killed; a parent that does not reap leaves a zombie


def test_limits_only_lower(place):
    body = """
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))
    Limits(open_files=1000).apply()
    return resource.getrlimit(resource.RLIMIT_NOFILE)
    """
    assert confined(place, body, confine=False) == {"ok": True, "result": [100, 100]}


def test_the_child_environment_is_an_allow_list(tmp_path):
    base = {"AWS_SECRET_ACCESS_KEY": "k", "AWS_PROFILE": "p", "GITHUB_TOKEN": "t", "SPARK_HOME": "/s",
            "JAVA_HOME": "/j", "PYTHONPATH": "/x", "PATH": "/home/u/bin:/usr/bin", "HOME": "/home/u",
            "LANG": "fr_FR.UTF-8", "LC_TIME": "de_DE.UTF-8", "TZ": "Europe/Paris", "TMPDIR": "/var/tmp"}
    assert child_environment(base, tmp_path) == {
        "LANG": "fr_FR.UTF-8", "LC_TIME": "de_DE.UTF-8", "TZ": "Europe/Paris", "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "PYTHONIOENCODING": "utf-8", "MALLOC_ARENA_MAX": "2"}


def test_limits_reject_a_negative_value():
    with pytest.raises(ConfinementError):
        Limits(cpu_seconds=-1).apply()


@pytest.mark.parametrize("errno_name", ["ENOSYS", "EOPNOTSUPP", "EPERM"])
def test_without_landlock_confined_and_jail_fall_back_to_process(monkeypatch, errno_name):
    """A kernel without Landlock (not built in: ENOSYS; not enabled at boot: EOPNOTSUPP; refused by a container's
    seccomp profile: EPERM) has ABI 0, and confined (and jail) give `process`, saying why; isolation_required
    refuses instead (RAT-ISO-001) before anything runs."""
    import errno

    from ratui.engine.errors import RatuiError
    from ratui.engine.isolation import landlock, levels

    def no_landlock(number, *args):
        raise OSError(getattr(errno, errno_name), "landlock_create_ruleset")

    monkeypatch.setattr(landlock, "syscall", no_landlock)
    monkeypatch.setattr(levels, "bwrap", lambda: "/usr/bin/bwrap")  # jail is not refused for want of bwrap
    assert landlock.abi() == 0
    reason = "this kernel has no Landlock (it needs Linux 5.13 with landlock among its LSMs)"
    for asked in ("confined", "jail"):
        got = levels.decide(asked, spark_is_local=True, tables_on_disk=True, required=False)
        assert (got.requested, got.level, got.reason) == (asked, "process", reason)
        assert got.isolated and "process" in got.describe() and asked in got.describe()
        with pytest.raises(RatuiError) as refused:
            levels.decide(asked, spark_is_local=True, tables_on_disk=True, required=True, file="p.py")
        assert refused.value.code == "RAT-ISO-001" and "Landlock" in refused.value.message
    assert levels.decide("process", spark_is_local=True, tables_on_disk=True, required=True).level == "process"
