"""`ascend-doctor diff GOOD BAD` and `ascend-doctor fleet BUNDLE…|DIR`.

"Why does node 5 fail when node 1 works?": both read bundles written by `collect` through
the bounded bundle reader, run the checks on each, and show what differs. Exit codes follow
diff(1): 0 nothing differs (one outcome across the fleet), 1 differences (odd nodes),
2 trouble (a bundle that cannot be read). The logic lives in ``doctor/fleet.py``; this
module stays import-light because the CLI imports it at start.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

import click

from .cli_common import default_lang
from .i18n import tr, tt

MAX_LISTED = 8  # node names listed per line of the text output before "… and N more"


def _out(lines: Iterable[str]) -> None:
    """Every printed line is redacted and has its control characters made visible: names,
    messages and values come from strangers' bundles."""
    from .redact import neutralise, redact_text

    sys.stdout.write("".join(neutralise(redact_text(ln)) + "\n" for ln in lines))


def _out_json(doc: dict[str, Any]) -> None:
    """JSON redacted value by value (a redacted serialization could break the syntax);
    json.dumps escapes control characters itself."""
    from .redact import redact_obj

    sys.stdout.write(json.dumps(redact_obj(doc), indent=1, sort_keys=True) + "\n")


def _names(nodes: list[str], lang: str = "en") -> str:
    shown = ", ".join(nodes[:MAX_LISTED])
    return shown + (tt(lang, " … and {n} more", n=len(nodes) - MAX_LISTED)
                    if len(nodes) > MAX_LISTED else "")


def _v(x: Any, lang: str = "en") -> str:
    return tt(lang, "(unset)") if x is None else str(x)


def render_diff(d: dict[str, Any], lang: str = "en") -> list[str]:
    """The diff as text, the most telling difference first (labels in ``lang``; values and
    check messages as the bundles hold them)."""
    from .fleet import diff_is_empty

    def v(x: Any) -> str:
        return _v(x, lang)

    a, b = (d[k] + (f" ({d[k + '_host']})" if d[k + "_host"] and d[k + "_host"] not in d[k]
                    else "") for k in ("a", "b"))
    lines = [f"A = {a}", f"B = {b}"]
    if diff_is_empty(d):
        return lines + [tt(lang, "no differences in check results, versions, ld.so.conf, "
                                 "npu-smi, launch flags, sysctls or environment")]
    from .fleet import STACK

    stack = d.get("stack") or []
    if stack:  # the drift that matters leads: kernel, driver, firmware, CANN, … vllm-ascend
        lines.append(tt(lang, "stack that differs (kernel, driver, firmware, CANN, torch, "
                              "torch_npu, vLLM, vllm-ascend):"))
        lines += [f"  {x['name']:<14} A {v(x['a']):<20} B {v(x['b'])}" for x in stack]
    if d.get("hw"):  # a device below the npu-smi table: a down port, ECC, firmware
        lines.append(tt(lang, "hardware that differs (RoCE port, ECC, firmware by device):"))
        lines += [f"  {x['name']:<22} A {v(x['a']):<14} B {v(x['b'])}" for x in d["hw"]]
    if d["flags"]:
        lines.append(tt(lang, "launch flags that differ:"))
        lines += [f"  --{x['name']:<28} A {v(x['a']):<20} B {v(x['b'])}" for x in d["flags"]]
    if d["checks"]:
        lines.append(tt(lang, "checks that differ ({n}):", n=len(d["checks"])))
        for c in d["checks"]:
            kb = f" [{', '.join(c['kb'])}]" if c["kb"] else ""
            lines.append(f"  {c['check']:<28} A {v(c['a']):<5}  B {v(c['b']):<5}{kb}")
            for side in ("a", "b"):
                if c[f"{side}_message"]:
                    lines.append(f"      {side.upper()}: {tr(c[side + '_message'], lang)}")
    other = [x for x in d["versions"] if x["name"] not in STACK]
    if other:
        lines.append(tt(lang, "versions that differ:"))
        lines += [f"  {x['name']:<14} A {v(x['a']):<20} B {v(x['b'])}" for x in other]
    if d["ldconf"]:
        ld = d["ldconf"]
        none = tt(lang, "(none)")
        lines.append(tt(lang, "ld.so.conf search order differs:"))
        lines.append("  A: " + (" ".join(ld["a"]) or none))
        lines.append("  B: " + (" ".join(ld["b"]) or none))
        if ld["only_a"]:
            lines.append("  " + tt(lang, "only in A: {dirs}", dirs=" ".join(ld["only_a"])))
        if ld["only_b"]:
            lines.append("  " + tt(lang, "only in B: {dirs}", dirs=" ".join(ld["only_b"])))
    if d["npu"]:
        lines.append(tt(lang, "npu-smi health that differs (npu/chip):"))
        lines += [f"  {x['name']:<6} A {v(x['a']):<10} B {v(x['b'])}" for x in d["npu"]]
    if d["sysctls"]:
        lines.append(tt(lang, "sysctls that differ:"))
        lines += [f"  {x['name']:<40} A {v(x['a']):<12} B {v(x['b'])}" for x in d["sysctls"]]
    if d["env"]:
        lines.append(tt(lang, "service environment that differs (redacted):"))
        lines += [f"  {x['name']:<28} A {v(x['a'])}\n  {'':<28} B {v(x['b'])}"
                  for x in d["env"]]
    return lines


def render_fleet(r: dict[str, Any], lang: str = "en") -> list[str]:
    """The fleet as text: outcome groups (the majority first, then the odd ones), problems
    common to all or to some nodes, and what drifts (labels in ``lang``)."""
    def names(nodes: list[str]) -> str:
        return _names(nodes, lang)

    lines = [tt(lang, "fleet: {n} nodes read", n=r["nodes"])
             + (tt(lang, ", {n} bundles refused", n=len(r["refused"])) if r["refused"] else "")]
    for x in r["refused"]:
        lines.append("  " + tt(lang, "refused {bundle}: {reason}", bundle=x["bundle"],
                               reason=tr(x["reason"], lang)))
    if not r["nodes"]:
        return lines
    key = [x for x in r["drift"] if x.get("key")]
    if key:  # what an operator needs first: the stack and launch flags off the majority
        lines.append(tt(lang, "stack drift (kernel, driver, firmware, CANN, torch, torch_npu, "
                              "vLLM, vllm-ascend, launch flags):"))
        for x in key:
            for o in x["others"]:
                lines.append("  " + tt(lang, "{field}: {value} on {nodes} (majority: {majority} "
                                             "on {n})", field=x["field"], value=o["value"],
                                       nodes=names(o["nodes"]), majority=x["majority"],
                                       n=x["majority_count"]))
        odd = r.get("stack_odd_nodes") or []
        lines.append("  " + tt(lang, "odd nodes ({n}): {nodes}", n=len(odd), nodes=names(
            [f"{o['node']} ({', '.join(f.split(' ', 1)[1] for f in o['fields'])})"
             for o in odd])))
    hw = r.get("hardware_odd") or []
    if hw:  # which node's which device differs from the rest, before the outcome groups
        lines.append(tt(lang, "hardware off the majority (node, device):"))
        lines += ["  " + tt(lang, "{node}: {device} is {value} (majority: {majority} on {n})",
                            node=x["node"], device=x["device"], value=x["value"],
                            majority=x["majority"], n=x["majority_count"]) for x in hw[:32]]
        if len(hw) > 32:
            lines.append("  " + tt(lang, "and {n} more", n=len(hw) - 32))
    lines.append(tt(lang, "outcome groups ({n}; nodes with the same failing checks):",
                    n=len(r["groups"])))
    for i, g in enumerate(r["groups"]):
        tag = tt(lang, "majority") if g["majority"] else tt(lang, "odd")
        lines.append(f"  {chr(65 + i) if i < 26 else i}: "
                     + tt(lang, "{n} node(s), {tag}: {nodes}", n=g["size"], tag=tag,
                          nodes=names(g["nodes"])))
        if g["majority"]:
            lines.append("     " + tt(lang, "failing: {checks}",
                                      checks=", ".join(g["failing"]) or tt(lang, "nothing")))
        else:
            if g["extra_vs_majority"]:
                lines.append("     " + tt(lang, "also failing: {checks}",
                                          checks=", ".join(g["extra_vs_majority"])))
            if g["missing_vs_majority"]:
                lines.append("     " + tt(lang, "not failing here (fails on the majority): "
                                                "{checks}",
                                          checks=", ".join(g["missing_vs_majority"])))
    if r["common_problems"]:
        lines.append(tt(lang, "problems on every node ({n}):", n=len(r["common_problems"])))
        lines += [f"  {p['check']:<28} {p['status']:<5} {tr(p['message'], lang)}"
                  for p in r["common_problems"]]
    if r["some_problems"]:
        lines.append(tt(lang, "problems on some nodes ({n}):", n=len(r["some_problems"])))
        for p in r["some_problems"]:
            where = (tt(lang, "all but {nodes}", nodes=names(p["absent_on"]))
                     if p["count"] > r["nodes"] / 2 else names(p["nodes"]))
            lines.append(f"  {p['check']:<28} {p['status']:<5} {p['count']}/{r['nodes']}: "
                         f"{where}")
            if p["message"]:
                lines.append(f"      {tr(p['message'], lang)}")
    drift = [x for x in r["drift"] if not x.get("per_node") and not x.get("key")
             and not x["field"].startswith("hw ")]
    if drift:
        lines.append(tt(lang, "other drift (majority value, then the others):"))
        for x in drift:
            lines.append("  " + tt(lang, "{field}: {value} on {n} node(s)", field=x["field"],
                                   value=x["majority"], n=x["majority_count"]))
            for o in x["others"]:
                lines.append(f"      {o['value']}: {names(o['nodes'])}")
    per_node = [x["field"] for x in r["drift"] if x.get("per_node")]
    if per_node:
        lines.append(tt(lang, "different on every node (not drift): {fields}",
                        fields=", ".join(per_node)))
    if len(r["groups"]) == 1 and not drift and not key:
        lines.append(tt(lang, "every node has the same outcome"))
    return lines


@click.command("diff")
@click.argument("good", type=click.Path(dir_okay=False))
@click.argument("bad", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--timeout", type=float, default=None, help="Per-check timeout in seconds.")
def diff_cmd(good: str, bad: str, as_json: bool, timeout: float | None) -> None:
    """What differs between two bundles (GOOD, then BAD): check results first, then
    versions, ld.so.conf order, npu-smi health, launch flags, sysctls, environment.

    \b
    Example:
      ascend-doctor diff node1.tar.gz node5.tar.gz
    """
    from .errors import BundleError
    from .fleet import diff_is_empty, diff_nodes, fleet_registry, load_node

    reg = fleet_registry()
    nodes = []
    for p in (good, bad):
        node = load_node(p, reg, timeout)
        if node.error:
            raise BundleError(tr(node.error, default_lang()))
        nodes.append(node)
    d = diff_nodes(*nodes)
    if as_json:
        _out_json(d)
    else:
        _out(render_diff(d, default_lang()))
    sys.exit(0 if diff_is_empty(d) else 1)


@click.command("fleet")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--nodes-json", is_flag=True,
              help="With --json: also each node's summary (versions, statuses, env).")
@click.option("--timeout", type=float, default=None, help="Per-check timeout in seconds.")
def fleet_cmd(inputs: tuple[str, ...], as_json: bool, nodes_json: bool,
              timeout: float | None) -> None:
    """Many bundles (files, or directories of *.tar.gz): nodes grouped by outcome, the odd
    ones pointed out, problems common to all or to some, and version/config drift.

    \b
    Example:
      ascend-doctor fleet bundles/
    """
    from .errors import UsageError
    from .fleet import FleetAccumulator, bundle_paths, fleet_registry, iter_nodes

    try:
        paths = bundle_paths(inputs)
    except ValueError as exc:  # the message in the reader's language
        raise ValueError(tr(exc.args[0], default_lang()) if exc.args else str(exc)) from None
    if not paths:
        raise UsageError(tt(default_lang(), "no bundles (*.tar.gz, *.tgz, *.tar) in {inputs}",
                            inputs=" ".join(inputs)))
    reg = fleet_registry()
    acc = FleetAccumulator()
    summaries = []
    for node in iter_nodes(paths, reg, timeout):
        acc.add(node)
        if as_json and nodes_json:
            summaries.append(node.to_json())
        if sys.stderr.isatty():
            click.echo(f"\r\033[K{len(acc.names) + len(acc.refused)}/{len(paths)} {node.name}",
                       err=True, nl=False)
    if sys.stderr.isatty():
        click.echo("\r\033[K", err=True, nl=False)
    r = acc.result()
    if as_json:
        if nodes_json:
            r["node_summaries"] = summaries
        _out_json(r)
    else:
        _out(render_fleet(r, default_lang()))
    sys.exit(2 if r["refused"] else 1 if len(r["groups"]) > 1 or r["stack_odd_nodes"] else 0)


COMMANDS = (diff_cmd, fleet_cmd)
