"""exec_user = user (SPEC §5): a request that names no "user" runs as the
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
