"""The state database module's import of sqlite-utils: quick (no pandas, no numpy), and harmless to other threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_opening_the_state_module_does_not_import_pandas_or_numpy():
    out = _python("""
        import sys
        import ratui.engine.state.db
        print(sorted(name for name in ("pandas", "numpy") if name in sys.modules))
        import pandas  # and whatever imports them later gets them
        print(pandas.DataFrame({"a": [1]}).shape)
    """)
    assert out.splitlines() == ["[]", "(1, 1)"]


def test_while_sqlite_utils_is_imported_other_threads_can_import_numpy():
    """The hiding applies to the importing thread only: a Spark or Arrow thread importing numpy at that moment
    must get it, not an ImportError (it did while the hiding was a None in sys.modules)."""
    out = _python("""
        import sys, threading
        from ratui.engine.state.db import _HiddenFromThisThread

        assert "numpy" not in sys.modules
        finder = _HiddenFromThisThread(("numpy",))
        sys.meta_path.insert(0, finder)
        try:
            try:
                import numpy.linalg
                print("hidden thread: imported")
            except ImportError:
                print("hidden thread: refused")
            seen = []

            def other() -> None:
                import numpy
                seen.append(int(numpy.arange(4).sum()))

            worker = threading.Thread(target=other)
            worker.start()
            worker.join(60)
            print(f"other thread: {seen}")
        finally:
            sys.meta_path.remove(finder)
    """)
    assert out.splitlines() == ["hidden thread: refused", "other thread: [6]"]
