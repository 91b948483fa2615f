#!/usr/bin/env python3
"""Runs README.md's shell blocks marked `<!-- readme-test: expect REGEX -->` as a user pastes
them: each in a fresh bash (set -e), in the README's order, its processes started at once in the
order written (clients may come up before the servers they need, and must wait for them). Only
two things change: `build/` becomes the build directory, and each port of the 22xx range the
block names becomes a free loopback port (the same one wherever the block repeats it). A block
passes when bash exits 0 within its bound and its output matches REGEX. Whatever a block left
running (its own process group) is stopped afterwards.

usage: readme_blocks.py README.md BUILD_DIR
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

MARKED = re.compile(r"<!-- readme-test: expect (.*?) -->\s*```sh\n(.*?)```", re.S)
PORT = re.compile(r"\b22[0-9]{2}\b")
BLOCK_SECONDS = 300


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_run_here(block, build_dir):
    ports = {}
    for port in PORT.findall(block):
        ports.setdefault(port, str(free_port()))
    text = PORT.sub(lambda m: ports[m.group(0)], block)
    return re.sub(r"(?<![\w/])build/", build_dir.rstrip("/") + "/", text)


def stop_group(process):
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + grace
        while time.time() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def main():
    readme, build_dir = sys.argv[1], os.path.abspath(sys.argv[2])
    blocks = MARKED.findall(open(readme, encoding="utf-8").read())
    if not blocks:
        print("FAIL: no block of %s is marked readme-test" % readme)
        return 1
    failed = 0
    for number, (expect, block) in enumerate(blocks, 1):
        script = as_run_here(block, build_dir)
        first = block.strip().splitlines()[0]
        with tempfile.TemporaryDirectory(prefix="actorflow-readme-") as cwd:
            started = time.time()
            process = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                output, _ = process.communicate(timeout=BLOCK_SECONDS)
                code = process.returncode
            except subprocess.TimeoutExpired:
                stop_group(process)
                output, _ = process.communicate()
                code = "timeout after %d s" % BLOCK_SECONDS
            stop_group(process)
            text = output.decode("utf-8", "replace")
            seconds = time.time() - started
            matched = re.search(expect, text, re.M) is not None
            if code == 0 and matched:
                print("ok: block %d (%s) in %.1f s" % (number, first, seconds))
            else:
                failed += 1
                print("FAIL: block %d (%s): exit %s, expected /%s/ %s\n--- the block as run:\n%s"
                      "--- its output:\n%s" % (number, first, code, expect,
                                               "found" if matched else "not found", script, text))
    print("%d passed, %d failed" % (len(blocks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
