#!/usr/bin/env python3
"""Counts the RoCE v2 packets (IPv4, UDP destination port 4791) that pass any netdev of this host, by the TOS
byte of their IP header, with an AF_PACKET socket on all interfaces (root only): the check, without tcpdump,
that a connection's traffic class is the DSCP on the wire. Prints "capturing" once the socket is open, runs until
SIGTERM or SIGINT (or for --seconds N), then prints one line per TOS value and netdev seen
("tos 104 dscp 26 ecn 0: 812 packets on eth0") and a total line."""
import collections
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ROCE_V2_PORT = 4791


def main():
    deadline = None
    if len(sys.argv) == 3 and sys.argv[1] == "--seconds":
        deadline = time.monotonic() + float(sys.argv[2])
    elif len(sys.argv) != 1:
        sys.exit("usage: roce-capture.py [--seconds N]")
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.settimeout(0.2)
    print("capturing", flush=True)
    seen = collections.Counter()
    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.append(True))
    while not stop and (deadline is None or time.monotonic() < deadline):
        try:
            frame, address = sock.recvfrom(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        # address: (ifname, proto, pkttype, hatype, hwaddr); frames on Ethernet-like netdevs (dummy, veth, lo)
        # start with the 14-byte Ethernet header
        if len(frame) < 14 + 20 + 8 or struct.unpack_from("!H", frame, 12)[0] != 0x0800:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP or len(ip) < ihl + 8:
            continue
        if struct.unpack_from("!H", ip, ihl + 2)[0] != ROCE_V2_PORT:
            continue
        seen[(ip[1], address[0])] += 1
    total = 0
    for (tos, ifname), count in sorted(seen.items()):
        print(f"tos {tos} dscp {tos >> 2} ecn {tos & 3}: {count} packets on {ifname}")
        total += count
    print(f"total: {total} RoCE v2 packets on the host's netdevs")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
