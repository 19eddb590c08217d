"""What a room keeps from one exec to the next: files, the shell session
(working directory, exported variables), background processes and
their output.  Through nginx."""

SERVERS = ("nginx",)


def test_files_persist(client, room):
    client.sh(room, "echo x > f")
    assert client.sh(room, "cat f") == "x\n"
    assert client.sh(room, "pwd") == "/workspace\n"


def test_cd_persists(client, room):
    client.sh(room, "cd /tmp")
    assert client.sh(room, "pwd") == "/tmp\n"


def test_export_persists(client, room):
    client.sh(room, "export A=1")
    assert client.sh(room, "echo $A") == "1\n"


def test_exported_values_keep_special_characters(client, room):
    client.sh(room, """export Q="a b'c\\"d\\$e
second line" """)
    assert client.sh(room, 'printf "%s" "$Q"') == "a b'c\"d$e\nsecond line"


def test_several_execs_build_up_the_session(client, room):
    client.sh(room, "export KEEP=yes; cd /usr/share")
    client.sh(room, "export OTHER=1")
    assert client.sh(room, 'echo "$KEEP $OTHER"; pwd') == "yes 1\n/usr/share\n"


def test_cwd_and_env_fields_do_not_change_the_session(client, room):
    client.sh(room, "cd /tmp; export A=1")
    assert client.sh(room, "pwd", cwd="/") == "/\n"
    assert client.sh(room, 'echo "$B"', env={"B": "2"}) == "2\n"
    client.sh(room, "cd /usr; export C=3", env={"B": "2"})
    client.sh(room, "cd /usr; export C=4", cwd="/")
    assert client.sh(room, 'pwd; echo "[$A][$B][$C]"') == "/tmp\n[1][][]\n"


def test_a_timed_out_exec_does_not_change_the_session(client, room):
    client.sh(room, "cd /tmp")
    res = client.exec(room, "cd /usr; export T=1; sleep 30", timeout=300)
    assert res["timedOut"] is True
    assert client.sh(room, 'pwd; echo "[$T]"') == "/tmp\n[]\n"


def test_a_saved_directory_that_is_gone_or_closed_falls_back_quietly(client, room):
    client.sh(room, "mkdir -p /tmp/gone /tmp/shut; cd /tmp/gone", user="user")
    client.sh(room, "rmdir /tmp/gone")
    res = client.exec(room, "pwd", user="user")
    assert (res["stdout"], res["stderr"], res["exitCode"]) == ("/workspace\n", "", 0), res
    # closed to the room's user (its root may enter any directory)
    client.sh(room, "cd /tmp/shut; chmod 000 /tmp/shut", user="user")
    res = client.exec(room, "pwd", user="user")
    assert (res["stdout"], res["stderr"], res["exitCode"]) == ("/workspace\n", "", 0), res


def test_a_command_that_closes_fd_9_saves_nothing(client, room):
    """fd 9 is where the shell writes the session as it ends.  The shell's
    complaint goes to stderr; the command keeps its own exit status, and no
    session text reaches its stdout."""
    client.sh(room, "cd /tmp; export K=1")
    res = client.exec(room, "exec 9>&-; cd /usr; export K=2")
    assert res["exitCode"] == 0 and "Bad file descriptor" in res["stderr"], res
    assert res["stdout"] == "", res
    res = client.exec(room, "exec 9>&-; echo out; exit 3")
    assert (res["exitCode"], res["stdout"]) == (3, "out\n"), res
    assert "Bad file descriptor" in res["stderr"], res
    assert client.sh(room, 'pwd; echo "$K"') == "/tmp\n1\n"


def test_megabytes_written_to_fd_9_are_not_a_session(client, room):
    """fd 9 (where the session is written as the shell ends) is a memfd:
    a command that floods it gets its normal answer, nothing is saved (more
    than a shell could take back), and the room goes on."""
    client.sh(room, "cd /tmp; export F=1")
    res = client.exec(room, "head -c 50000000 /dev/zero >&9; cd /usr; export F=2; echo written")
    assert (res["exitCode"], res["stdout"]) == (0, "written\n"), res
    assert client.sh(room, 'pwd; echo "$F"') == "/tmp\n1\n"


def test_background_sleep_returns_at_once_and_keeps_running(client, room):
    r = client.exec_raw(room, {"cmd": "echo before; sleep 300 &"})
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["stdout"] == "before\n"
    assert res["exitCode"] == 0 and res["timedOut"] is False
    assert r.elapsed < 2, f"exec waited {r.elapsed:.1f} s for its background child"
    assert "sleep 300" in client.sh(room, "ps -e -o args=").splitlines()


def test_background_process_survives_writing_after_the_exec(client, room):
    # The child writes to the exec's stdout after the exec has returned: it
    # must not die of SIGPIPE (it touches the marker only after the echo).
    r = client.exec_raw(room, {"cmd": "(sleep 0.3; echo late; echo late >&2; "
                                      "touch /tmp/after-echo; sleep 300) &"})
    assert r.status == 200 and r.elapsed < 2
    out = client.sh(room, "for i in $(seq 100); do [ -e /tmp/after-echo ] && break; "
                          "sleep 0.05; done; ls /tmp/after-echo")
    assert out == "/tmp/after-echo\n"


def test_background_process_writes_megabytes_after_the_exec(client, room):
    # More than a pipe holds, written after the exec has answered: the
    # keeper must have taken over both pipes and keep reading them, or the
    # writer blocks for ever (not drained) or dies of SIGPIPE (dropped); the
    # marker is touched only if both writes completed.
    r = client.exec_raw(room, {"cmd": "(sleep 0.3; head -c 3000000 /dev/zero && "
                                      "head -c 3000000 /dev/zero >&2 && "
                                      "touch /tmp/after-big; sleep 300) &"})
    assert r.status == 200 and r.elapsed < 2
    assert r.json["result"]["stdout"] == "" and r.json["result"]["stderr"] == ""
    out = client.sh(room, "for i in $(seq 200); do [ -e /tmp/after-big ] && break; "
                          "sleep 0.05; done; ls /tmp/after-big")
    assert out == "/tmp/after-big\n"


def test_background_http_server_answers_the_next_exec(client, room):
    r = client.exec_raw(room, {"cmd": "python3 -m http.server 8000 --bind 127.0.0.1 "
                                      ">/dev/null 2>&1 &"})
    assert r.status == 200 and r.json["result"]["exitCode"] == 0
    assert r.elapsed < 2
    out = client.sh(room, "for i in $(seq 50); do python3 -c \"import urllib.request;"
                          "print(urllib.request.urlopen('http://127.0.0.1:8000/').status)\" "
                          "2>/dev/null && break; sleep 0.1; done")
    assert out.strip().splitlines()[-1:] == ["200"], out
    # and it is still there for the exec after that
    out = client.sh(room, "python3 -c \"import urllib.request;"
                          "print(urllib.request.urlopen('http://127.0.0.1:8000/').status)\"")
    assert out == "200\n"


def test_files_written_anywhere_persist(client, room):
    client.sh(room, "echo tmp > /tmp/t; echo home > ~/h; mkdir -p /workspace/a/b; "
                    "echo deep > /workspace/a/b/c")
    assert client.sh(room, "cat /tmp/t ~/h /workspace/a/b/c") == "tmp\nhome\ndeep\n"
