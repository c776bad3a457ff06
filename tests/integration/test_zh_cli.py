"""Issue 14 item 6 for the CLI: what `fix` (plan, apply, verify, undo) and `export-root` tell
the user is Chinese under --lang zh / ASCEND_DOCTOR_LANG=zh, and English stays as it was.

The detector is the zh report's (tests/integration/test_zh_report.py: three English words in a
row outside paths, commands, identifiers and quotes); the lines of a plan's diff are file
content, not prose, and are left out."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run_cli
from tests.zhcheck import english_runs, untranslated

ZH = {"ASCEND_DOCTOR_LANG": "zh"}
EN = {"ASCEND_DOCTOR_LANG": "en"}
_DIFF = re.compile(r"^    [-+ @#]")  # a diff line of a planned edit (file content)


def _prose(out: str) -> list[str]:
    return [f"{ln.strip()}  <- {runs}" for ln in out.splitlines()
            if not _DIFF.match(ln) and (runs := english_runs(ln))]


def test_fix_apply_verify_and_undo_speak_chinese(tmp_path):
    root = tmp_path / "overlay"
    r = run_cli("fix", "ldconf.ascend-conf", "--demo-root", str(root), env=ZH)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("修复计划 ldconf.ascend-conf：")
    assert "（试运行：未做任何改动；加 --apply 才会执行）" in r.stdout
    assert "风险：需要 root：写入 /etc/ld.so.conf.d/ascend.conf、写入 /etc/ld.so.conf、运行 ldconfig" \
        in r.stdout
    assert not _prose(r.stdout), "\n".join(_prose(r.stdout))

    r = run_cli("fix", "ldconf.ascend-conf", "--demo-root", str(root), "--apply", "--yes", env=ZH)
    # exit 0: verified; what reads the cache cannot be judged in an overlay (no ldconfig):
    # named as not verifiable, never as a new fail (issue 31 item 5)
    assert r.returncode == 0, r.stderr
    assert "已执行（日志 " in r.stdout and "跳过 ldconfig：诊断包不是真实机器：未运行" in r.stdout
    assert "验证 ldconf.perms：修复前 fail，修复后 pass" in r.stdout
    assert "此处无法验证（它们依赖一条未在此目标上运行的命令）：ldconf.cache" in r.stdout
    assert "新的 fail" not in r.stdout
    assert not _prose(r.stdout), "\n".join(_prose(r.stdout))

    r = run_cli("fix", "--undo", "--demo-root", str(root), env=ZH)
    assert r.returncode == 0, r.stderr
    assert re.match(rf"已在 {re.escape(str(root))} 上撤销 \S+（ldconf.ascend-conf）：恢复了 ",
                    r.stdout), r.stdout
    assert f"（在覆盖层 {root} 内；本机未被改动）" in r.stdout


def test_fix_in_english_is_unchanged(tmp_path):
    root = tmp_path / "overlay"
    r = run_cli("fix", "ldconf.ascend-conf", "--demo-root", str(root), env=EN)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("plan ldconf.ascend-conf: ")
    assert ("\n  risk: needs root: writing /etc/ld.so.conf.d/ascend.conf, writing "
            "/etc/ld.so.conf, running ldconfig\n  note: left out of ascend.conf") in r.stdout
    assert r.stdout.endswith("  verified by check: ldconf.perms\n\n"
                             "(dry run: nothing changed; add --apply to apply it)\n")
    # an overlay is not a machine: the command is shown as not run, never as `ldconfig -r`
    assert "$ ldconfig" not in r.stdout
    assert "(not run on a bundle's overlay: ldconfig — rebuild /etc/ld.so.cache)" in r.stdout


def test_fix_usage_errors_follow_the_language(tmp_path):
    r = run_cli("fix", "ldconf.ascend-conf", "--param", "novalue", "--demo-root",
                str(tmp_path / "o"), env=ZH)
    assert r.returncode == 2
    assert "--param 'novalue'：应为 KEY=VALUE 形式" in r.stderr, r.stderr
    r = run_cli("fix", "ldconf.ascend-conf", "--param", "novalue", "--demo-root",
                str(tmp_path / "o"), env=EN)
    assert "--param 'novalue': expected KEY=VALUE" in r.stderr, r.stderr


def test_export_root_reports_in_chinese(tmp_path):
    r = run_cli("export-root", str(tmp_path / "root"), env=ZH)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^已在 \S+ 下写入 \d+ 个文件、\d+ 个目录", r.stderr, re.M), r.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    r = run_cli("export-root", str(busy), env=ZH)
    assert r.returncode == 2 and f"{busy} 不是空目录" in r.stderr, r.stderr


def test_fleet_and_diff_label_in_chinese(tmp_path):
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    r = run_cli("demo", "--export", str(bundles / "node1.tar.gz"), env=EN)
    assert r.returncode == 0, r.stderr
    r = run_cli("fleet", str(bundles), env=ZH)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "集群：读取了 1 个节点"
    assert lines[1] == "结果分组（1 组；失败检查相同的节点为一组）："
    assert lines[2].startswith("  A: 1 个节点，多数：node1")
    assert "所有节点的结果相同" in lines
    one = str(bundles / "node1.tar.gz")
    r = run_cli("diff", one, one, env=ZH)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == ("检查结果、版本、ld.so.conf、npu-smi、启动参数、sysctl "
                                         "和环境变量均无差异")
    en = run_cli("diff", one, one, env=EN)
    assert en.stdout.splitlines()[-1] == ("no differences in check results, versions, "
                                          "ld.so.conf, npu-smi, launch flags, sysctls or "
                                          "environment")
    (tmp_path / "empty").mkdir()
    r = run_cli("fleet", str(tmp_path / "empty"), env=ZH)
    assert r.returncode == 2 and "中没有诊断包（*.tar.gz、*.tgz、*.tar）" in r.stderr, r.stderr


def test_triage_kb_and_exporter_messages_in_chinese(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB\n")
    r = run_cli("triage", str(log), env=ZH)
    assert r.returncode == 0, r.stderr
    assert re.search(r"（得分 [0-9.]+）$", r.stdout.splitlines()[0]), r.stdout
    assert "     第 1 行：“RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB”" in r.stdout
    assert "     详情：ascend-doctor explain " in r.stdout
    r = run_cli("explain", "no-such-entry-at-all", env=ZH)
    assert r.returncode == 2 and "知识库中没有条目 'no-such-entry-at-all'" in r.stderr, r.stderr
    r = run_cli("exporter", "--demo", "--interval", "0", env=ZH)
    assert r.returncode == 2 and "--interval 0：必须大于 0 秒" in r.stderr, r.stderr


# every recipe, with the parameters it needs to make a plan on the demo's sysroot
RECIPES = {
    "ldconf.ascend-conf": (), "service.env": (), "versions.pip-match": (),
    "sysctl.tcp-ports": (), "tlb.hugepages": ("--param", "nr_hugepages=1024"),
    "service.launch-flags": ("--param", "block-size=64"),
    "dns.hosts-pin": ("--param", "hostname=vllm.svc", "--param", "address=10.0.0.5"),
}


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("zhfix") / "root"
    r = run_cli("export-root", str(root), env=EN)
    assert r.returncode == 0, r.stderr
    return root


def test_every_recipe_is_listed():
    from ascend_doctor.fixes import FixRegistry
    assert set(FixRegistry.discover().recipes) == set(RECIPES)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_recipe_plans_in_chinese(demo_root, recipe):
    r = run_cli("fix", recipe, "--root", str(demo_root), "--lang", "zh", *RECIPES[recipe])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"修复计划 {recipe}："), r.stdout[:200]
    assert "验证检查：" in r.stdout
    assert not _prose(r.stdout), "\n".join(_prose(r.stdout))


def test_recipe_notes_and_skips_in_chinese_and_english(demo_root):
    zh = run_cli("fix", "sysctl.tcp-ports", "--root", str(demo_root), "--lang", "zh").stdout
    assert "注意：net.ipv4.tcp_fin_timeout 当前为 60，将改为 30" in zh
    assert "sysroot 的内核参数不是运行中的内核参数；该配置片段在它启动时生效" in zh
    en = run_cli("fix", "sysctl.tcp-ports", "--root", str(demo_root), "--lang", "en").stdout
    assert "  note: net.ipv4.tcp_fin_timeout is now 60, will be 30\n" in en
    assert ("(skipped in a sysroot: sysctl --system — a sysroot's kernel settings are not "
            "live; the drop-in takes effect when it boots)") in en


def test_recipe_refusals_follow_the_language(demo_root):
    r = run_cli("fix", "tlb.hugepages", "--root", str(demo_root), "--param", "thp=bogus",
                "--lang", "zh")
    assert r.returncode == 2
    assert r.stderr.strip() == ("ascend-doctor: tlb.hugepages：thp='bogus' 不是 always, "
                                "madvise, never 之一"), r.stderr
    r = run_cli("fix", "dns.hosts-pin", "--root", str(demo_root), "--lang", "en")
    assert r.returncode == 2
    assert r.stderr.strip() == ("ascend-doctor: dns.hosts-pin needs --param hostname=NAME "
                                "--param address=IP"), r.stderr


def test_explain_and_triage_speak_chinese():
    r = run_cli("explain", "ASC-LIB-004", "--lang", "zh", "--demo")
    assert r.returncode == 0, r.stderr
    assert "\n## 原因\n" in r.stdout and "\n## 处理步骤\n" in r.stdout
    assert "→ 自动修复（先预览）：ascend-doctor fix ldconf.ascend-conf" in r.stdout
    assert "相关检查：" in r.stdout and "\n来源：https://" in r.stdout
    assert not untranslated(r.stdout), "\n".join(untranslated(r.stdout))
    en = run_cli("explain", "ASC-LIB-004", "--lang", "en")
    assert "\n## Cause\n" in en.stdout and "→ automatic fix (dry run first): ascend-doctor fix " \
        "ldconf.ascend-conf" in en.stdout and "\nSources: https://" in en.stdout
    r = run_cli("triage", "-", "--lang", "zh", input="nothing known here\n")
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == "未匹配到已知的错误特征"
    assert r.stdout.splitlines()[1].startswith("下一步：在主机上运行 `ascend-doctor check")


def test_kb_lint_speaks_chinese():
    r = run_cli("kb", "lint", "--lang", "zh")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.fullmatch(r"\d+ 个文件，\d+ 行语料，0 个问题\n", r.stderr), r.stderr
    r = run_cli("kb", "lint", "--lang", "en")
    assert re.fullmatch(r"\d+ files, \d+ corpus lines, 0 problems\n", r.stderr), r.stderr


def test_kb_lint_problems_in_chinese(tmp_path):
    bad = tmp_path / "site.toml"
    bad.write_text('[[entry]]\nid = "X"\nsources = ["seed:notes"]\n', encoding="utf-8")
    r = run_cli("kb", "lint", "--lang", "zh", str(bad))
    assert r.returncode == 1
    assert "site.toml：X：缺少字段 'title'" in r.stdout.splitlines()
    assert "site.toml：X.sources：'seed:notes' 不是公开来源（应以 ('https://', 'doc:', 'man:') " \
        "之一开头）" in r.stdout.splitlines(), r.stdout
    assert not untranslated(r.stdout), "\n".join(untranslated(r.stdout))
    en = run_cli("kb", "lint", "--lang", "en", str(bad))
    assert "site.toml: X: missing field 'title'" in en.stdout.splitlines()
    assert "site.toml: X: id is not of the form ASC-<DOMAIN>-NNN" in en.stdout.splitlines()


def test_error_paths_speak_the_language_asked_for(tmp_path):
    """The one-line errors (unknown check, journal refusals, exclusive flags) follow --lang or
    LANG, with a suggestion where one is close; English keeps its words."""
    cases = [
        (["demo", "--only", "ldconf.ordr"], "未知的检查项 id 或标签 'ldconf.ordr'；是否想输入 "
                                            "ldconf.order"),
        (["fix", "--undo", "9-x"], "'9-x' 不是修复日志 id"),
        (["check", "--json", "--text"], "--json、--text、--markdown、--npd 只能选一个"),
        (["check", "--bundle", str(tmp_path / "none.tar.gz")], "不存在"),
    ]
    for argv, want in cases:
        for how in (["--lang", "zh"], None):
            r = run_cli(*argv, *(how or []), env=None if how else {"LANG": "zh_CN.UTF-8",
                                                                    "ASCEND_DOCTOR_LANG": ""})
            assert r.returncode == 2 and want in r.stderr, (argv, how, r.stderr)
            assert not _prose(r.stderr), _prose(r.stderr)
    r = run_cli("demo", "--only", "ldconf.ordr", "--lang", "en")
    assert "unknown check id or tag 'ldconf.ordr'; did you mean ldconf.order" in r.stderr


def test_capture_and_profile_parse_errors_in_chinese(tmp_path):
    """A truncated pcap and an op_summary with the wrong columns: the reason, not only its
    frame, is Chinese (the byte offset and the file name stay as they are)."""
    root = tmp_path / "root"
    root.mkdir()
    pcap = tmp_path / "cut.pcap"
    pcap.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + b"\0" * 10)
    prof = tmp_path / "prof" / "PROF_1" / "device_0" / "summary"
    prof.mkdir(parents=True)
    (prof / "op_summary_0_1.csv").write_text("x,y\n1,2\n", encoding="utf-8")
    r = run_cli("check", "--root", str(root), "--pcap", str(pcap), "--profile",
                str(tmp_path / "prof"), "--only", "dns.capture,msprof", "-v", "--lang", "zh")
    flat = re.sub(r"\s+", "", r.stdout)  # wrapped lines joined
    assert "全局文件头被截断（位于第0字节）" in flat, r.stdout
    assert "不是op_summary/kernel_details导出文件：缺少列TaskDuration(us)" in flat, r.stdout
    # one unusable input is one problem, named by the input, whatever checks needed it
    assert flat.startswith("⚠2个问题解释了5项无法运行的检查；最严重的："), r.stdout
    assert not _prose(r.stdout), _prose(r.stdout)
