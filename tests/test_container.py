"""heaptap in containers: the OCI image dist/Containerfile builds from the Debian package, run
privileged in the host's PID namespace, names the site of a leaking process of the host; the
Kubernetes DaemonSet of dist/ holds to the API's types and to what the service proves.

No image registry is reachable here: the image's base is a Debian 12 made by mmdebstrap from
this machine's apt sources, kept in /var/cache/heaptap-tests/container/ (HEAPTAP_TEST_CACHE)
across clones of the tree; the package is test_install's, built once for both."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from lib import (CACHE, ROOT, Heaptap, Proc, Target, check, check_true, private_program, test)

CONTAINER = os.path.join(CACHE, "container")
BASE_TAR = os.path.join(CONTAINER, "bookworm.tar")
BASE_IMAGE = "localhost/heaptap-base:bookworm"
IMAGE = "localhost/heaptap:test"
CONTAINERFILE = os.path.join(ROOT, "dist", "Containerfile")
DAEMONSET = os.path.join(ROOT, "dist", "heaptap-daemonset.yaml")
SERVICE = os.path.join(ROOT, "dist", "heaptap.service")
# Debian's interpreter: its python3-kubernetes and python3-yaml, whatever python3 runs the tests.
DEBIAN_PYTHON = "/usr/bin/python3"


def run(argv, what, timeout=600, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    check_true(what, p.returncode == 0,
               f"{' '.join(argv)} exited {p.returncode}: {p.stdout[-1500:]}{p.stderr[-2500:]}")
    return p


def base_image():
    """The Debian 12 the image starts from, made once by mmdebstrap (as apt sees the archive
    here) and imported into podman's store."""
    if not os.path.exists(BASE_TAR):
        os.makedirs(CONTAINER, exist_ok=True)
        sources = [p for p in ["/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"]
                   if os.path.exists(p) and os.path.getsize(p)]
        check_true("apt sources for mmdebstrap", sources)
        run(["mmdebstrap", "--variant=minbase", "--format=tar", "bookworm", BASE_TAR + ".new"]
            + sources[:1], "mmdebstrap makes the base", timeout=900)
        os.rename(BASE_TAR + ".new", BASE_TAR)
    if subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode != 0:
        run(["podman", "import", BASE_TAR, BASE_IMAGE], "podman imports the base")


def package(context):
    """heaptap's Debian package, as test_install builds it (once for both), into context."""
    from test_install import debian_package
    shutil.copy(debian_package()[0], os.path.join(context, "heaptap_test_amd64.deb"))


def podman_run(args):
    """podman run's arguments for the image, as a host's agent runs: privileged, in the host's
    PID namespace, the tracing file system mounted. runc rather than crun (which refuses a
    host of cgroups v1 and v2 together), its limits no higher than this process's (a
    container may not raise them)."""
    with open("/proc/self/limits") as f:
        files = re.search(r"Max open files\s+(\d+)\s+(\d+)", f.read())
    return (["podman", "run", "--rm", "--runtime", "runc",
             f"--ulimit=nofile={files.group(1)}:{files.group(2)}", "--ulimit=nproc=4096:4096",
             "--privileged", "--pid=host", "--network=none",
             "-v", "/sys/kernel/tracing:/sys/kernel/tracing"]
            + args)


class Contained(Heaptap):
    """heaptap --json as the image's entry point runs it, in a container of its own; volumes:
    "-v" arguments of podman's."""

    def __init__(self, name, args, volumes=()):
        self.name = name
        Proc.__init__(self, podman_run(list(volumes) + ["--name", name, IMAGE, "--json"]
                                       + list(args)), stdin=subprocess.DEVNULL)
        self.records = []


@test(tier="soak")
def test_the_image_names_a_leaking_process_of_the_host():
    """The image built from the Debian package (podman, from a Debian 12 made by
    mmdebstrap), run privileged in the host's PID namespace: the agent there sees a leaking
    process of the host by its host PID, traces it, names remember_entry, and leaves its code
    the file's. The agent watches the leaker's cgroup (the host's cgroup v2 hierarchy mounted
    in the container), not --all: on a host shared with other tests, --all traced their
    growing processes too, and their checks found its breakpoints. It asks the agent for its
    finding, not its budget: the budget is that of the agents of tests that run beside others
    (test_host.BESIDE); at the default 5%, one full run's escalation ended unnamed."""
    from test_host import BESIDE, Cgroup, cgroup2_root, end_cgroups, finish, host_record, \
        no_probe_left, tiers
    missing = [t for t in ("podman", "mmdebstrap", "runc", "dpkg-buildpackage")
               if not shutil.which(t)]
    check("tools missing (.ci/run installs them)", missing, [])
    import time
    t0 = time.monotonic()
    base_image()
    with tempfile.TemporaryDirectory(prefix="heaptap-image-") as context:
        package(context)
        t1 = time.monotonic()
        # RUN steps in a chroot (buildah's), with the host's network for apt.
        run(["podman", "build", "--isolation=chroot", "--network=host", "--layers=false",
             "--build-arg",
             f"BASE={BASE_IMAGE}", "-f", CONTAINERFILE, "-t", IMAGE, context],
            "podman builds the image")
    t2 = time.monotonic()
    said = json.loads(run(podman_run([IMAGE, "--version", "--json"]), "--version").stdout)
    check_true("the image's heaptap tries the kernel", said["kernel"]["bpf_loop"], said)
    path, comm = private_program("hostproc")
    cg = Cgroup("image")
    leaker = Target(path, args=["100", "8000"], preexec_fn=cg.join)
    name = f"heaptap-test-{os.getpid()}"
    ht = None
    try:
        ht = Contained(name, ["--cgroup", os.path.join("/host-cgroup", os.path.basename(cg.path)),
                              "-i", "1s", "--max-traced", "4"] + BESIDE,
                       volumes=["-v", f"{cgroup2_root()}:/host-cgroup"])
        host_record(ht, lambda r: any(tiers(ht, leaker.target_pid, "proc")),
                    f"the escalation of the leaker (PID {leaker.target_pid}) ended", timeout=240)
        named = tiers(ht, leaker.target_pid, "proc")[0]
        check("the leaker, by its name", named["comm"], comm)
        check_true("its site, remember_entry, named",
                   named["finding"] and named["finding"]["function"] == "remember_entry",
                   f"the escalation ended {named.get('reason')!r}, finding {named['finding']}")
        no_probe_left(leaker.target_pid, named)
        final, status = finish(ht)
        check("heaptap's exit status in the container", status, 0)
    finally:
        if ht and ht.popen.poll() is None:
            finish(ht)
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
        subprocess.run(["podman", "rmi", "-f", IMAGE], capture_output=True)
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        end_cgroups()
    t3 = time.monotonic()
    print(f"    base and package {t1 - t0:.0f} s, image {t2 - t1:.0f} s, the leaker named in "
          f"{named['finding']['traced_s']:.0f} s traced, {t3 - t2:.0f} s with the agent")


# The manifest against the Kubernetes API's types, as Debian's python3-kubernetes has them
# (its models, generated from the API's OpenAPI definitions): every field known, of its type,
# the required ones there; prints the facts the test checks, as JSON.
CHECK_MANIFEST = r"""
import json, sys
import yaml
from kubernetes import client

def walk(value, kind, path):
    if kind.startswith("list["):
        assert isinstance(value, list), f"{path}: a list"
        for i, v in enumerate(value):
            walk(v, kind[5:-1], f"{path}[{i}]")
    elif kind.startswith("dict("):
        assert isinstance(value, dict), f"{path}: a map"
        for k, v in value.items():
            walk(v, kind[5:-1].split(", ", 1)[1], f"{path}.{k}")
    elif kind in ("str", "int", "bool"):
        assert isinstance(value, {"str": str, "int": int, "bool": bool}[kind]), \
            f"{path}: {value!r} is not a {kind}"
    elif kind != "object":
        model = getattr(client.models, kind)
        fields = {v: k for k, v in model.attribute_map.items()}
        assert isinstance(value, dict), f"{path}: a {kind}"
        for k, v in value.items():
            assert k in fields, f"{path}.{k}: no such field of {kind}"
            walk(v, model.openapi_types[fields[k]], f"{path}.{k}")

doc = yaml.safe_load(open(sys.argv[1]))
walk(doc, "V1DaemonSet", "$")
# The models' own checks (required fields) as the client reads an API answer.
ds = client.ApiClient()._ApiClient__deserialize(doc, "V1DaemonSet")
pod = ds.spec.template
c = pod.spec.containers[0]
mounts = {m.name: m.mount_path for m in c.volume_mounts}
paths = {v.name: v.host_path.path for v in pod.spec.volumes if v.host_path}
print(json.dumps({
    "kind": ds.kind, "host_pid": pod.spec.host_pid, "privileged": c.security_context.privileged,
    "add": c.security_context.capabilities.add, "drop": c.security_context.capabilities.drop,
    "annotations": pod.metadata.annotations, "args": c.args,
    "ports": [p.container_port for p in c.ports],
    "host_mounts": sorted(mounts[n] for n in paths if mounts.get(n) == paths[n]),
    "selector": ds.spec.selector.match_labels == pod.metadata.labels,
}))
"""


@test(tier="unit")
def test_the_daemonset_holds_to_the_api_and_the_service():
    """dist/heaptap-daemonset.yaml read by Debian's python3-kubernetes (the API's 1.22
    types): a DaemonSet in the host's PID namespace, with exactly the service's
    capabilities, /sys/kernel's tracing mounted from the host, the Containerfile's command,
    and the annotations Prometheus discovers its metrics by."""
    if not os.path.exists(DEBIAN_PYTHON) or subprocess.run(
            [DEBIAN_PYTHON, "-c", "import kubernetes, yaml"], capture_output=True).returncode:
        check_true("Debian's python3-kubernetes (.ci/run installs it)", False)
    said = json.loads(run([DEBIAN_PYTHON, "-c", CHECK_MANIFEST, DAEMONSET],
                          "python3-kubernetes reads the manifest").stdout)
    with open(SERVICE) as f:
        caps = re.search(r"^CapabilityBoundingSet=(.*)$", f.read(), re.M).group(1).split()
    with open(CONTAINERFILE) as f:
        cmd = json.loads(re.search(r"^CMD (.*)$", f.read(), re.M).group(1))
    check("kind", said["kind"], "DaemonSet")
    check("the host's PID namespace", said["host_pid"], True)
    check("not privileged", said["privileged"], False)
    check("capabilities dropped", said["drop"], ["ALL"])
    check("capabilities: the service's", sorted("CAP_" + c for c in said["add"]), sorted(caps))
    check("the host's tracing file system", "/sys/kernel/tracing" in said["host_mounts"], True)
    check("the Containerfile's command", said["args"], cmd)
    port = cmd[cmd.index("--listen") + 1].rsplit(":", 1)[1]
    check("the port served", said["ports"], [int(port)])
    a = said["annotations"]
    check("Prometheus' annotations", (a.get("prometheus.io/scrape"), a.get("prometheus.io/port"),
                                      a.get("prometheus.io/path")), ("true", port, "/metrics"))
    check("the selector picks the pods", said["selector"], True)
