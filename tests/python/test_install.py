"""The package as `make install` puts it: under <prefix>/lib/python3.X/dist-packages, which
Debian's /usr/bin/python3 has on sys.path for make install's default prefix /usr/local, and
importable from there alone."""

import os
import site
import subprocess
import sys
import sysconfig

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("ACTORFLOW_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
PACKAGE_DIR = "lib/python%d.%d/dist-packages" % sys.version_info[:2]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    # The python/ directory's install rules alone: the rest of `make install` needs the apps.
    script = os.path.join(BUILD_DIR, "python", "cmake_install.cmake")
    done = subprocess.run(["cmake", "-DCMAKE_INSTALL_PREFIX=%s" % prefix, "-P", script],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return prefix


def test_the_package_goes_where_debians_python_looks_for_the_default_prefix(prefix):
    assert sys.executable == "/usr/bin/python3" or os.path.realpath(sys.executable) == \
        os.path.realpath("/usr/bin/python3")
    assert "/usr/local/" + PACKAGE_DIR in site.getsitepackages(["/usr/local"])
    installed = os.path.join(str(prefix), PACKAGE_DIR, "actorflow")
    names = set(os.listdir(installed))
    assert {"__init__.py", "framework.py", "session.py", "train.py", "compat"} <= names
    assert any(n.startswith("_actorflow") and n.endswith(sysconfig.get_config_var("EXT_SUFFIX"))
               for n in names), names


def test_the_installed_package_imports_and_runs_without_the_build_tree(prefix):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.path.join(str(prefix), PACKAGE_DIR)
    program = ("import actorflow, actorflow.compat.v1 as tf\n"
               "print(actorflow.__file__)\n"
               "with tf.Session() as s: print(s.run(tf.constant(6.0) * 7))\n")
    done = subprocess.run(["/usr/bin/python3", "-c", program], capture_output=True, text=True,
                          env=env, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    where, value = done.stdout.split()
    assert where.startswith(str(prefix))
    assert value == "42.0"
