#!/usr/bin/env python3
"""Checks what gpuwire-info says, in text and in JSON, against the machine.

    check_info.py --tool PATH --ompi-version X.Y.Z [--ucx-version X.Y.Z] MODE

MODE
  host      the report as it must read on any machine: the GPU verdict with
            its reason, the Open MPI match, the UCX version, the RDMA devices
            (none where /sys/class/infiniband is empty), the engine's paths
  settings  OMPI_MCA_pml_gpuwire_* and UCX_TLS change the report as they
            change the engine
  gpu       GPUs, their links and the device paths; exits 77 (skipped)
            without a usable GPU
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OMPI_MCA_pml_gpuwire_") and k != "OMPI_MCA_mca_base_component_path"
           and k != "OMPI_MCA_coll_gpuwire_select_file"}
    env.update(extra)
    return env


def run(tool, args, env):
    p = subprocess.run([tool] + args, env=env, capture_output=True, text=True, timeout=50)
    return p.returncode, p.stdout


def report(tool, env=None):
    """(text, parsed JSON) of one machine state; the JSON is also checked by json.tool."""
    env = env or clean_env()
    rc, text = run(tool, [], env)
    check(rc == 0, f"text report exited {rc}")
    rc, raw = run(tool, ["--json"], env)
    check(rc == 0, f"JSON report exited {rc}")
    tool_check = subprocess.run([sys.executable, "-m", "json.tool"], input=raw,
                                capture_output=True, text=True)
    check(tool_check.returncode == 0, f"python3 -m json.tool rejects the output: {tool_check.stderr}")
    return text, json.loads(raw)


def has_line(text, fragment):
    return any(fragment in line for line in text.splitlines())


def rdma_devices_here():
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def check_host(args):
    text, j = report(args.tool)
    rc, _ = run(args.tool, ["--no-such-flag"], clean_env())
    check(rc == 2, f"an unknown flag exited {rc}, not 2")

    gpus = j["gpus"]
    if gpus["count"] == 0:
        reason = gpus["reason"]
        check(bool(reason), "no GPU but no reason in JSON")
        check(has_line(text, f"no GPU: {reason}"), f"text lacks 'no GPU: {reason}'")
        check(gpus["usable"] is False and gpus["devices"] == [], "JSON lists GPUs it cannot use")
    else:
        check(has_line(text, "GPU 0"), "GPUs found but the text lists none")

    mpi = j["open_mpi"]
    check(mpi["built_for"] == args.ompi_version,
          f"built_for {mpi['built_for']} != {args.ompi_version}")
    check(mpi["match"] is True and mpi["mismatch"] is None, f"Open MPI mismatch: {mpi['mismatch']}")
    check(mpi["running"].split(".")[:2] == args.ompi_version.split(".")[:2],
          f"running {mpi['running']} is not the {args.ompi_version} series")
    check(has_line(text, f"built for       {args.ompi_version}"), "text lacks the built-for version")
    check(has_line(text, f"running         {mpi['running']} (") and has_line(text, "): match"),
          "text lacks 'running ... : match'")

    ucx = j["ucx"]
    if args.ucx_version:
        check(ucx["version"] == args.ucx_version, f"UCX {ucx['version']} != {args.ucx_version}")
    check(has_line(text, f"version         {ucx['version']} (headers {ucx['built_with']})"),
          "text lacks the UCX version line")
    check(ucx["started"] and ucx["transports"], "UCX did not start or lists no transport")
    check("host" in ucx["memory_types"], "UCX memory types lack host")
    check(has_line(text, "CUDA memory     " + ("yes" if ucx["cuda_memory"] else "no")),
          "text and JSON disagree about CUDA memory in UCX")

    here = rdma_devices_here()
    check(j["rdma"]["devices"] == here, f"RDMA devices {j['rdma']['devices']} != sysfs {here}")
    if not here:
        lines = [l for l in text.splitlines() if "no RDMA device" in l]
        check(len(lines) == 1, f"expected one 'no RDMA device' line, got {lines}")

    p = j["paths"]
    check(p["pml_starts"] is True and p["declined"] is None, f"engine declined: {p['declined']}")
    check(p["host"] == "host", f"host buffers take {p['host']}")
    check(p["device"]["same_node"] == "ipc", f"default same-node path {p['device']['same_node']}")
    between = "ucx-device" if ucx["cuda_memory"] else "staged"
    check(p["device"]["between_nodes"] == between,
          f"between nodes {p['device']['between_nodes']}, expected {between}")
    if gpus["count"] == 0:
        # The engine's own reason is the one gpuwire-info found for the GPUs.
        check(p["device_buffers"] is False and p["device"]["in_use"] is False,
              "device buffers on without a GPU")
        check(p["device_buffers_reason"] == gpus["reason"],
              f"engine says '{p['device_buffers_reason']}', GPU probe '{gpus['reason']}'")
        check(has_line(text, f"device buffers  no: {gpus['reason']}"),
              "text lacks 'device buffers  no: <reason>'")
        check(has_line(text, "between nodes   not used; with a usable GPU"),
              "text does not say the device paths are unused")


def check_settings(args):
    _, j = report(args.tool, clean_env(OMPI_MCA_pml_gpuwire_ipc="0"))
    d = j["paths"]["device"]
    check(d["same_node"] in ("staged", "ucx-device"), f"ipc=0 still gives {d['same_node']}")
    check(j["paths"]["settings"]["from_environment"] == {"pml_gpuwire_ipc": "0"},
          f"from_environment {j['paths']['settings']['from_environment']}")

    text, j = report(args.tool, clean_env(OMPI_MCA_pml_gpuwire_device="0"))
    check(j["paths"]["device_buffers_reason"] == "device support switched off",
          f"device=0 gives '{j['paths']['device_buffers_reason']}'")
    check(has_line(text, "device buffers  no: device support switched off"),
          "text lacks 'device support switched off'")

    text, j = report(args.tool, clean_env(OMPI_MCA_pml_gpuwire_ipc_threshold="64k"))
    s, d = j["paths"]["settings"], j["paths"]["device"]
    check(s["pml_gpuwire_ipc_threshold"] == 65536, f"64k read as {s['pml_gpuwire_ipc_threshold']}")
    check(d["same_node"] == "ipc" and d["same_node_below_ipc_threshold"] in ("staged", "ucx-device"),
          f"threshold paths {d}")
    check(has_line(text, "below ipc_threshold"), "text lacks the below-threshold path")

    _, j = report(args.tool, clean_env(OMPI_MCA_pml_gpuwire_device="maybe"))
    check(len(j["paths"]["settings"]["errors"]) == 1, "an invalid boolean is not reported")

    text, j = report(args.tool, clean_env(UCX_TLS="no_such_transport"))
    check(j["paths"]["pml_starts"] is False, "the engine started without a UCX transport")
    check("UCX could not start" in (j["paths"]["declined"] or ""),
          f"declined: {j['paths']['declined']}")
    check(has_line(text, "pml gpuwire     declined: UCX could not start"),
          "text lacks the decline line")
    check(j["ucx"]["started"] is False and j["ucx"]["error"], "UCX section says it started")

    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "mca_pml_gpuwire.so"), "w").close()
        text, j = report(args.tool, clean_env(OMPI_MCA_mca_base_component_path=f"SYS_DEFAULT:{d}"))
        c = j["open_mpi"]["component"]
        check(c["path"] == os.path.join(d, "mca_pml_gpuwire.so"), f"component found at {c['path']}")
        check(c["search_path_from"] == "OMPI_MCA_mca_base_component_path" and
              c["search_path"][-1] == d, f"search path {c['search_path']}")
        check(has_line(text, f"component       {d}/mca_pml_gpuwire.so"), "text lacks the component")


    # coll gpuwire's selection table: a file's rows, those for one node of
    # this machine marked; a malformed file named with its line, the shipped
    # table kept.
    with tempfile.TemporaryDirectory() as d:
        good, bad = os.path.join(d, "good.txt"), os.path.join(d, "bad.txt")
        with open(good, "w") as f:
            f.write("allreduce 2 1 2 * * 1 0 1M nvlink\nalltoall * 3 * * * * 0 * staged\n")
        with open(bad, "w") as f:
            f.write("# one good row, then a bad one\nbcast 2 1 2 1 2 1 0 * device\nbcast 2 1\n")
        text, j = report(args.tool, clean_env(OMPI_MCA_coll_gpuwire_select_file=good))
        sel = j["select"]
        check(sel["source"] == good and len(sel["rows"]) == 2, f"select {sel}")
        check([r["applies_here"] for r in sel["rows"]] == [True, False],
              f"rows that apply: {sel['rows']}")
        check(has_line(text, "* allreduce") and has_line(text, f"table           {good}, 2 rows"),
              "text lacks the selection table")
        text, j = report(args.tool, clean_env(OMPI_MCA_coll_gpuwire_select_file=bad))
        sel = j["select"]
        check(sel["source"] == "shipped" and sel["error"].startswith(f"{bad}:3: not 10 fields"),
              f"malformed file: {sel}")
        check(has_line(text, f"error           {bad}:3:"), "text lacks the file's error")


def check_gpu(args):
    text, j = report(args.tool)
    gpus = j["gpus"]
    if gpus["count"] == 0:
        print(f"SKIP: no GPU (CUDA driver or device absent): {gpus['reason']}")
        return SKIP
    n = gpus["count"]
    check(len(gpus["devices"]) == n, "device list and count differ")
    for dev in gpus["devices"]:
        check(dev["name"] and dev["pci_bus_id"] and dev["uuid"], f"incomplete device {dev}")
        check(has_line(text, f"GPU {dev['ordinal']}  {dev['name']}"), f"text lacks GPU {dev['ordinal']}")
    check(len(gpus["links"]) == n * (n - 1) // 2, f"{len(gpus['links'])} links for {n} GPUs")
    for link in gpus["links"]:
        check(link["p2p"] is not None, f"peer access unknown for {link}")
        if gpus["nvml"]:
            check(link["nvlinks"] is not None, f"NVML present but NVLinks unknown for {link}")
        check(has_line(text, f"GPU {link['a']} <-> GPU {link['b']}: "), f"text lacks link {link}")
    p = j["paths"]
    check(p["device_buffers"] is True and p["device"]["in_use"] is True,
          f"GPU present but device buffers off: {p['device_buffers_reason']}")
    check(has_line(text, "device buffers  yes"), "text lacks 'device buffers  yes'")
    check(p["device"]["same_node"] == "ipc", f"same-node path {p['device']['same_node']}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--ompi-version", required=True)
    ap.add_argument("--ucx-version")
    ap.add_argument("mode", choices=["host", "settings", "gpu"])
    args = ap.parse_args()
    rc = {"host": check_host, "settings": check_settings, "gpu": check_gpu}[args.mode](args)
    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        return 1
    if rc == SKIP:
        return SKIP
    print(f"{args.mode}: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
