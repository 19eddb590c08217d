"""Every program answers --help (and -h) with its usage on stdout and
exit status 0, and an unknown option with its usage on stderr and exit
status 2; asking for help touches nothing (no stack is needed here)."""

import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "build"
PROGRAMS = ["roomboxctl", "roombox-fcgi", "roombox-keeper", "roombox-helper"]


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_usage_on_stdout(program, flag):
    r = subprocess.run([BUILD / program, flag], capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r
    assert r.stdout.startswith(f"usage: {program}"), r.stdout
    assert r.stderr == ""


@pytest.mark.parametrize("program", PROGRAMS)
def test_an_unknown_option_is_usage_on_stderr(program):
    r = subprocess.run([BUILD / program, "--no-such-option"], capture_output=True, text=True,
                       timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r
    assert "usage: " + program in r.stderr and r.stdout == "", r
