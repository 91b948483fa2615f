"""Running the seed programs as real processes on loopback ports the test picks.

    with Processes() as procs:
        server = procs.start("001_local_server.py")
        target = procs.wait_for_target(server)          # "caf://127.0.0.1:PORT"
        out = procs.run("001_client.py", AF_TARGET=target)

Every wait is bounded; the processes a test starts are killed when its block ends, and only
those.
"""

import os
import queue
import random
import socket
import subprocess
import threading
import time

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
PYTHON = "/usr/bin/python3"


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(count):
    """`count` distinct ports that were free on 127.0.0.1 a moment ago, drawn below the kernel's
    ephemeral range as tests/support/processes.hpp's are: a port the kernel handed out for
    127.0.0.1:0 can be handed out again (a started task's bulk listener took one that way
    before the task meant to listen there started)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    ports = []
    draw = random.Random()
    for _ in range(1000):
        if len(ports) == count or ephemeral_low <= 12000:
            break
        port = draw.randrange(10000, ephemeral_low)
        if port not in ports and _bindable(port):
            ports.append(port)
    if len(ports) == count:
        return ports
    # A kernel whose ephemeral range leaves no room below: take some of its ports.
    sockets = []
    try:
        for _ in range(count - len(ports)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return ports + [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class _Started:
    def __init__(self, name, popen):
        self.name = name
        self.popen = popen
        self.lines = queue.Queue()
        self.output = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.popen.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put(None)


class Processes:
    def __init__(self):
        self._started = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for started in self._started:
            if started.popen.poll() is None:
                started.popen.kill()
            started.popen.wait(timeout=30)

    def _env(self, extra):
        env = dict(os.environ)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def start(self, script, **env):
        """Starts seed `script` with `env` added to the environment; stdout and stderr merged."""
        popen = subprocess.Popen([PYTHON, "-u", os.path.join(SEEDS, script)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=self._env(env))
        started = _Started(script, popen)
        self._started.append(started)
        return started

    def wait_for_target(self, started, timeout=60):
        """The target a server prints as it starts ("Started server with target: ...")."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("%s printed no target within %d s; it printed:\n%s"
                                     % (started.name, timeout, "".join(started.output)))
            try:
                line = started.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("%s ended (exit %s) before printing its target:\n%s"
                                     % (started.name, started.popen.wait(), "".join(started.output)))
            if line.startswith("Started server with target: "):
                return line.split(": ", 1)[1].strip()

    def run(self, script, timeout=240, **env):
        """Runs seed `script` to its end; returns its stdout lines (a failing exit is an
        AssertionError with its output)."""
        done = subprocess.run([PYTHON, os.path.join(SEEDS, script)], capture_output=True,
                              text=True, env=self._env(env), timeout=timeout)
        if done.returncode != 0:
            raise AssertionError("%s exited %d:\nstdout:\n%s\nstderr:\n%s"
                                 % (script, done.returncode, done.stdout, done.stderr))
        return done.stdout.splitlines(), done.stderr
