"""The Java command line TLC runs under, tuned for many short runs.

Most of ``verify``'s runs explore a few hundred to a few thousand states: the JVM's
start, the loading and verifying of TLC's classes and the parsing of the spec are most
of their cost.  An application class-data archive of ``tla2tools.jar`` (AppCDS) maps
those classes in ready-made instead; it is made once, by a small model checked with
``-XX:ArchiveClassesAtExit``, and kept next to the jar (or in the user's cache when
that directory is not writable).

The archive is only ever an optimisation: its name carries the identity of the jar and
of the java executable, so an upgrade of either makes a new one; a missing, foreign or
damaged archive makes the JVM fall back to loading the classes itself (``-Xshare`` is
left at ``auto`` and its warnings are silenced), and a failure to make one just means
the runs go without.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

#: The model the archive is made with: a probe of the lock, refuted after 87 states, so
#: that the classes in the archive are the ones parsing the spec, exploring, checking
#: invariants and printing a counterexample load.  (Trained on a small spec of its own,
#: the archive saved a quarter less.)
TRAINING_MODULE = "DistLock"
TRAINING_CONFIG = "ProbeReissued.cfg"

#: Flags every TLC run takes: no shared-memory statistics file, and no JVM warning about
#: an unusable archive among TLC's messages.
BASE_FLAGS = ("-XX:-UsePerfData", "-Xlog:cds*=off")

_made: dict[Path, Path | None] = {}
_lock = threading.Lock()


def _identity(java: str, jar: Path) -> str:
    """What the archive depends on: this java executable and this jar, as installed."""
    exe = shutil.which(java) or java
    parts = []
    for path in (Path(exe).resolve(), jar.resolve()):
        stat = path.stat()
        parts.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _archive_dir(jar: Path) -> Path:
    if os.access(jar.parent, os.W_OK):
        return jar.parent
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "distlock"


def archive_path(java: str, jar: Path) -> Path:
    """Where the class-data archive of this java and jar lives (it may not exist)."""
    return _archive_dir(jar) / f"tla2tools-{_identity(java, jar)}.jsa"


def _make(java: str, jar: Path, spec_dir: Path, target: Path, timeout: float) -> bool:
    if not (spec_dir / TRAINING_CONFIG).is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="distlock-cds-") as tmp:
        work = Path(tmp)
        # Written under a private name and renamed: a concurrent verify sees either no
        # archive or a whole one.
        partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        command = [
            java,
            *BASE_FLAGS,
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-XX:ArchiveClassesAtExit={partial}",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            str(jar),
            "tlc2.TLC",
            "-tool",
            "-workers",
            "1",
            "-metadir",
            str(work / "meta"),
            "-config",
            TRAINING_CONFIG,
            TRAINING_MODULE,
        ]
        try:
            # The probe is refuted (exit 12); the archive is written at exit whatever the
            # verdict, and is all that is wanted from this run.
            subprocess.run(
                command, cwd=spec_dir, capture_output=True, timeout=timeout, check=False
            )
            if not partial.is_file():
                return False
            os.replace(partial, target)
            return True
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            partial.unlink(missing_ok=True)


def class_archive(
    java: str, jar: Path, spec_dir: Path, create: bool = True, timeout: float = 120.0
) -> Path | None:
    """The class-data archive for ``java`` and ``jar``, made on first use with a model of
    ``spec_dir``; ``None`` when there is none and it cannot be made (the runs then start a
    plain JVM)."""
    try:
        target = archive_path(java, jar)
    except OSError:
        return None
    with _lock:
        if target in _made:
            return _made[target]
        found: Path | None = target
        if not target.is_file() and not (
            create and _make(java, jar, spec_dir, target, timeout)
        ):
            found = None
        _made[target] = found
        return found


def archive_flags(archive: Path | None) -> list[str]:
    """The flags that make a JVM map TLC's classes from ``archive`` (none without one)."""
    return [] if archive is None else [f"-XX:SharedArchiveFile={archive}"]
