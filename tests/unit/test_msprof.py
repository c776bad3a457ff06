"""msprof / torch_npu exports with the real headers (facts/ascend-stack.md §4) and the rules."""

from __future__ import annotations

import io

import pytest

from ascend_doctor.checks import msprof as rules
from ascend_doctor.errors import ParseError, SourceError
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.msprof import (OP_COLUMNS, ProfileAcc, gather_profile, parse_op_rows,
                                  scan_timeline)

from .profgen import (API_HEADER, OP_SUMMARY_HEADER, csv_text, op_summary_rows, timeline,
                      write_msprof, write_torch_npu)

H2D = "host to device"


def profile(path):
    return gather_profile(LiveHost(), RunOptions(profile_dir=str(path)))


def statuses(findings):
    return [f.status for f in findings]


def test_good_profile_passes(tmp_path):
    write_msprof(tmp_path, memcpy_us=50.0, copies=[(H2D, 8192, 20), ("device to host", 4096, 20)])
    p = profile(tmp_path)
    (d,) = p.devices
    assert p.layout == "msprof" and d.kernel_us == pytest.approx(20 * 4 * 320.0)
    assert d.memcpy_tasks == 20 and d.api_memcpy_us == 100.0  # host rows attach to device 0
    assert d.top_ops[0][0] == "MatMulV2"
    assert statuses(rules.copy_bound(p)) == [Status.PASS]
    assert statuses(rules.weights_recopied(p)) == [Status.PASS]
    assert statuses(rules.hccl_copies(p)) == [Status.PASS]
    assert statuses(rules.export(p)) == [Status.PASS]


def test_copy_bound_weights_recopied_is_the_seed_case(tmp_path):
    write_msprof(tmp_path, memcpy_us=2000.0, api_memcpy_us=40000.0,
                 copies=[(H2D, 256 << 20, 20), ("device to host", 4096, 20)])
    p = profile(tmp_path)
    (f,) = rules.copy_bound(p)
    assert f.status == Status.FAIL and "MEMCPY_ASYNC tasks 40.0 ms (H2D 5,120.0 MiB, D2H 0.1 MiB " \
        "in the timeline) = 156% of kernel time 25.6 ms" in f.message and f.kb == ("ASC-PROF-001",)
    assert f.evidence["bytes_by_direction"] == {H2D: 20 * (256 << 20), "device to host": 20 * 4096}
    assert f.evidence["top_ops"][0][0] == "MatMulV2"
    (w,) = rules.weights_recopied(p)
    assert w.status == Status.FAIL and "20 host-to-device copies of the same 256.0 MiB" in w.message


def test_hccl_copies_are_split_off(tmp_path):
    write_msprof(tmp_path, hccl_memcpy_us=3000.0)
    p = profile(tmp_path)
    (d,) = p.devices
    assert d.memcpy_tasks == 0 and d.hccl_memcpy_tasks == 20 and d.hccl_memcpy_us == 60000.0
    assert statuses(rules.copy_bound(p)) == [Status.PASS]  # not a weight-copy problem
    (f,) = rules.hccl_copies(p)
    assert f.status == Status.WARN and f.kb == ("ASC-PROF-002",)


def test_legacy_layout_with_bom_and_block_dim(tmp_path):
    write_msprof(tmp_path, memcpy_us=900.0, legacy=True, bom=True, block_dim=True)
    p = profile(tmp_path)
    assert p.layout == "msprof-legacy" and p.devices[0].memcpy_tasks == 20
    (f,) = rules.copy_bound(p)
    assert f.status == Status.FAIL and "70% of kernel time" in f.message


def test_torch_npu_output(tmp_path):
    write_torch_npu(tmp_path, memcpy_us=100.0, steps=10)
    p = profile(tmp_path)
    (d,) = p.devices
    assert p.layout == "torch_npu" and d.steps == 10 and d.kernel_us == 4000.0
    assert not any("op_statistic" in f for f in p.files)  # kernel_details already has the truth
    (f,) = rules.copy_bound(p)
    assert f.status == Status.WARN and "25% of kernel time" in f.message


def test_quoted_fields_with_commas(tmp_path):
    rows = op_summary_rows(2)
    text = csv_text(OP_SUMMARY_HEADER, rows)
    assert '"1,4096;4096,4096"' in text
    acc = ProfileAcc()
    assert parse_op_rows(io.StringIO(text, newline=""), acc) == len(rows)
    assert acc.devices["0"].kernel_tasks == len(rows) and not acc.problems


def test_empty_directory_and_missing(tmp_path):
    # a --profile the user named that holds no export, or is absent, is an error (issue 13.2)
    with pytest.raises(SourceError, match=f"--profile {tmp_path}: no op_summary"):
        profile(tmp_path)
    with pytest.raises(SourceError, match="nope: not found"):
        profile(tmp_path / "nope")


def test_empty_csv_is_a_parse_error(tmp_path):
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_1.csv").write_text("")
    with pytest.raises(ParseError) as ei:
        profile(tmp_path)
    assert "op_summary_1.csv" in ei.value.source and "empty" in ei.value.reason


def test_header_only_reports_no_rows(tmp_path):
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_1.csv").write_text(",".join(OP_SUMMARY_HEADER) + "\n")
    p = profile(tmp_path)
    assert statuses(rules.export(p)) == [Status.WARN]


def test_truncated_row_is_counted_not_fatal(tmp_path):
    prof = write_msprof(tmp_path, memcpy_us=50.0)
    f = next((prof / "mindstudio_profiler_output").glob("op_summary*.csv"))
    data = f.read_bytes()
    f.write_bytes(data[:len(data) - 40])  # the last row is cut in the middle
    p = profile(tmp_path)
    (x,) = rules.export(p)
    assert x.status == Status.WARN and "1 of 180 rows cut short" in x.message


def test_wrong_columns_name_the_file(tmp_path):
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "api_statistic_1.csv").write_text("Device_id,Level,Name,Duration\nhost,acl,x,1\n")
    with pytest.raises(ParseError) as ei:
        profile(tmp_path)
    assert "API Name" in ei.value.reason and "api_statistic_1.csv" in ei.value.source


def test_header_aliases_cover_both_spellings():
    assert "Block Dim" in OP_COLUMNS["block"] and "Accelerator Core" in OP_COLUMNS["task_type"]


def test_timeline_scan_across_chunk_boundaries():
    text = timeline([(H2D, 1 << 26, 50), ("device to host", 512, 7)]).encode()
    acc = ProfileAcc()
    chunks = [text[i:i + 777] for i in range(0, len(text), 777)] + [b""]
    assert scan_timeline(chunks, acc) == 57
    assert acc.copies == {(H2D, 1 << 26): 50, ("device to host", 512): 7}


def test_api_statistic_header_is_the_real_one():
    assert API_HEADER == ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)",
                          "Min(us)", "Max(us)", "Variance"]


def test_a_directory_link_out_of_the_profile_tree_is_not_followed(tmp_path):
    """--profile DIR reads DIR's tree: a PROF_* link to another run's export elsewhere (or to
    any directory holding CSVs) is named, never read as part of this profile."""
    elsewhere = tmp_path / "elsewhere"
    other = write_msprof(elsewhere, memcpy_us=2000.0, api_memcpy_us=40000.0)
    prof = tmp_path / "prof"
    write_msprof(prof)
    (prof / "PROF_000002_link").symlink_to(other)
    p = profile(prof)
    assert all(f.startswith(str(prof) + "/PROF_000001") for f in p.files), p.files
    assert any("PROF_000002_link" in x and "not followed" in x for x in p.problems), p.problems
    assert statuses(rules.copy_bound(p)) == [Status.PASS]  # the other run's copies not counted
    # only the link: an error that names it, not "no CSV"
    only = tmp_path / "only"
    only.mkdir()
    (only / "PROF_000003").symlink_to(other)
    with pytest.raises(SourceError, match="PROF_000003/.* -> .*elsewhere/.*not followed"):
        profile(only)
    # a link inside the tree, and a --profile that is itself a link, are followed
    (prof / "PROF_000004_alias").symlink_to(prof / "PROF_000001_20260323031749197_00815596RKPKAHRB")
    (tmp_path / "prof-link").symlink_to(prof)
    p = profile(tmp_path / "prof-link")
    assert any("PROF_000004_alias" in f for f in p.files) and not any(
        "PROF_000002" in f for f in p.files)
