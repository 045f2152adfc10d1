"""Image forms accepted by the SLURM skill and the .sqsh cache rules."""
import os
import subprocess
import time

import pytest

from taobank import pins
from taobank.errors import TaoError
from taobank.platforms.slurm import images


@pytest.mark.parametrize("given,pyxis", [
    ("/lustre/images/tao.sqsh", "/lustre/images/tao.sqsh"),
    ("nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("docker://nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("localhost:5000/me/img:1", "localhost:5000#me/img:1"),
    ("ubuntu:22.04", "ubuntu:22.04"),
    ("library/ubuntu", "library/ubuntu"),
])
def test_forms(given, pyxis):
    assert images.pyxis_image(given) == pyxis


def test_pinned_images_agree():
    assert images.pyxis_image(pins.resolve("images.tao_toolkit.pyt")) == pins.resolve("images.tao_toolkit.pyt_pyxis")


@pytest.mark.parametrize("bad", ["", "a b", "/tmp/image.tar", "s3://bucket/x", "x#y#z", "-rf"])
def test_bad_forms(bad):
    with pytest.raises(TaoError):
        images.pyxis_image(bad)


def test_cache_name_per_image_and_latest_rules():
    p = images.sqsh_path("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "/lustre/cache")
    assert p == "/lustre/cache/nvcr.io+nvidia+tao+tao-toolkit+7.1.0-pyt.sqsh"
    assert images.is_latest("nvcr.io/nvidia/x") and images.is_latest("ubuntu:latest")
    assert not images.is_latest("ubuntu:22.04") and images.is_latest("localhost:5000/me/img")
    assert not images.is_latest("nvcr.io/x/y@sha256:abc")
    assert images.needs_conversion("ubuntu:22.04", cached=False)
    assert not images.needs_conversion("ubuntu:22.04", cached=True, force_reconvert_latest=True)
    assert not images.needs_conversion("ubuntu:latest", cached=True)
    assert images.needs_conversion("ubuntu:latest", cached=True, force_reconvert_latest=True)
    assert not images.needs_conversion("/x/y.sqsh", cached=False)


def _conv(tmp, **kw):
    spec = kw.pop("spec", {})
    env = kw.pop("env", {})
    return images.conversion("dino-train-1a2b3c4d-sqsh", "nvcr.io/nvidia/x:1", f"{tmp}/cache/nvcr.io+nvidia+x+1.sqsh",
                             f"{tmp}/convert-%j.out", spec, env, gpu_partition="gpu,gpu2", account="acct",
                             force=kw.pop("force", False))


def test_conversion_job_directives_come_from_pins_spec_and_env(tmp_path):
    c = _conv(tmp_path)
    assert c.directives() == [
        ("--job-name", "dino-train-1a2b3c4d-sqsh"), ("--output", f"{tmp_path}/convert-%j.out"), ("--open-mode", "append"),
        ("--partition", "gpu"), ("--account", "acct"), ("--nodes", "1"), ("--ntasks", "1"), ("--cpus-per-task", "4"),
        ("--mem", "7200M"), ("--time", "120"), ("--no-requeue", None)]  # a large TAO image fits
    c = _conv(tmp_path, env={"TAO_SLURM_CONVERSION_PARTITION": "cpu"},
              spec={"conversion_cpus": 2, "conversion_mem": "4G", "conversion_time_minutes": 20})
    assert (c.partition, c.cpus, c.mem, c.time_minutes) == ("cpu", 2, "4G", 20)
    assert _conv(tmp_path, spec={"conversion_partition": "convert", "conversion_account": "other"}).directives()[3:5] == [
        ("--partition", "convert"), ("--account", "other")]
    from taobank.platforms.slurm import render

    render.lint(images.render_conversion(c), "convert.sbatch")  # bash -n, shellcheck, secret lint
    with pytest.raises(TaoError, match="conversion_mem"):
        _conv(tmp_path, spec={"conversion_mem": "lots"})


def _run(script: str, tmp, enroot: str, job_id: str = "77") -> subprocess.CompletedProcess:
    """The rendered script under bash with a stand-in ``enroot`` on PATH (the binary is all that is faked)."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "enroot").write_text("#!/bin/bash\n" + enroot)
    (bindir / "enroot").chmod(0o755)
    path = tmp / "convert.sbatch"
    path.write_text(script)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "SLURM_JOB_ID": job_id, "TMPDIR": str(tmp / "node")}
    return subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True)


IMPORT_OK = 'echo "temp=$ENROOT_TEMP_PATH" >&2; [ ! -e "$3" ] || { echo "exists" >&2; exit 1; }; echo hsqs > "$3"\n'


def test_conversion_writes_a_part_file_renames_it_and_removes_stale_partials(tmp_path):
    c = _conv(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    bare = cache / "nvcr.io+nvidia+x+1.sqsh.part"  # what an interrupted older import left: enroot refuses to overwrite it
    stale = cache / "nvcr.io+nvidia+x+1.sqsh.part.12"
    fresh = cache / "nvcr.io+nvidia+x+1.sqsh.part.13"  # a conversion that may still be running: kept
    for f in (bare, stale, fresh):
        f.write_text("half")
    old = time.time() - 3 * 3600
    os.utime(stale, (old, old))
    res = _run(images.render_conversion(c), tmp_path, IMPORT_OK)
    assert res.returncode == 0, res.stderr
    assert (cache / "nvcr.io+nvidia+x+1.sqsh").read_text() == "hsqs\n"
    assert not bare.exists() and not stale.exists() and fresh.exists()
    assert not (cache / "nvcr.io+nvidia+x+1.sqsh.part.77").exists()
    assert f"temp={tmp_path}/node/tao-enroot-77/tmp" in res.stderr  # node-local, not the shared filesystem
    assert not (tmp_path / "node" / "tao-enroot-77").exists()


def test_a_failed_import_leaves_no_sqsh_and_an_existing_one_is_kept(tmp_path):
    c = _conv(tmp_path)
    res = _run(images.render_conversion(c), tmp_path, 'echo "[ERROR] Could not process JSON input" >&2; exit 1\n')
    assert res.returncode != 0 and "Could not process JSON input" in res.stderr
    assert not (tmp_path / "cache" / "nvcr.io+nvidia+x+1.sqsh").exists()
    (tmp_path / "cache" / "nvcr.io+nvidia+x+1.sqsh").write_bytes(b"hsqs\x00cached")
    res = _run(images.render_conversion(c), tmp_path, "exit 9\n")  # converted meanwhile by another job: no import
    assert res.returncode == 0 and "already converted" in res.stdout
    res = _run(images.render_conversion(_conv(tmp_path, force=True)), tmp_path, IMPORT_OK)
    assert res.returncode == 0 and (tmp_path / "cache" / "nvcr.io+nvidia+x+1.sqsh").read_text() == "hsqs\n"


@pytest.mark.parametrize("cached", [b"", b"<html>429 Too Many Requests</html>", b"\x00\x00\x00\x00sqsh"])
def test_an_empty_or_foreign_cached_sqsh_is_converted_again(tmp_path, cached):
    sqsh = tmp_path / "cache" / "nvcr.io+nvidia+x+1.sqsh"
    sqsh.parent.mkdir()
    sqsh.write_bytes(cached)
    res = _run(images.render_conversion(_conv(tmp_path)), tmp_path, IMPORT_OK)
    assert res.returncode == 0, res.stderr
    assert "already converted" not in res.stdout and "not a squashfs image: converting it again" in res.stdout
    assert sqsh.read_text() == "hsqs\n"


@pytest.mark.parametrize("env,want", [
    ({"ENROOT_TEMP_PATH": "/scratch/me/enroot"}, "/scratch/me/enroot"),
    ({"TAO_ENROOT_TEMP_PATH": "/scratch/tao", "ENROOT_TEMP_PATH": "/scratch/me/enroot"}, "/scratch/tao"),
])
def test_the_submitters_enroot_temp_path_replaces_the_node_local_default(tmp_path, env, want):
    c = _conv(tmp_path, env=env)
    assert c.temp_path == want
    script = images.render_conversion(c)
    assert f"TAO_ENROOT_TEMP={want}\n" in script
    target = tmp_path / want.strip("/")
    res = _run(script.replace(f"TAO_ENROOT_TEMP={want}", f"TAO_ENROOT_TEMP={target}"), tmp_path, IMPORT_OK)
    assert res.returncode == 0 and f"temp={target}\n" in res.stderr and target.is_dir()  # the user's folder is kept
    assert _conv(tmp_path).temp_path == ""  # unset: the node's local disk (see the test above)


@pytest.mark.parametrize("bad", ["relative/tmp", "/scratch/my tmp", "/scratch/../etc"])
def test_an_enroot_temp_path_that_is_no_path_is_refused(tmp_path, bad):
    with pytest.raises(TaoError, match="ENROOT_TEMP_PATH"):
        _conv(tmp_path, env={"ENROOT_TEMP_PATH": bad})


def test_the_one_remote_check_refuses_an_empty_or_foreign_sqsh_and_only_after_the_mark(tmp_path):
    from taobank.platforms.slurm import remote

    good, empty, html, data = (tmp_path / n for n in ("good.sqsh", "empty.sqsh", "html.sqsh", "data.json"))
    good.write_bytes(b"hsqs\x00rest")
    empty.write_bytes(b"")
    html.write_bytes(b"<html>")
    data.write_bytes(b"")  # an empty data file is fine: only images are checked for the magic
    assert images.SQUASHFS_MAGIC in remote.MISSING and remote.SQSH_MARK in remote.MISSING
    args = [str(data), str(tmp_path / "gone"), remote.SQSH_MARK, str(good), str(empty), str(html),
            str(tmp_path / "gone.sqsh")]
    out = subprocess.run(["sh", "-c", remote.MISSING, "tao", *args], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [str(tmp_path / "gone"), f"{empty} (empty or not a squashfs image)",
                                       f"{html} (empty or not a squashfs image)", str(tmp_path / "gone.sqsh")]
    assert out.stderr == ""
