"""The soak's judgements on made-up figures: each rule passes what it
should and fails what it should (make soak runs this first)."""

from judge import RESOURCES, append_problems, growth_problems, margin


def sample(t, pid=100, **over):
    s = {name: 10 for name in RESOURCES}
    s.update({"t": t, "fcgi_pid": pid, "fcgi_rss": 20 << 20, "skipped": {}})
    s.update(over)
    return s


def test_flat_run_passes():
    assert growth_problems([sample(0), sample(60), sample(120)]) == []


def test_growth_within_the_margin_passes_and_past_it_fails():
    base = 10
    ok = sample(120, veths=base + margin("veths", base))
    assert growth_problems([sample(0), sample(60), ok]) == []
    bad = sample(120, veths=base + margin("veths", base) + 1)
    names = [n for n, _ in growth_problems([sample(0), sample(60), bad])]
    assert names == ["veths"]


def test_the_baseline_is_the_first_steady_sample_not_the_start():
    # rooms are made during the first minute: the start is lower
    start = sample(0, keepers=0, cgroups=0)
    assert growth_problems([start, sample(60), sample(120)]) == []
    assert [n for n, _ in growth_problems([start, sample(60), sample(120, keepers=11)])] == ["keepers"]


def test_fcgi_figures_are_judged_within_the_last_roombox_fcgi_only():
    # a restart resets roombox-fcgi's figures: the old process is not compared
    run = [sample(0, pid=1, fcgi_fds=500), sample(60, pid=2, fcgi_fds=9),
           sample(120, pid=2, fcgi_fds=12), sample(180, pid=2, fcgi_fds=12)]
    assert growth_problems(run) == []
    run[-1]["fcgi_fds"] = 12 + margin("fcgi_fds", 12) + 1
    assert [n for n, _ in growth_problems(run)] == ["fcgi_fds"]


def test_appends_all_there_in_order_pass_even_with_unacknowledged_lines():
    assert append_problems([1, 2, 4], ["1", "2", "3", "4"]) == []
    assert append_problems([1, 2, 4], ["1", "3", "2", "4"]) == []    # 3 was never acknowledged


def test_a_lost_a_doubled_and_a_reordered_append_fail():
    assert append_problems([1, 2, 3], ["1", "3"]) == ["acknowledged line 2 is missing"]
    assert "2 times" in append_problems([1, 2], ["1", "2", "2"])[0]
    assert "comes before" in append_problems([1, 2], ["2", "1"])[0]
