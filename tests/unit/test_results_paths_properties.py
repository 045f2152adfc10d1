"""Property tests: no PATH a user gives and no name a cluster sends can reach outside the job's folder."""
from __future__ import annotations

import io
import posixpath

import pytest
from hypothesis import given, settings, strategies as st

from taobank.campaign import results_fetch
from taobank import results_shell
from taobank.errors import TaoError, UsageError
from taobank.paths import rel_path

FOLDER = "/results/job-1"
PARTS = st.sampled_from(["..", ".", "", "a", "b.pth", "-x", "job-1", "~", " ", "a b", "\\", "\n", "é", "*"])
PATHS = st.one_of(st.text(max_size=40),
                  st.lists(PARTS, min_size=1, max_size=6).map("/".join),
                  st.lists(PARTS, min_size=1, max_size=6).map(lambda p: "/" + "/".join(p)))


def inside(rel: str) -> bool:
    joined = posixpath.normpath(posixpath.join(FOLDER, rel))
    return joined.startswith(FOLDER + "/")


@given(PATHS)
def test_an_accepted_path_is_relative_inside_and_never_an_option(value):
    try:
        rel = rel_path(value, "PATH")
    except TaoError:
        return
    assert inside(rel) and not rel.startswith(("-", "/")) and ".." not in rel.split("/")
    assert rel == posixpath.normpath(rel)


@given(PATHS)
def test_a_path_outside_the_folder_is_always_refused(value):
    if isinstance(value, str) and value and not value.startswith("/") and inside(value) \
            and ".." not in value.split("/"):
        return  # inside: may be accepted (subject to the character rule)
    with pytest.raises(TaoError):
        rel_path(value, "PATH")


@settings(max_examples=50, deadline=None)
@given(value=PATHS)
def test_fetch_refuses_it_before_any_record_or_cluster_call(value, tmp_path_factory):
    try:
        rel_path(value, "PATH")
    except TaoError:
        with pytest.raises(UsageError):  # before load_for: the job id need not even exist
            results_fetch.fetch(None, "no-such-job", [value], tmp_path_factory.getbasetemp() / "never-made")
        assert not (tmp_path_factory.getbasetemp() / "never-made").exists()


@given(PATHS)
def test_a_name_the_cluster_lists_is_kept_only_inside_the_folder(raw):
    """Whatever name a (hostile) cluster lists, the facts keep only names that stay inside the folder, which
    are the only names a fetch writes (under the staging folder, then ``--to``)."""
    facts = results_shell.parse_facts(FOLDER, f"3 1700000000 ./{raw}\n")
    for f in facts:
        assert inside(f.path) and not f.path.startswith("/") and "\n" not in f.path


@settings(max_examples=40, deadline=None)
@given(raw=PATHS)
def test_a_hostile_stream_writes_only_inside_the_folder(raw, tmp_path_factory):
    """A stream that announces a file it was not asked for, or a name leading out, writes nothing anywhere."""
    base = tmp_path_factory.mktemp("x")
    into = base / "into"
    into.mkdir()
    listed = results_shell.parse_facts(FOLDER, "2 1700000000 ./a.pth\n")
    stream = io.BytesIO(f"@@file crc32 0 2 1700000000 ./{raw}\n".encode("utf-8", "surrogateescape") + b"hi@@sum 1 2\n")
    seen = results_fetch._Transfer(into, False, results_fetch.Meter(None), None, into / ".staging")
    try:
        results_shell.receive(stream, FOLDER, listed, seen)
    except TaoError:
        pass
    written = [p for p in base.rglob("*") if p.is_file() and p.name != "state.json"]
    assert all(into in p.parents for p in written)
    assert raw == "a.pth" or not written
