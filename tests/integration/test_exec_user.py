"""exec_user = user: a request that names no "user" runs as the
room's user (uid 1000); "user":"root" still runs as the room's root.
Through nginx."""

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"exec_user": "user"}


def test_exec_user_sets_who_runs_a_request_without_user(client, room):
    assert client.sh(room, "id -u; id -un; echo $HOME") == "1000\nuser\n/home/user\n"
    assert client.sh(room, "id -u; id -un; echo $HOME", user="root") == "0\nroot\n/root\n"
    assert client.sh(room, "id -u", user="user") == "1000\n"
    # and what it makes is the room user's
    assert client.sh(room, "touch /workspace/x; stat -c %U /workspace/x") == "user\n"


def test_a_bad_user_is_refused_whatever_exec_user_says(client, room):
    r = client.exec_raw(room, {"cmd": "id -u", "user": "admin"})
    assert r.status == 400, r.json
    assert r.json == {"error": "invalid request",
                      "details": {"user": ['Invalid option: expected one of "root"|"user"']}}, r.json


# ---- the session is kept per user: root's and user's never meet

SESSION_END = "#roombox-session-end"


def plants(room_tmp):
    """Shell code a user's command writes where its session goes (fd 9),
    each way a command can: code then the marker with fd 9 closed (the
    EXIT trap adds nothing), code ahead of the trap's own session, and a
    marker line of its own followed by more code."""
    code = f"echo planted-$(id -u) >> {room_tmp}; chmod 666 {room_tmp} 2>/dev/null"
    return [
        f"printf '%s\\n{SESSION_END}\\n' '{code}' >&9; exec 9>&-",
        f"printf '%s\\n' '{code}' >&9",
        f"printf '%s\\n{SESSION_END}\\n%s\\n' '{code}' '{code}' >&9",
    ]


def root_ran_it(client, room, marker):
    """Whether anything planted wrote marker as the room's root."""
    return "planted-0" in client.sh(room, f"cat {marker} 2>/dev/null; true", user="root")


def test_code_a_user_writes_to_fd_9_never_runs_as_root(client, room):
    client.sh(room, "true", user="root")          # root has a session of its own
    for i, plant in enumerate(plants("/tmp/pwned")):
        client.exec(room, plant)                  # as the room's user (exec_user)
        client.sh(room, "true", user="root")      # the next root command
        client.sh(room, "true", user="root")
        assert not root_ran_it(client, room, "/tmp/pwned"), f"plant {i} ran as root: {plant}"


def test_a_background_writer_on_fd_9_never_reaches_root(client, room):
    """A user's background process keeps fd 9 after its exec has ended and
    writes there while root's commands run."""
    code = "echo planted-$(id -u) >> /tmp/bg-pwned"
    client.sh(room, "(for i in $(seq 600); do [ -e /tmp/go ] && break; sleep 0.05; done; "
                    f"printf '%s\\n{SESSION_END}\\n' '{code}' >&9; touch /tmp/written) "
                    ">/dev/null 2>&1 &")
    client.sh(room, "touch /tmp/go; for i in $(seq 600); do [ -e /tmp/written ] && break; "
                    "sleep 0.05; done; test -e /tmp/written", user="root")
    client.sh(room, "true", user="root")
    client.sh(room, "true", user="root")
    assert not root_ran_it(client, room, "/tmp/bg-pwned")


def test_root_and_user_each_keep_their_own_session(client, room):
    client.sh(room, "export SECRET=x; cd /tmp", user="root")
    # the user sees nothing root exported, and stays where it was
    assert client.sh(room, 'echo "[$SECRET]"; pwd; env | grep -c SECRET || true') == "[]\n/workspace\n0\n"
    client.sh(room, "export MINE=1; cd /home/user")
    assert client.sh(room, 'echo "[$MINE][$SECRET]"; pwd') == "[1][]\n/home/user\n"
    # and root keeps its own, untouched by the user's
    assert client.sh(room, 'echo "[$MINE][$SECRET]"; pwd', user="root") == "[][x]\n/tmp\n"
    # one-off scopes leave both as they were
    client.sh(room, "export MINE=2; cd /", cwd="/tmp")
    client.sh(room, "export SECRET=y; cd /", env={"A": "1"}, user="root")
    assert client.sh(room, 'echo "[$MINE]"; pwd') == "[1]\n/home/user\n"
    assert client.sh(room, 'echo "[$SECRET]"; pwd', user="root") == "[x]\n/tmp\n"


def test_sessions_survive_a_restart_each_its_own(client, stack, room):
    client.sh(room, "export R=root; cd /tmp", user="root")
    client.sh(room, "export U=user; cd /home/user")
    assert client.post(f"/api/rooms/{room}/sandbox/restart").status == 200
    assert client.sh(room, 'echo "[$R][$U]"; pwd', user="root") == "[root][]\n/tmp\n"
    assert client.sh(room, 'echo "[$R][$U]"; pwd') == "[][user]\n/home/user\n"


def test_a_room_from_before_has_its_one_session_as_roots(client, stack, room):
    """A room made when root and user shared one session file: that file is
    root's; the user starts afresh."""
    client.sh(room, "true", user="root")
    assert stack.helper({"op": "stop", "room": room})[0] == 0
    (stack.room_state_dir(room) / "session").write_text("export OLD='1'\nexport __RB_CWD='/usr'\n")
    assert client.sh(room, 'echo "[$OLD]"; pwd', user="root") == "[1]\n/usr\n"
    assert client.sh(room, 'echo "[$OLD]"; pwd') == "[]\n/workspace\n"
