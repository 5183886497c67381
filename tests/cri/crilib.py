"""A small CRI v1 client for the cri lane (run with /usr/bin/python3).

The stubs are generated from tests/cri/cri.proto into build/cri/ on first
use (never committed). Calls go to a containerd's CRI socket the way kubelet
makes them: RuntimeService and ImageService over gRPC on a Unix socket.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(os.environ.get("BK_CRI_GEN", os.path.join(REPO, "build", "cri")))


def _stubs():
    proto = os.path.join(HERE, "cri.proto")
    out = os.path.join(GEN, "cri_pb2.py")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(proto):
        os.makedirs(GEN, exist_ok=True)
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", HERE,
                        "--python_out", GEN, "--grpc_python_out", GEN, proto], check=True)
    if GEN not in sys.path:
        sys.path.insert(0, GEN)
    import cri_pb2
    import cri_pb2_grpc
    return cri_pb2, cri_pb2_grpc


pb, pb_grpc = _stubs()
import grpc  # noqa: E402


class CRI:
    """RuntimeService + ImageService of one runtime socket."""

    def __init__(self, socket, timeout=30):
        self.ch = grpc.insecure_channel("unix://" + socket)
        self.rt = pb_grpc.RuntimeServiceStub(self.ch)
        self.img = pb_grpc.ImageServiceStub(self.ch)
        self.timeout = timeout

    def close(self):
        self.ch.close()

    def wait_ready(self, seconds=10):
        grpc.channel_ready_future(self.ch).result(timeout=seconds)

    # runtime
    def version(self):
        return self.rt.Version(pb.VersionRequest(version="v1"), timeout=self.timeout)

    def status(self):
        return self.rt.Status(pb.StatusRequest(), timeout=self.timeout)

    def run_pod(self, config):
        return self.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=self.timeout).pod_sandbox_id

    def pod_status(self, pod_id):
        return self.rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id), timeout=self.timeout).status

    def stop_pod(self, pod_id):
        self.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)

    def remove_pod(self, pod_id):
        self.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=self.timeout)

    def list_pods(self):
        return list(self.rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=self.timeout).items)

    def create(self, pod_id, config, sandbox_config):
        return self.rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=config, sandbox_config=sandbox_config),
            timeout=self.timeout).container_id

    def start(self, cid):
        self.rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=self.timeout)

    def stop(self, cid, timeout=0):
        self.rt.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=timeout),
                              timeout=self.timeout + timeout)

    def remove(self, cid):
        self.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid), timeout=self.timeout)

    def list_containers(self, pod_id=""):
        f = pb.ContainerFilter(pod_sandbox_id=pod_id)
        return list(self.rt.ListContainers(pb.ListContainersRequest(filter=f), timeout=self.timeout).containers)

    def container_status(self, cid):
        return self.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid), timeout=self.timeout).status

    def exec_sync(self, cid, cmd, timeout=10):
        r = self.rt.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=timeout),
                             timeout=timeout + 5)
        return r.exit_code, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    # images
    def image_present(self, ref):
        r = self.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref)), timeout=self.timeout)
        return r.image.id != ""
