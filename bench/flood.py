#!/usr/bin/env python3
"""Unauthenticated connections against a linerate agent, for SECONDS:
IDLE connections held open without a byte (re-opened when the agent cuts
them), TRICKLE connections that send a byte a second, and CHURN new
connections a second opened and dropped at once. Loopback only: the
address must be on 127.0.0.0/8 or ::1.

    bench/flood.py 127.0.0.1:7470 600 [IDLE=300] [TRICKLE=16] [CHURN=50]

Prints one line at the end: connections opened and cut by the agent.
"""
import ipaddress
import socket
import sys
import threading
import time

addr, secs = sys.argv[1], float(sys.argv[2])
idle_n, trickle_n, churn_n = (int(a) for a in (sys.argv[3:6] + ["300", "16", "50"][len(sys.argv[3:6]):]))
host, port = addr.rsplit(":", 1)
host = host.strip("[]")
if not ipaddress.ip_address(host).is_loopback:
    sys.exit("flood.py: loopback addresses only")
target = (host, int(port))
end = time.monotonic() + secs
lock = threading.Lock()
counts = {"opened": 0, "cut": 0, "refused": 0}


def count(k):
    with lock:
        counts[k] += 1


def connect():
    try:
        s = socket.create_connection(target, timeout=2)
        count("opened")
        return s
    except OSError:
        count("refused")
        time.sleep(0.1)
        return None


def holder(send_every):
    """Keeps one connection open (idle, or a byte every send_every s)."""
    while time.monotonic() < end:
        s = connect()
        if s is None:
            continue
        s.settimeout(send_every or 1.0)
        try:
            while time.monotonic() < end:
                if send_every:
                    s.sendall(b"\0")
                try:
                    if s.recv(4096) == b"":
                        count("cut")
                        break
                except socket.timeout:
                    pass
        except OSError:
            count("cut")
        finally:
            s.close()
        # As an attacker re-opening every second would (not a hot loop:
        # that is a CPU flood, out of the agent's scope).
        time.sleep(1.0)


def churner():
    while time.monotonic() < end:
        s = connect()
        if s is not None:
            s.close()
        time.sleep(1.0 / churn_n)


threads = [threading.Thread(target=holder, args=(0,)) for _ in range(idle_n)]
threads += [threading.Thread(target=holder, args=(1.0,)) for _ in range(trickle_n)]
threads += [threading.Thread(target=churner)] if churn_n else []
for t in threads:
    t.daemon = True
    t.start()
for t in threads:
    t.join(max(0.0, end - time.monotonic()) + 5)
print(f"flood: {idle_n} idle, {trickle_n} trickling, {churn_n}/s churn for {secs:.0f} s: "
      f"{counts['opened']} connections opened, {counts['cut']} cut by the agent, {counts['refused']} refused")
