"""Report a training job's progress to the gavel-slurm collector.

The collector on each node measures how fast each job trains (steps per
second) on the GPU type it runs on, and the scheduler uses those rates to
place jobs. A job tells its progress by appending lines

    STEPS UNIX_TIME

to the file named by $GAVEL_PROGRESS_FILE (set by the site's TaskProlog),
STEPS being the cumulative step count since the job first started.

    from gavel_progress import Progress

    with Progress(start_step=resumed_step) as progress:
        for batch in progress.wrap(loader):
            train_step(batch)

Without $GAVEL_PROGRESS_FILE (on a laptop, or a cluster without the
collector) everything here does nothing, so a training script needs no
switch. Nothing here can stop training: a file that cannot be written is
reported once on stderr and then left alone.

Preemption: with the daemon's preempt=checkpoint mode a job gets SIGUSR1
some time before it is requeued. Progress(checkpoint=save) saves and exits
at the next step boundary:

    with Progress(checkpoint=lambda: save(model, optimizer, progress.steps)) as progress:
        ...

The module has no dependency beyond the standard library.
"""

import os
import signal
import sys
import time

__all__ = ["Progress", "track"]

ENV_FILE = "GAVEL_PROGRESS_FILE"


def _is_main_rank(environ):
    """Only one process of a job should write: several writers would
    interleave their counts. The launchers' rank variables tell which one;
    a process that sets none of them is alone."""
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        value = environ.get(name)
        if value is not None and value.strip() != "":
            return value.strip() == "0"
    return True


class Progress:
    """Counts training steps and appends them to the progress file.

    A line is written when `every_steps` steps passed since the last one,
    or `every_seconds` seconds did (whichever comes first; None turns that
    trigger off), at the first step, and at close. The collector reports
    every 30 s by default, so a line every 10 s gives it a rate in each
    interval.

    path: the file; default $GAVEL_PROGRESS_FILE. None or "" disables.
    start_step: the count to go on from (the step a checkpoint was saved
        at), so that counts stay cumulative across requeues.
    write: whether this process writes; default: rank 0 only.
    fsync: also fsync each line. Off by default: the collector reads
        through the page cache, and the file lives in /run.
    checkpoint: a function called on `signum` (SIGUSR1, the daemon's
        warning signal for preempt=checkpoint); then the process exits
        with `exit_code` (0: the daemon requeues the job). It runs at the
        next step boundary, not inside the signal handler, so that it sees
        a consistent model, unless `immediate` is true (for loops that
        step rarely).
    """

    def __init__(self, path=None, every_steps=None, every_seconds=10.0, start_step=0,
                 write=None, fsync=False, checkpoint=None, signum=signal.SIGUSR1,
                 exit_code=0, immediate=False, clock=time.time, environ=None):
        environ = os.environ if environ is None else environ
        if path is None:
            path = environ.get(ENV_FILE, "")
        if write is None:
            write = _is_main_rank(environ)
        if every_steps is not None and every_steps < 1:
            raise ValueError("every_steps must be at least 1")
        if every_seconds is not None and every_seconds <= 0:
            raise ValueError("every_seconds must be positive")
        if start_step < 0:
            raise ValueError("start_step must not be negative")
        self.path = path if (path and write) else ""
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.fsync = fsync
        self.steps = int(start_step)
        self._clock = clock
        self._file = None
        self._failed = False
        self._written_steps = None
        self._written_at = None
        self._checkpoint = checkpoint
        self._exit_code = exit_code
        self._immediate = immediate
        self._signum = signum
        self._signalled = False
        self._previous_handler = None
        if checkpoint is not None:
            self._previous_handler = signal.signal(signum, self._on_signal)

    # Counting.

    def step(self, n=1):
        """Count n more steps; write a line if one is due; save and exit
        if the preemption signal came."""
        self.steps += n
        if self._due():
            self._write()
        if self._signalled:
            self._checkpoint_and_exit()

    def set(self, steps):
        """Set the cumulative count (after resuming, say)."""
        if steps < 0:
            raise ValueError("steps must not be negative")
        self.steps = int(steps)
        if self._due():
            self._write()

    def wrap(self, iterable):
        """Yield the items of iterable, counting a step after each one."""
        for item in iterable:
            yield item
            self.step()

    def flush(self):
        """Write the current count now."""
        self._write()

    def close(self):
        """Write the last count, close the file and give the signal back
        its previous handler."""
        if self._written_steps != self.steps:
            self._write()
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
        if self._previous_handler is not None:
            signal.signal(self._signum, self._previous_handler)
            self._previous_handler = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    # Writing.

    def _due(self):
        if not self.path or self._failed:
            return False
        if self._written_steps is None:
            return True
        if self.every_steps is not None and self.steps - self._written_steps >= self.every_steps:
            return True
        if self.every_seconds is not None and self._clock() - self._written_at >= self.every_seconds:
            return True
        return False

    def _write(self):
        if not self.path or self._failed:
            return
        now = self._clock()
        try:
            if self._file is None:
                # Append only: the collector keeps its place in the file,
                # and a truncated file means a new run to it.
                self._file = open(self.path, "a", encoding="ascii")
            self._file.write("%d %.3f\n" % (self.steps, now))
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())
        except OSError as err:
            self._failed = True
            sys.stderr.write("gavel_progress: cannot write %s (%s); progress is no longer reported\n"
                             % (self.path, err))
            return
        self._written_steps = self.steps
        self._written_at = now

    # Preemption.

    def _on_signal(self, signum, frame):
        self._signalled = True
        if self._immediate:
            self._checkpoint_and_exit()

    def _checkpoint_and_exit(self):
        self._signalled = False
        self._checkpoint()
        self.close()
        sys.exit(self._exit_code)


def track(iterable, **kwargs):
    """Yield the items of iterable, reporting a step after each one:
    `for batch in track(loader, start_step=step): ...`. Takes Progress's
    arguments."""
    with Progress(**kwargs) as progress:
        yield from progress.wrap(iterable)
