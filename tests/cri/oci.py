#!/usr/bin/python3
"""Build the cri lane's images as OCI image layouts (no registry, no Docker).

    oci.py OUT.tar NAME:TAG [--entrypoint JSON] [--cmd JSON] [--user U] [--workdir D]
           [--file SRC=DEST ...] [--link TARGET=DEST ...] [--dir DEST ...]
           [--dockerfile deploy/images/X.Dockerfile --rootfs DIR]

Writes an OCI layout (oci-layout, index.json whose manifest carries the
io.containerd.image.name annotation, a config, a manifest and one gzip
layer) as a tar that `ctr -n k8s.io images import` takes.

--dockerfile reads ENTRYPOINT, CMD, USER and EXPOSE of the Dockerfile's
last stage, so the lane's image runs like the shipped one; the layer is
the directory --rootfs (built with the same collect-libs.sh call).
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import re
import tarfile


def dockerfile_config(path):
    lines, cur = [], ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        lines.append(cur + line)
        cur = ""
    last = []
    for line in lines:  # only the final stage counts
        if re.match(r"\s*FROM\s", line, re.I):
            last = []
        last.append(line)
    cfg = {}
    for line in last:
        m = re.match(r"\s*(ENTRYPOINT|CMD|USER|EXPOSE|WORKDIR)\s+(.*)$", line, re.I)
        if not m:
            continue
        k, v = m.group(1).upper(), m.group(2).strip()
        if k in ("ENTRYPOINT", "CMD"):
            cfg["Entrypoint" if k == "ENTRYPOINT" else "Cmd"] = json.loads(v)
        elif k == "USER":
            cfg["User"] = v
        elif k == "WORKDIR":
            cfg["WorkingDir"] = v
        elif k == "EXPOSE":
            cfg.setdefault("ExposedPorts", {})[v if "/" in v else v + "/tcp"] = {}
    return cfg


def normalize(ref):
    """The fully qualified name the CRI plugin looks an image up by."""
    first = ref.split("/")[0]
    if "/" in ref and ("." in first or ":" in first or first == "localhost"):
        return ref
    return "docker.io/" + (ref if "/" in ref else "library/" + ref)


def layer(files, links, dirs, rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        seen = set()

        def parents(dest):
            parts = dest.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in seen:
                    seen.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    t.addfile(ti)

        def norm(ti):
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mtime = 0
            return ti

        if rootfs:
            for base, ds, fs in sorted(os.walk(rootfs)):
                ds.sort()
                for n in ds + sorted(fs):
                    p = os.path.join(base, n)
                    rel = os.path.relpath(p, rootfs)
                    if rel in seen:
                        continue
                    seen.add(rel)
                    ti = norm(t.gettarinfo(p, rel))
                    if ti.isfile():
                        with open(p, "rb") as f:
                            t.addfile(ti, f)
                    else:
                        t.addfile(ti)
        for d in dirs:
            parents(d + "/x")
        for src, dest in files:
            parents(dest)
            ti = norm(t.gettarinfo(src, dest.strip("/")))
            if ti.issym():  # a file list names the file: store what it points to
                ti = norm(t.gettarinfo(os.path.realpath(src), dest.strip("/")))
            with open(os.path.realpath(src), "rb") as f:
                t.addfile(ti, f)
        for target, dest in links:
            parents(dest)
            ti = tarfile.TarInfo(dest.strip("/"))
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            t.addfile(ti)
    raw = buf.getvalue()
    gz = gzip.compress(raw, compresslevel=1, mtime=0)
    return raw, gz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("--entrypoint")
    ap.add_argument("--cmd")
    ap.add_argument("--user")
    ap.add_argument("--workdir")
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--link", action="append", default=[])
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--dockerfile")
    ap.add_argument("--rootfs")
    a = ap.parse_args()

    cfg = dockerfile_config(a.dockerfile) if a.dockerfile else {}
    if a.entrypoint:
        cfg["Entrypoint"] = json.loads(a.entrypoint)
    if a.cmd:
        cfg["Cmd"] = json.loads(a.cmd)
    if a.user:
        cfg["User"] = a.user
    if a.workdir:
        cfg["WorkingDir"] = a.workdir
    cfg.setdefault("Env", ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"])

    files = [tuple(f.split("=", 1)) for f in a.file]
    links = [tuple(f.split("=", 1)) for f in a.link]
    raw, gz = layer(files, links, a.dir, a.rootfs)

    blobs = {}

    def blob(data):
        d = hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return "sha256:" + d

    config = {"architecture": "amd64", "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}
    cfg_b = json.dumps(config, sort_keys=True).encode()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": blob(cfg_b), "size": len(cfg_b)},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": blob(gz), "size": len(gz)}]}
    man_b = json.dumps(manifest, sort_keys=True).encode()
    name = normalize(a.name)
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": blob(man_b), "size": len(man_b),
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": a.name.split(":")[-1]}}]}

    with tarfile.open(a.out, "w") as t:
        def add(path, data):
            ti = tarfile.TarInfo(path)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", json.dumps(index).encode())
        for d, data in blobs.items():
            add("blobs/sha256/" + d, data)


if __name__ == "__main__":
    main()
