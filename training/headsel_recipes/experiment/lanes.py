# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The lanes that share an experiment's runs: a lane claims a run before training it, and no two lanes hold one run.

A claim is the file `lane.claim` in the run folder, created exclusively, reading `host pid lane-id boot-id start`:
the holder's host name, process id, lane id, the machine's boot id (`/proc/sys/kernel/random/boot_id`; two machines
can share a host name) and the process's start time (`/proc/<pid>/stat`; a pid is reused once its process ends); `-`
where the system does not say. While a lane trains a run it touches its claim every [`HEARTBEAT_SECONDS`]: the
claim's modification time is the holder's heartbeat.

Whether a claim is stale (its lane stopped, so another lane takes the run over), [`is_live`]:

* from this machine and boot, with its process start time: stale exactly when that process no longer runs (no such
  pid, or a pid reused by a process that started at another time); no timeout;
* from another machine, another boot, or in the older `host pid lane-id` format (no boot id, no start time): stale
  when neither the claim (the heartbeat) nor anything in its run folder (checkpoints, logs) changed for
  [`STALE_SECONDS`]; an older-format claim of this host whose pid does not run is stale at once. The clocks of
  machines sharing a folder must agree within a few minutes of that margin.

Every removal of a claim, a takeover of a stale one or a lane releasing its own, happens under the run's lock
(`lane.claim.lock`, created exclusively and held for a few file operations): the check and the removal it decides are
one step for the other lanes, so two lanes that judged the same claim stale cannot both take it over, and a lane
never removes a claim it does not hold. A lock left by a lane that stopped while holding it is judged like a claim,
with [`LOCK_STALE_SECONDS`] for the timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..results_keys import RUN_CONFIG_FILE

logger = logging.getLogger("headsel_recipes.experiment")

CLAIM_FILE = "lane.claim"
LOCK_FILE = f"{CLAIM_FILE}.lock"
#: How often a lane holding a run touches its claim.
HEARTBEAT_SECONDS = 60.0
#: A claim that cannot be checked by its process is stale once neither it nor its run folder changed this long: ten
#: missed heartbeats, and a margin for clocks that differ between machines.
STALE_SECONDS = 600.0
#: A lock is held for a few file operations: one this old was left by a lane that stopped while holding it.
LOCK_STALE_SECONDS = 60.0
UNKNOWN = "-"


class HasFolder(Protocol):
    """A run, as far as claims are concerned: its folder."""

    output_dir: Path


@dataclass(frozen=True)
class Claim:
    """A claim (or lock) file as read: its holder and the file's modification time (the holder's heartbeat)."""

    text: str
    host: str
    pid: int | None
    lane: str
    boot: str
    start: str
    touched: float

    @classmethod
    def read(cls, path: Path) -> Claim | None:
        """The claim at `path`; `None` when there is none. A file of neither format has no holder to check."""
        try:
            text, touched = path.read_text(), path.stat().st_mtime
        except FileNotFoundError:
            return None
        fields = text.split()
        if len(fields) == 3:  # the format before boot ids and start times
            fields += [UNKNOWN, UNKNOWN]
        if len(fields) != 5 or not fields[1].isdigit():
            return cls(text, UNKNOWN, None, UNKNOWN, UNKNOWN, UNKNOWN, touched)
        host, pid, lane, boot, start = fields
        return cls(text, host, int(pid), lane, boot, start, touched)

    def describe(self) -> str:
        """Who holds the run and when it last showed life, for the log."""
        return (f"lane {self.lane} on {self.host}, pid {self.pid}, last heartbeat {time.time() - self.touched:.0f} s "
                "ago")


def boot_id() -> str:
    """This machine's boot id (`-` where the system has none)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or UNKNOWN
    except OSError:
        return UNKNOWN


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot); `None` when no such process runs, `-` when it runs but
    the system does not say when it started."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
    except OSError:
        pass
    else:
        return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name before ")" may hold spaces
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return UNKNOWN


def last_change(folder: Path) -> float:
    """The newest modification time in a run folder (0 when empty), leaving out the claim and lock files and the
    run's `run_config.json`, which every lane rewrites when it starts: the run's own progress."""
    newest = 0.0
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.startswith((CLAIM_FILE, RUN_CONFIG_FILE)):
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, os.stat(os.path.join(root, name)).st_mtime)
    return newest


def is_live(claim: Claim, folder: Path | None, stale_seconds: float = STALE_SECONDS) -> bool:
    """Whether a claim's (or lock's) holder may still be working (the rule: the module docstring); `folder`: the
    run folder whose changes count as the holder's progress (`None` for a lock: only its own age counts)."""
    here = claim.host == socket.gethostname() and claim.boot in (UNKNOWN, boot_id())
    if here and claim.pid is not None:
        running = process_start(claim.pid)
        if running is None:
            return False
        if claim.boot != UNKNOWN and claim.start != UNKNOWN and running != UNKNOWN:
            return running == claim.start
    progress = last_change(folder) if folder is not None else 0.0
    return time.time() - max(claim.touched, progress) < stale_seconds


@dataclass(frozen=True)
class Lane:
    """One `train_all` call among several training the same experiment (see the module docstring)."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    heartbeat_seconds: float = HEARTBEAT_SECONDS

    def text(self) -> str:
        """This lane's claim: `host pid lane-id boot-id start`."""
        return (f"{socket.gethostname()} {os.getpid()} {self.id} {boot_id()} "
                f"{process_start(os.getpid()) or UNKNOWN}\n")

    def claim(self, run: HasFolder) -> bool:
        """Claim the run (taking over a stale claim); whether this lane now holds it."""
        run.output_dir.mkdir(parents=True, exist_ok=True)
        if self.create(run.output_dir / CLAIM_FILE):
            return True
        return not self.held_by_another(run) and self.take_over(run)

    def create(self, path: Path) -> bool:
        """Create `path` holding this lane's claim, exclusively; whether this lane created it. Written beside it, then
        linked into place: it appears whole or not at all (`os.link` refuses an existing name), so no lane ever reads
        a half-written claim."""
        draft = path.with_name(f"{path.name}.{self.id}")
        draft.write_text(self.text())
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        finally:
            draft.unlink(missing_ok=True)
        return True

    def take_over(self, run: HasFolder) -> bool:
        """Claim the run under its lock, replacing a stale claim: the claim is judged again there, since another lane
        may have taken it over since this one looked. Whether this lane now holds the run."""
        path = run.output_dir / CLAIM_FILE
        with self.locked(run, wait=False) as locked:
            if not locked:
                return False
            held = Claim.read(path)
            if held is not None:
                if held.lane == self.id or is_live(held, run.output_dir):
                    return held.lane == self.id
                logger.warning("%s: taking over the stale claim of %s", run.output_dir, held.describe())
                path.unlink(missing_ok=True)
            return self.create(path)

    def release(self, run: HasFolder) -> None:
        """Remove this lane's claim of the run; a claim of another lane (one that took the run over) stays."""
        path = run.output_dir / CLAIM_FILE
        with self.locked(run, wait=True):
            held = Claim.read(path)
            if held is not None and held.lane == self.id:
                path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def locked(self, run: HasFolder, wait: bool) -> Iterator[bool]:
        """Hold the run's lock for the block; yields whether this lane got it (with `wait`, always: it waits for
        the holder, or until the lock is stale and broken)."""
        lock = run.output_dir / LOCK_FILE
        while not (got := self.create(lock) or self.break_stale_lock(run)) and wait:
            time.sleep(0.01)
        try:
            yield got
        finally:
            held = Claim.read(lock) if got else None
            if held is not None and held.lane == self.id:
                lock.unlink()

    def break_stale_lock(self, run: HasFolder) -> bool:
        """Remove the run's lock when its holder stopped while holding it, then take it; whether this lane got it.
        Moved aside first and compared with the stale lock judged, so a lock another lane took meanwhile is put
        back."""
        lock = run.output_dir / LOCK_FILE
        held = Claim.read(lock)
        if held is None or is_live(held, None, LOCK_STALE_SECONDS):
            return False
        aside = lock.with_name(f"{LOCK_FILE}.stale.{self.id}")
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            return False
        try:
            if aside.read_text() != held.text:
                with contextlib.suppress(FileExistsError):
                    os.link(aside, lock)
                return False
        finally:
            aside.unlink()
        logger.warning("%s: removed the stale lock of %s", run.output_dir, held.describe())
        return self.create(lock)

    def holder(self, run: HasFolder) -> Claim | None:
        """The claim of another live lane holding the run; `None` when none does."""
        held = Claim.read(run.output_dir / CLAIM_FILE)
        if held is None or held.lane == self.id or not is_live(held, run.output_dir):
            return None
        return held

    def held_by_another(self, run: HasFolder) -> bool:
        """Whether another live lane holds the run."""
        return self.holder(run) is not None

    @contextlib.contextmanager
    def holding(self, run: HasFolder) -> Iterator[None]:
        """Hold a claimed run for the block: touch the claim every `heartbeat_seconds` (the heartbeat lanes on other
        machines read), release it at the end."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_seconds):
                held = Claim.read(run.output_dir / CLAIM_FILE)
                if held is not None and held.lane == self.id:
                    with contextlib.suppress(FileNotFoundError):
                        os.utime(run.output_dir / CLAIM_FILE)

        heart = threading.Thread(target=beat, name=f"lane {self.id} heartbeat", daemon=True)
        heart.start()
        try:
            yield
        finally:
            stop.set()
            heart.join()
            self.release(run)
