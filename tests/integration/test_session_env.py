"""The keeper hands a shell its session as its environment when the
session parses (common/session_vars.h), and the shell evaluates it as
before when it does not: what a command sees is the same either way.

Each test observes a room twice with the same session: once as the room's
shell left it (the keeper's parse: no __RB_SESSION in the shell's own
environment) and once with a line the parser refuses but the shell reads
as nothing (`:`), written into the session from inside the room, as any
room process can -- the wrapper's evaluation, as every exec was before.
Both exec paths: the exec channel (a warm exec) and the helper's exec (the
first exec after the room stopped).  Through nginx."""

import shlex

import pytest

SERVERS = ("nginx",)
END = "#roombox-session-end"

TRICKY = {
    "Q": "a'b''c'",
    "Q2": "'",
    "NL": "line one\nline two\n\n",
    "BS": "back\\slash \\n $HOME `x` $(y) \"dq\" \\'",
    "UTF": "h\u00e9llo \u2713 \u65e5\u672c",
    "EMPTY": "",
    "SPACES": "  lead  and trail  ",
    "GLOB": "*?[a] ~ #no",
    "PATH": "/opt/x:/usr/bin:/bin",
}
# every variable's bytes, then the directories and everything set knows
OBSERVE = ("for v in " + " ".join(TRICKY) + "; do eval \"printf '%s=<%s>\\n' $v \\\"\\$$v\\\"\"; done; "
           "echo ---; export -p; echo ---; pwd; printf '[%s]\\n' \"$PWD\" \"$OLDPWD\" \"$(/bin/pwd)\"; "
           "echo ---; set")
# the shell's own environment: whether it was handed __RB_SESSION
EVALUATED = "tr '\\0' '\\n' < /proc/$$/environ | grep -c '^__RB_SESSION=' || true"
# the session as the EXIT trap writes it
SESSION = "__RB_CWD=$PWD; export __RB_CWD; export -p"


def run(client, room, via, cmd, user):
    """One exec by the path via; its result (what the command did)."""
    if via == "helper":
        assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    else:
        # the room runs, so a channel serves the next exec (a one-off cwd
        # leaves the session as it is)
        client.sh(room, "true", user=user, cwd="/")
    r = client.exec(room, cmd, user=user)
    return {k: r[k] for k in ("stdout", "stderr", "exitCode")}


def plant(client, room, user, text):
    """text as the session, written from inside the room as any room
    process can (fd 9, the marker, fd 9 closed so the trap adds nothing)."""
    client.sh(room, f"printf '%s{END}\\n' {shlex.quote(text)} >&9; exec 9>&-", user=user)


def observe_both(client, room, via, session, user="root"):
    """What OBSERVE saw with session as the room's shell left it and with
    a `:` line added (a line the parser refuses, the shell reads as
    nothing): each ({stdout, stderr, exitCode}, whether the shell was
    handed __RB_SESSION)."""
    got = []
    for text in (session, session + ": room-written\n"):
        plant(client, room, user, text)
        r = run(client, room, via, OBSERVE + "; echo ===; " + EVALUATED, user)
        out, _, evaluated = r["stdout"].rpartition("===\n")
        got.append(({**r, "stdout": out}, evaluated == "1\n"))
    return got


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_tricky_values_and_directories_are_the_same_either_way(client, room, via):
    sets = "; ".join(f"export {k}={shlex.quote(v)}" for k, v in TRICKY.items())
    client.sh(room, f"mkdir -p \"/workspace/it's a d\u00efr\"; cd \"/workspace/it's a d\u00efr\"; {sets}")
    session = client.sh(room, SESSION)
    (direct, was_evaluated), (evaluated, _) = observe_both(client, room, via, session)
    assert direct == evaluated, (direct, evaluated)
    assert not was_evaluated, "the session was not parsed"
    out = direct["stdout"]
    for k, v in TRICKY.items():
        assert f"{k}=<{v}>\n" in out, (k, out)
    assert "export Q='a'\"'\"'b'\"''\"'c'\"'\"\n" in out, out
    assert "\n/workspace/it's a d\u00efr\n[/workspace/it's a d\u00efr]\n[/]\n[/workspace/it's a d\u00efr]\n" in out, out
    assert "__RB" not in out.split("---")[1], out
    assert (direct["exitCode"], direct["stderr"]) == (0, ""), direct


@pytest.mark.parametrize("via", ["channel", "helper"])
@pytest.mark.parametrize("user", ["root", "user"])
def test_a_saved_directory_gone_or_closed_falls_back_the_same_either_way(client, room, via, user):
    client.sh(room, "mkdir -p /workspace/gone /workspace/shut; chmod 777 /workspace/gone /workspace/shut")
    session = client.sh(room, "cd /workspace/gone; " + SESSION, user=user)
    client.sh(room, "rmdir /workspace/gone")
    (direct, _), (evaluated, was_evaluated) = observe_both(client, room, via, session, user)
    assert direct == evaluated and was_evaluated, (direct, evaluated)
    assert "\n/workspace\n[/workspace]\n[/]\n" in direct["stdout"], direct
    session = client.sh(room, "cd /workspace/shut; " + SESSION, user=user)
    client.sh(room, "chmod 000 /workspace/shut")
    (direct, _), (evaluated, _) = observe_both(client, room, via, session, user)
    assert direct == evaluated, (direct, evaluated)
    if user == "user":
        assert "\n/workspace\n[/workspace]\n[/]\n" in direct["stdout"], direct


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_root_enters_what_its_capabilities_open_either_way(client, room, via):
    """The keeper's child enters the saved directory with fewer
    capabilities than the room's root has once its shell runs: a directory
    only those open is left to the shell's own cd."""
    client.sh(room, "mkdir -p /workspace/mine; chmod 700 /workspace/mine", user="user")
    client.sh(room, "cd /workspace/mine")
    r = run(client, room, via, 'pwd; echo "$PWD $OLDPWD"', "root")
    assert r == {"stdout": "/workspace/mine\n/workspace/mine /\n", "stderr": "", "exitCode": 0}, r


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_what_an_environment_cannot_say_is_left_to_the_shell(client, room, via):
    """An exported variable without a value, or one dash resets when it
    reads its environment (IFS, PPID, OPTIND): the shell evaluates the
    session, and sees what it always saw."""
    for setup, expect in [("export NOVAL", "export NOVAL\n"),
                          ("export IFS=:", "export IFS=':'\n"),
                          ("export PPID=5", "export PPID='5'\n"),
                          ("export OPTIND=3", "export OPTIND='3'\n")]:
        client.sh(room, setup)
        assert run(client, room, via, EVALUATED, "root")["stdout"] == "1\n", setup
        assert expect in run(client, room, via, "export -p", "root")["stdout"], setup
        client.sh(room, "unset NOVAL IFS PPID")


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_a_large_session_is_handed_over_whole(client, room, via):
    client.sh(room, "mkdir -p /workspace/big; cd /workspace/big; "
                    "export BIG=\"$(head -c 100000 /dev/zero | tr '\\0' \"'\")\"")
    r = run(client, room, via, 'echo "${#BIG}" "$PWD"; ' + EVALUATED, "root")
    assert r == {"stdout": "100000 /workspace/big\n0\n", "stderr": "", "exitCode": 0}, r


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_what_the_shells_own_start_reads_stays_the_commands(client, room, via):
    """A variable the dynamic loader reads reached only the commands the
    shell ran, never the shell itself: so it stays."""
    client.sh(room, "export LD_SHOW_AUXV=1 LD_LIBRARY_PATH=/nowhere")
    r = run(client, room, via, "echo hi", "root")
    assert r == {"stdout": "hi\n", "stderr": "", "exitCode": 0}, r
    assert "AT_PAGESZ" in run(client, room, via, "/bin/true", "root")["stdout"]


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_a_session_the_room_wrote_garbage_into_still_runs_commands(client, room, via):
    client.sh(room, "export KEPT=1; cd /usr")
    client.sh(room, f"printf 'export KEPT=2\\ngarbage\\001\\377 words\\nexport __RB_CWD=/etc\\n{END}\\n' >&9; exec 9>&-")
    r = run(client, room, via, "echo \"$KEPT\"; pwd", "root")
    assert (r["exitCode"], r["stdout"]) == (0, "2\n/etc\n"), r
    assert "garbage" in r["stderr"], r          # the shell's complaint, as before
    # its next session is the shell's own again, and parsed
    assert run(client, room, via, EVALUATED, "root")["stdout"] == "0\n"


@pytest.mark.parametrize("via", ["channel", "helper"])
def test_a_requests_env_and_cwd_win_as_before(client, room, via):
    client.sh(room, "export A=session; cd /usr")
    if via == "helper":
        assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    r = client.exec(room, 'echo "$A $B"; pwd; ' + EVALUATED, env={"A": "it's env", "B": "x\ny"})
    assert (r["exitCode"], r["stdout"]) == (0, "it's env x\ny\n/usr\n0\n"), r
    r = client.exec(room, 'echo "$A"; ' + EVALUATED, cwd="/nonexistent")
    assert r["exitCode"] == 1 and r["stdout"] == "" and "nonexistent" in r["stderr"], r
    r = client.exec(room, 'echo "$A"; pwd; ' + EVALUATED, cwd="/etc")
    assert (r["exitCode"], r["stdout"]) == (0, "session\n/etc\n1\n"), r
