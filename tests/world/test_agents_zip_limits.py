"""Bounded reads: a zip member's declared expanded size is checked against a limit before
anything reads it (our ``data`` read, SB3's ``load_from_zip_file``, ``torch.load``,
``torch.jit.load``), and a member whose stream is not what its directory declares is a
clear error too. The files are built here from the bundled PPO zip; the memory each load
would have taken is measured in benchmarks/bench_zip_limits.py, not here."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
import stable_baselines3  # noqa: F401  (in pytester's sys.modules snapshots: see below)
import torch

from pytest_rlaudit.errors import PolicyError
from pytest_rlaudit.world.agents import as_policy
from pytest_rlaudit.world.agents.archives import LIMIT_VARIABLE, MIB, SETTINGS_MB, check_archive
from pytest_rlaudit.world.agents.checkpoints import load_checkpoint

# SB3 is imported above so that an in-process pytester run, which restores sys.modules
# after it, does not leave SB3 (and its cv2) to be imported again, halfway.
ROOT = Path(__file__).parents[2]
BUNDLED = ROOT / "examples" / "ppo_cartpole.zip"


def _members(src: Path = BUNDLED) -> dict[str, bytes]:
    with zipfile.ZipFile(src) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(dst: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return dst


def _padded_data(mib: float) -> bytes:
    """The bundled model's ``data`` JSON, valid still, padded with spaces to ``mib`` MiB
    (deflated to kilobytes: what a crafted file would do)."""
    data = _members()["data"]
    return data + b" " * (int(mib * MIB) - len(data))


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch):
    monkeypatch.delenv(LIMIT_VARIABLE, raising=False)


def test_a_data_member_over_its_limit_is_refused_before_it_is_read(tmp_path):
    crafted = _write(tmp_path / "big_data.zip", {**_members(),
                                                  "data": _padded_data(SETTINGS_MB + 1)})
    assert crafted.stat().st_size < MIB  # small on disk, large once read
    with pytest.raises(PolicyError) as caught:
        as_policy(str(crafted), env="CartPole-v1")
    message = str(caught.value)
    assert str(crafted) in message and "'data'" in message
    assert "17.0 MiB" in message and "16.0 MiB" in message  # its size and the limit
    assert f"{LIMIT_VARIABLE}=17" in message  # how to raise it, to a value that admits it


def test_the_limit_is_raised_by_the_environment_variable_for_a_giant_model(tmp_path, monkeypatch):
    crafted = _write(tmp_path / "big_data.zip", {**_members(),
                                                  "data": _padded_data(SETTINGS_MB + 1)})
    monkeypatch.setenv(LIMIT_VARIABLE, "17")
    policy = as_policy(str(crafted), env="CartPole-v1")  # the padding is JSON whitespace
    assert policy.name.startswith("PPO")


def test_a_lower_limit_applies_to_weights_and_names_the_member(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "0.05")  # 51 KiB: policy.optimizer.pth is 81 KiB
    with pytest.raises(PolicyError, match=r"'policy\.optimizer\.pth' expands to 81\.3 KiB, over "
                                          r"the limit of 51\.2 KiB \(a model's weights"):
        as_policy(str(BUNDLED), env="CartPole-v1")


def test_a_limit_that_is_not_a_size_is_named(monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "lots")
    with pytest.raises(PolicyError, match=f"{LIMIT_VARIABLE}='lots' is not a size in MiB"):
        as_policy(str(BUNDLED), env="CartPole-v1")


def test_a_weights_record_inside_a_pth_member_is_bounded_too(tmp_path, monkeypatch):
    """A ``.pth`` member is itself a zip (torch's format): its tensor records, which
    ``torch.load`` allocates at their declared size, keep the limits too."""
    saved = tmp_path / "policy.pth"
    torch.save({"w": torch.zeros(40_000)}, saved)  # a 156 KiB record...
    deflated = _write(tmp_path / "deflated.pth", _members(saved))  # ...deflated to little
    crafted = _write(tmp_path / "inner.zip", {**_members(), "policy.pth": deflated.read_bytes()})
    monkeypatch.setenv(LIMIT_VARIABLE, "0.1")  # 102.4 KiB: every outer member is under it
    with zipfile.ZipFile(crafted) as archive:
        assert max(i.file_size for i in archive.infolist()) < 0.1 * MIB
    with pytest.raises(PolicyError, match=r"its member 'policy\.pth' holds a record '\S+/data/0' "
                                          r"that expands to 156\.2 KiB, over the limit of 102\.4 KiB"):
        as_policy(str(crafted), env="CartPole-v1")


def _declare_smaller(path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size ``member``'s local header and central directory entry
    declare, leaving its stream as it is: an archive that lies about a member's size."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info, offset = archive.getinfo(member), archive.start_dir
    struct.pack_into("<I", raw, info.header_offset + 22, size)  # the local header's
    while raw[offset:offset + 4] == b"PK\x01\x02":  # the central directory's entries
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", raw, offset + 28)
        if raw[offset + 46:offset + 46 + name_len] == member.encode():
            struct.pack_into("<I", raw, offset + 24, size)
        offset += 46 + name_len + extra_len + comment_len
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("member", ["data", "policy.pth"])
def test_a_member_whose_stream_is_longer_than_declared_is_a_clear_error(tmp_path, member):
    crafted = _write(tmp_path / "lies.zip", {**_members(), "data": _padded_data(2)})
    _declare_smaller(crafted, member, 20_000)
    with zipfile.ZipFile(crafted) as archive:
        assert archive.getinfo(member).file_size == 20_000  # the lie is read as declared
    with pytest.raises(PolicyError) as caught:
        as_policy(str(crafted), env="CartPole-v1")
    message = str(caught.value)
    assert str(crafted) in message and f"{member!r} is damaged or not what its directory " \
        "declares" in message and "not an intact SB3 model zip" in message


def test_an_encrypted_member_is_a_clear_error(tmp_path):
    crafted = _write(tmp_path / "encrypted.zip", _members())
    raw = bytearray(crafted.read_bytes())
    with zipfile.ZipFile(crafted) as archive:
        info, offset = archive.getinfo("data"), archive.start_dir
    raw[info.header_offset + 6] |= 1  # the "encrypted" flag, in the local header...
    raw[offset + 8] |= 1  # ...and in the first central directory entry (data's)
    crafted.write_bytes(bytes(raw))
    with pytest.raises(PolicyError, match=r"its member 'data' is damaged or not what its "
                                          r"directory declares \(RuntimeError: .*encrypted"):
        as_policy(str(crafted), env="CartPole-v1")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit's, of 2.13
def test_a_torchscript_file_with_a_record_over_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "policy.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 300)), str(path))  # 4.7 KiB of weights
    monkeypatch.setenv(LIMIT_VARIABLE, "0.004")
    with pytest.raises(PolicyError, match=r"policy\.pt'.*'\S+/data/\d' expands to"):
        as_policy(str(path))


def test_a_checkpoint_with_a_record_over_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "agent.pt"
    torch.save(torch.nn.Linear(4, 300).state_dict(), path)
    monkeypatch.setenv(LIMIT_VARIABLE, "0.004")
    with pytest.raises(PolicyError, match=r"agent\.pt'.*'\S+/data/\d' expands to"):
        load_checkpoint(torch.nn.Linear(4, 300), path)
    monkeypatch.delenv(LIMIT_VARIABLE)
    load_checkpoint(torch.nn.Linear(4, 300), path)  # under the default limit it loads


def test_the_sum_of_members_is_bounded(tmp_path, monkeypatch):
    """Many members each under the limit add up: at most four times the limit together."""
    members = {"data": _members()["data"], "policy.pth": _members()["policy.pth"]}
    members.update({f"notes/{i}.txt": b"x" * 30_000 for i in range(10)})  # 300 KB together
    crafted = _write(tmp_path / "many.zip", members)
    monkeypatch.setenv(LIMIT_VARIABLE, "0.05")
    with pytest.raises(PolicyError, match=r"all its members together expand to 3\d\d\.\d KiB, "
                                          r"over the limit of 204\.8 KiB \(4 times the limit of one member\)"):
        check_archive(crafted, sb3=True)


def test_bundled_and_zoo_zips_keep_every_default_limit():
    for path in [BUNDLED, *sorted((ROOT / "tests" / "data" / "zoo").glob("*/*/*.zip"))]:
        check_archive(path, sb3=True)
    assert json.loads(_members()["data"])  # and their data is what the crafted files pad


def test_the_plugin_and_its_worker_processes_read_the_limit_at_each_load(tester, tmp_path,
                                                                         monkeypatch):
    crafted = _write(tmp_path / "big_data.zip", {**_members(),
                                                  "data": _padded_data(SETTINGS_MB + 1)})
    args = ("--rl-audit", f"--rl-agent={crafted}", "--rl-env", "CartPole-v1", "--rl-episodes",
            "2", "--rl-scenarios", "delay", "--rl-workers", "2", "-p", "no:cacheprovider")
    refused = tester.runpytest(*args)
    refused.stdout.fnmatch_lines([f"*'data' expands to 17.0 MiB*{LIMIT_VARIABLE}=17*"])
    assert refused.ret != pytest.ExitCode.OK
    monkeypatch.setenv(LIMIT_VARIABLE, "17")
    tester.runpytest(*args).assert_outcomes(passed=1)
