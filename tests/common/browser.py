"""A real browser for the report's tests: headless Chromium driven over the
DevTools protocol on a pipe (--remote-debugging-pipe: no port, no websocket).
Every wait has a deadline, and the browser is killed on every exit path.

    with Browser(tmpdir) as b:
        b.open("file:///.../report.html", ready="document.body.dataset.ready")
        rows = b.eval("document.querySelectorAll('#stencil-table tbody tr').length")
        png = b.screenshot()
"""
import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import time
import zlib

CHROMIUM = "/usr/bin/chromium"


class BrowserError(AssertionError):
    pass


def available():
    return shutil.which(CHROMIUM) is not None


class Browser:
    def __init__(self, tmp, width=1280, height=900, timeout=60):
        self.timeout = timeout
        self.profile = os.path.join(tmp, "chromium-profile")
        self.width, self.height = width, height
        self.next_id = 0
        self.session = None
        self.buf = b""
        self.proc = None

    # ---- the process and the pipe

    def __enter__(self):
        to_r, self.to_w = os.pipe()      # we write, the browser reads its fd 3
        self.from_r, from_w = os.pipe()  # the browser writes its fd 4, we read

        def pipes_at_3_and_4():
            # Out of the way first: a pipe may itself be fd 3 or 4.
            a = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
               "--disable-extensions", "--hide-scrollbars", "--mute-audio",
               "--user-data-dir=" + self.profile, "--remote-debugging-pipe",
               "--window-size=%d,%d" % (self.width, self.height), "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=pipes_at_3_and_4,
                                     pass_fds=(3, 4))
        os.close(to_r)
        os.close(from_w)
        try:
            self._attach()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            try:
                self._send("Browser.close", {}, session=False)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc and self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        return False

    def _send(self, method, params, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer within %d s" % self.timeout)
            ready, _, _ = select.select([self.from_r], [], [], left)
            if ready:
                chunk = os.read(self.from_r, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium exited: %s" % self._stderr())
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def _stderr(self):
        try:
            self.proc.wait(timeout=5)
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except subprocess.TimeoutExpired:
            return "(still running)"

    def call(self, method, params=None, session=True):
        want = self._send(method, params or {}, session)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._read_message(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise BrowserError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def _attach(self):
        targets = self.call("Target.getTargets", session=False)["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            page = {"targetId": self.call("Target.createTarget", {"url": "about:blank"},
                                          session=False)["targetId"]}
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                   "mobile": False})

    # ---- what the tests use

    def eval(self, expression):
        """The value of a JavaScript expression in the page (a promise awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError("%s: %s" % (expression[:80], d.get("exception", {}).get(
                "description", d.get("text"))))
        return r["result"].get("value")

    def open(self, url, ready, timeout=None):
        """Navigate and wait until `ready` (an expression) is truthy; returns it."""
        self.call("Page.navigate", {"url": url})
        return self.wait("document.readyState === 'complete' && (%s)" % ready, timeout, url)

    def wait(self, expression, timeout=None, what="the page"):
        """Poll until `expression` is truthy; returns its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except BrowserError:
                value = None  # a new document may not exist yet
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError("%s: not ready (%s) within the deadline" % (what, expression))

    def screenshot(self, scale=1.0):
        """The viewport as a PNG; scale < 1 makes it smaller (quicker to check)."""
        params = {"format": "png", "clip": {"x": 0, "y": 0, "width": self.width,
                                            "height": self.height, "scale": scale}}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])


# ---- PNG: enough of a decoder to tell a blank picture from a drawn one

def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BrowserError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise BrowserError("PNG of depth %d, color type %d" % (depth, color))
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def drawn_fraction(data, step=4):
    """The fraction of (sampled) pixels not of the picture's most common colour,
    and how many colours there are: a blank page has 0.0 and 1."""
    width, height, rows, bpp = png_pixels(data)
    counts = {}
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width, step):
            px = row[x * bpp:x * bpp + 3]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    return 1.0 - max(counts.values()) / total, len(counts)
