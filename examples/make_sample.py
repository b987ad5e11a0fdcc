#!/usr/bin/env python3
"""Write examples/sample.pcap: a small, varied Ethernet capture for the README.

Hand-built packets (no network needed): ARP, DNS over UDP, an HTTP exchange
over TCP with its handshake, ICMP echo, an IPv6 ping, a VLAN-tagged packet
and an IPv4 fragment. Checksums are left zero; filters don't read them.
"""
import struct, sys

def eth(dst, src, etype, payload):
    return bytes.fromhex(dst.replace(':', '')) + bytes.fromhex(src.replace(':', '')) + struct.pack('!H', etype) + payload

def ip4(src, dst, proto, payload, ident=1, frag=0x4000):
    a = bytes(int(x) for x in src.split('.')); b = bytes(int(x) for x in dst.split('.'))
    return struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(payload), ident, frag, 64, proto, 0, a, b) + payload

def ip6(src, dst, nh, payload):
    import ipaddress
    return struct.pack('!IHBB', 0x60000000, len(payload), nh, 64) + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed + payload

def tcp(sport, dport, seq, ack, flags, data=b''):
    return struct.pack('!HHIIBBHHH', sport, dport, seq, ack, 0x50, flags, 65535, 0, 0) + data

def udp(sport, dport, data):
    return struct.pack('!HHHH', sport, dport, 8 + len(data), 0) + data

A, B, GW = '02:00:00:00:00:01', '02:00:00:00:00:02', '02:00:00:00:00:fe'
pkts = [
    eth('ff:ff:ff:ff:ff:ff', A, 0x0806, struct.pack('!HHBBH6s4s6s4s', 1, 0x0800, 6, 4, 1, bytes.fromhex('020000000001'), bytes([192,168,1,10]), bytes(6), bytes([192,168,1,1]))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '192.168.1.1', 17, udp(53000, 53, b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01'))),
    eth(A, GW, 0x0800, ip4('192.168.1.1', '192.168.1.10', 17, udp(53, 53000, b'\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00'))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '93.184.216.34', 6, tcp(40000, 80, 1, 0, 0x02))),
    eth(A, GW, 0x0800, ip4('93.184.216.34', '192.168.1.10', 6, tcp(80, 40000, 100, 2, 0x12))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '93.184.216.34', 6, tcp(40000, 80, 2, 101, 0x10))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '93.184.216.34', 6, tcp(40000, 80, 2, 101, 0x18, b'GET / HTTP/1.1\r\nHost: example.com\r\n\r\n'))),
    eth(A, GW, 0x0800, ip4('93.184.216.34', '192.168.1.10', 6, tcp(80, 40000, 101, 40, 0x18, b'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '8.8.8.8', 1, struct.pack('!BBHHH', 8, 0, 0, 7, 1) + b'ping')),
    eth(A, GW, 0x0800, ip4('8.8.8.8', '192.168.1.10', 1, struct.pack('!BBHHH', 0, 0, 0, 7, 1) + b'ping')),
    eth('33:33:00:00:00:01', A, 0x86dd, ip6('fe80::1', 'ff02::1', 58, struct.pack('!BBHHH', 128, 0, 0, 9, 1))),
    eth(GW, A, 0x8100, struct.pack('!HH', 10, 0x0800) + ip4('10.0.0.1', '10.0.0.2', 6, tcp(22, 50000, 5, 6, 0x10))),
    eth(GW, A, 0x0800, ip4('192.168.1.10', '10.1.1.1', 17, b'\x00' * 16, ident=99, frag=0x0002)),
    eth(B, A, 0x0800, ip4('192.168.1.10', '192.168.1.20', 6, tcp(443, 51000, 9, 10, 0x11))),
]
out = sys.argv[1] if len(sys.argv) > 1 else 'examples/sample.pcap'
with open(out, 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
    for i, p in enumerate(pkts):
        f.write(struct.pack('<IIII', 1700000000 + i, 1000 * i, len(p), len(p)) + p)
