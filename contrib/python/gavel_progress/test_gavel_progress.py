"""Tests for gavel_progress: python3 -m unittest discover contrib/python"""

import io
import os
import re
import signal
import tempfile
import unittest
from contextlib import redirect_stderr

from gavel_progress import ENV_FILE, Progress, track

# What the collector accepts: STEPS [UNIX_TIME].
LINE = re.compile(r"^(\d+) (\d+\.\d{3})$")


class Clock:
    def __init__(self, t=1_700_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


class ProgressTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "42.progress")
        self.env = {ENV_FILE: self.path}

    def lines(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="ascii") as f:
            text = f.read()
        self.assertTrue(text == "" or text.endswith("\n"), "unfinished line: %r" % text)
        out = []
        for line in text.splitlines():
            m = LINE.match(line)
            self.assertIsNotNone(m, "line %r is not in the collector's format" % line)
            out.append((int(m.group(1)), float(m.group(2))))
        return out

    def steps(self):
        return [s for s, _ in self.lines()]

    def test_every_n_steps(self):
        clock = Clock()
        with Progress(every_steps=3, every_seconds=None, clock=clock, environ=self.env) as p:
            for _ in range(10):
                p.step()
        # The first step, every third after it, and the last at close.
        self.assertEqual(self.steps(), [1, 4, 7, 10])

    def test_every_t_seconds(self):
        clock = Clock()
        p = Progress(every_seconds=10, clock=clock, environ=self.env)
        for _ in range(25):
            clock.t += 1
            p.step()
        p.close()
        lines = self.lines()
        self.assertEqual([s for s, _ in lines], [1, 11, 21, 25])
        self.assertEqual(lines[1][1] - lines[0][1], 10.0)

    def test_wrap_counts_after_each_item(self):
        clock = Clock()
        seen = []
        p = Progress(every_steps=1, clock=clock, environ=self.env)
        for item in p.wrap("abc"):
            seen.append((item, p.steps))
        p.close()
        self.assertEqual(seen, [("a", 0), ("b", 1), ("c", 2)])
        self.assertEqual(self.steps(), [1, 2, 3])

    def test_track_and_resume(self):
        items = list(track(range(5), start_step=1000, every_steps=2, environ=self.env))
        self.assertEqual(items, [0, 1, 2, 3, 4])
        self.assertEqual(self.steps(), [1001, 1003, 1005])

    def test_appends_to_an_existing_file(self):
        with open(self.path, "w") as f:
            f.write("500 1699999000.000\n")
        with Progress(start_step=500, environ=self.env) as p:
            p.step()
        self.assertEqual(self.steps(), [500, 501])

    def test_set(self):
        with Progress(every_steps=1, environ=self.env) as p:
            p.set(77)
            self.assertRaises(ValueError, p.set, -1)
        self.assertEqual(self.steps(), [77])

    def test_closes_on_exception(self):
        with self.assertRaises(RuntimeError):
            with Progress(every_steps=100, environ=self.env) as p:
                p.step()
                p.step()
                raise RuntimeError("out of memory")
        self.assertEqual(self.steps(), [1, 2])

    def test_no_file_configured(self):
        p = Progress(environ={})
        self.assertEqual(list(p.wrap(range(3))), [0, 1, 2])
        p.close()
        self.assertEqual(p.steps, 3)
        self.assertFalse(os.path.exists(self.path))

    def test_other_ranks_do_not_write(self):
        for env, writes in [({"RANK": "1"}, False), ({"SLURM_PROCID": "3"}, False),
                            ({"RANK": "0", "SLURM_PROCID": "5"}, True), ({"SLURM_PROCID": "0"}, True), ({}, True)]:
            if os.path.exists(self.path):
                os.remove(self.path)
            env = dict(env, **self.env)
            with Progress(environ=env) as p:
                p.step()
            self.assertEqual(os.path.exists(self.path), writes, env)

    def test_unwritable_file_does_not_stop_training(self):
        env = {ENV_FILE: os.path.join(self.dir.name, "missing", "42.progress")}
        err = io.StringIO()
        with redirect_stderr(err):
            with Progress(every_steps=1, environ=env) as p:
                for _ in range(5):
                    p.step()
        self.assertEqual(p.steps, 5)
        self.assertEqual(err.getvalue().count("cannot write"), 1, err.getvalue())

    def test_bad_arguments(self):
        for kwargs in [{"every_steps": 0}, {"every_seconds": 0}, {"start_step": -1}]:
            with self.assertRaises(ValueError, msg=kwargs):
                Progress(environ=self.env, **kwargs)


@unittest.skipUnless(hasattr(signal, "SIGUSR1"), "no SIGUSR1 here")
class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "7.progress")
        self.env = {ENV_FILE: self.path}
        self.saved = []
        self.before = signal.getsignal(signal.SIGUSR1)
        self.addCleanup(signal.signal, signal.SIGUSR1, self.before)

    def test_saves_and_exits_at_the_next_step(self):
        p = Progress(every_steps=1000, checkpoint=lambda: self.saved.append(p.steps), environ=self.env)
        p.step()
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(self.saved, [], "checkpoint ran inside the signal handler")
        with self.assertRaises(SystemExit) as cm:
            p.step()
        self.assertEqual(cm.exception.code, 0)
        self.assertEqual(self.saved, [2])
        # The last count was written before exiting, and the handler
        # given back.
        with open(self.path) as f:
            self.assertEqual([int(l.split()[0]) for l in f], [1, 2])
        self.assertEqual(signal.getsignal(signal.SIGUSR1), self.before)

    def test_immediate(self):
        p = Progress(checkpoint=lambda: self.saved.append("now"), immediate=True, exit_code=3, environ=self.env)
        with self.assertRaises(SystemExit) as cm:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):  # the handler runs between two bytecodes
                pass
        self.assertEqual(cm.exception.code, 3)
        self.assertEqual(self.saved, ["now"])

    def test_no_checkpoint_leaves_the_signal_alone(self):
        with Progress(environ=self.env):
            self.assertEqual(signal.getsignal(signal.SIGUSR1), self.before)


if __name__ == "__main__":
    unittest.main()
