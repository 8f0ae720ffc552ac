"""A small fake Hugging Face Hub serving one local dataset directory (interop tests only).

Endpoints (the ones lrstream's fetch/ and huggingface_hub use for datasets):

* ``GET /api/datasets/{org}/{name}/revision/{rev}`` -> ``{"id", "sha", "siblings"}``
  (``rev`` is ``main``, the commit SHA, or URL-escaped ``refs/...``);
* ``GET /api/datasets/{org}/{name}/tree/{sha}[/{dir}][?recursive=true][&cursor=N]`` ->
  entries (``type``, ``oid`` = git blob sha1, ``size``, ``path``, ``lfs`` for LFS files),
  ``page_size`` entries per page with a ``Link: <...>; rel="next"`` header;
* ``HEAD|GET /datasets/{org}/{name}/resolve/{rev}/{path}``: regular files answer 200 with
  ``ETag`` (git sha1), ``X-Repo-Commit``, ``Content-Length``; LFS files (``.parquet``,
  ``.mp4``) answer 302 to ``{cdn_url}/cdn/{sha256}`` (another port: another host) with ``X-Linked-Etag`` (sha256),
  ``X-Linked-Size``, ``ETag`` and ``X-Repo-Commit``, as the Hub does;
* ``GET {cdn_url}/cdn/{sha256}``: the bytes (``Range`` supported).

Storage Buckets are served by the Go fake (internal/fakehub.Buckets, run by
internal/fakehub/cmd/fakebuckets for test_buckets.py): one fake of the bucket API and the Xet CAS.

Every request is appended to ``hub.log`` as ``(method, path, authorization)``. With
``token`` set, requests to the API/resolve endpoints without ``Bearer <token>`` get 401.

By hand (docs/hub.md, "Trying the Hub path offline")::

    python python/interop/fake_hub.py --root DIR --repo ORG/NAME [--port 8080] [-v]

serves DIR until Ctrl-C (or SIGTERM) and prints the ``HF_ENDPOINT`` to use.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIXES = (".parquet", ".mp4")


class FakeHub:
    """Serve ``root`` as dataset ``repo_id`` at commit ``sha`` on 127.0.0.1."""

    def __init__(self, root: Path, repo_id: str, sha: str = "c0ffee" + "0" * 34, token: str | None = None,
                 page_size: int = 4, port: int = 0, cdn_port: int = 0, verbose=None):
        self.repo_id, self.sha, self.token, self.page_size = repo_id, sha, token, page_size
        self.verbose = verbose  # a text stream each request is written to, or None
        self.log: list[tuple[str, str, str | None]] = []
        self.files: dict[str, dict] = {}
        for p in sorted(Path(root).rglob("*")):
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                data = p.read_bytes()
                self.files[rel] = {
                    "data": data,
                    "sha1": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "lfs": rel.endswith(LFS_SUFFIXES),
                }
        self.by_sha256 = {f["sha256"]: f for f in self.files.values()}
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        # The Hub and its CDN are two hosts (two ports), as on huggingface.co.
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.cdn = ThreadingHTTPServer(("127.0.0.1", cdn_port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Another host name too: huggingface_hub follows same-host redirects on HEAD (ports ignored).
        self.cdn_url = f"http://localhost:{self.cdn.server_address[1]}"
        self.threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (self.server, self.cdn)]

    def __enter__(self) -> "FakeHub":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        for s in (self.server, self.cdn):
            s.shutdown()
            s.server_close()

    def requests(self, kind: str | None = None) -> list[tuple[str, str, str | None]]:
        """Logged requests, optionally only those whose path contains ``/{kind}/``."""
        with self._lock:
            return [r for r in self.log if kind is None or f"/{kind}/" in r[1]]

    # --- handlers ---------------------------------------------------------------------------

    def _send(self, h, status, body=b"", headers=None, head=False):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _error(self, h, status, code, msg, head):
        self._send(h, status, json.dumps({"error": msg}).encode(),
                   {"X-Error-Code": code, "X-Error-Message": msg, "Content-Type": "application/json"}, head)

    def _serve(self, h, head):
        u = urlsplit(h.path)
        auth = h.headers.get("Authorization")
        with self._lock:
            self.log.append((h.command, h.path, auth))
            if self.verbose is not None:
                print(f"{'cdn' if h.server is self.cdn else 'hub'}: {h.command} {h.path}", file=self.verbose, flush=True)
        api = f"/api/datasets/{self.repo_id}/"
        resolve = f"/datasets/{self.repo_id}/resolve/"
        on_cdn = h.server is self.cdn
        if on_cdn != u.path.startswith("/cdn/"):
            return self._error(h, 404, "NotFound", f"no route {u.path}", head)
        if on_cdn:
            return self._serve_bytes(h, self.by_sha256.get(u.path[5:]), head)
        if self.token and auth != f"Bearer {self.token}":
            return self._error(h, 401, "RepoNotFound", "Invalid credentials in Authorization header", head)
        if u.path.startswith(api + "revision/"):
            rev = unquote(u.path[len(api + "revision/"):])
            if rev not in ("main", self.sha):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            body = {"_id": "x", "id": self.repo_id, "sha": self.sha, "private": bool(self.token),
                    "siblings": [{"rfilename": p} for p in self.files]}
            return self._send(h, 200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head)
        if u.path.startswith(api + "tree/"):
            return self._serve_tree(h, u, api, head)
        if u.path.startswith(resolve):
            rev, _, path = unquote(u.path[len(resolve):]).partition("/")
            if rev not in ("main", self.sha):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            f = self.files.get(path)
            if f is None:
                return self._error(h, 404, "EntryNotFound", f"{path} does not exist", head)
            if f["lfs"]:
                hdr = {"X-Repo-Commit": self.sha, "X-Linked-Etag": f'"{f["sha256"]}"',
                       "X-Linked-Size": str(len(f["data"])), "ETag": f'"{f["sha256"]}"',
                       "Location": f"{self.cdn_url}/cdn/{f['sha256']}"}
                return self._send(h, 302, b"", hdr, head)
            return self._serve_bytes(h, f, head, {"X-Repo-Commit": self.sha, "ETag": f'"{f["sha1"]}"'})
        return self._error(h, 404, "NotFound", f"no route {u.path}", head)

    def _serve_tree(self, h, u, api, head):
        rest = unquote(u.path[len(api + "tree/"):])
        rev, _, d = rest.partition("/")
        if rev not in ("main", self.sha):
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        q = parse_qs(u.query)
        recursive = q.get("recursive", ["false"])[0] in ("true", "True", "1")
        prefix = d.strip("/") + "/" if d.strip("/") else ""
        entries, dirs = [], set()
        for p, f in self.files.items():
            if not p.startswith(prefix):
                continue
            sub = p[len(prefix):]
            parts = sub.split("/")
            for k in range(1, len(parts)):
                if recursive or k == 1:
                    dirs.add(prefix + "/".join(parts[:k]))
            if recursive or len(parts) == 1:
                e = {"type": "file", "oid": f["sha1"], "size": len(f["data"]), "path": p}
                if f["lfs"]:
                    e["lfs"] = {"oid": f["sha256"], "size": len(f["data"]), "pointerSize": 134}
                entries.append(e)
        if prefix and not entries and not dirs:
            return self._error(h, 404, "EntryNotFound", f"{d} does not exist", head)
        entries += [{"type": "directory", "oid": hashlib.sha1(x.encode()).hexdigest(), "size": 0, "path": x}
                    for x in sorted(dirs)]
        entries.sort(key=lambda e: e["path"])
        start = int(q.get("cursor", ["0"])[0])
        page = entries[start:start + self.page_size]
        hdr = {"Content-Type": "application/json"}
        if start + self.page_size < len(entries):
            nq = f"recursive={'true' if recursive else 'false'}&cursor={start + self.page_size}"
            hdr["Link"] = f'<{self.url}{quote(u.path)}?{nq}>; rel="next"'
        return self._send(h, 200, json.dumps(page).encode(), hdr, head)

    def _serve_bytes(self, h, f, head, extra=None):
        if f is None:
            return self._send(h, 404, b"no such blob", None, head)
        data = f["data"]
        hdr = dict(extra or {})
        hdr.update({"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a) if a else max(len(data) - int(b), 0)
            end = min(int(b), len(data) - 1) if (a and b) else len(data) - 1
            if start >= len(data):
                hdr["Content-Range"] = f"bytes */{len(data)}"
                return self._send(h, 416, b"", hdr, head)
            hdr["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self._send(h, 206, data[start:end + 1], hdr, head)
        return self._send(h, 200, data, hdr, head)


def main(argv: list[str] | None = None) -> int:
    """Serve a dataset directory as a Hub dataset until SIGINT/SIGTERM."""
    import argparse
    import signal
    import sys

    ap = argparse.ArgumentParser(
        prog="fake_hub.py", description="Serve a local LeRobot dataset directory as a Hugging Face Hub dataset "
        "(API, resolve, LFS redirects to a second 'CDN' port), to try lrstream's Hub path offline.")
    ap.add_argument("--root", required=True, type=Path, help="the dataset directory to serve (meta/, data/, videos/)")
    ap.add_argument("--repo", default="local/dataset", help="the repo id it is served as (ORG/NAME; default %(default)s)")
    ap.add_argument("--port", type=int, default=8080, help="the Hub's port on 127.0.0.1 (0: any free port; default %(default)s)")
    ap.add_argument("--cdn-port", type=int, default=0, help="the CDN's port (LFS files redirect there; default: any free port)")
    ap.add_argument("--sha", default="c0ffee" + "0" * 34, help="the commit SHA (40 hex) every revision resolves to")
    ap.add_argument("--token", help="require 'Authorization: Bearer TOKEN' (try HF_TOKEN with a private dataset)")
    ap.add_argument("--page-size", type=int, default=50, help="tree entries per page (default %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every request on stderr")
    a = ap.parse_args(argv)
    if not (a.root / "meta" / "info.json").is_file():
        ap.error(f"--root {a.root}: no meta/info.json (not a LeRobot dataset directory)")
    if a.repo.count("/") != 1 or not all(a.repo.split("/")):
        ap.error(f"--repo {a.repo!r}: want ORG/NAME")
    if len(a.sha) != 40 or any(c not in "0123456789abcdef" for c in a.sha):
        ap.error(f"--sha {a.sha!r}: want 40 lowercase hex digits")
    try:
        hub = FakeHub(a.root, a.repo, sha=a.sha, token=a.token, page_size=a.page_size, port=a.port,
                      cdn_port=a.cdn_port, verbose=sys.stderr if a.verbose else None)
    except OSError as e:
        ap.error(f"cannot listen on 127.0.0.1:{a.port} / {a.cdn_port}: {e}")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with hub:
        print(f"fake Hub: serving {a.root} as dataset {a.repo} at commit {a.sha} ({len(hub.files)} files); "
              f"CDN {hub.cdn_url}; Ctrl-C stops", flush=True)
        print(f"export HF_ENDPOINT={hub.url}", flush=True)
        while not stop.wait(1):
            pass
    print("fake Hub: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
