#!/usr/bin/env python3
"""Write examples/rtsp.pcap: an RTSP session setting up RTP ports, then its streams.

FFPF §3.3.2 (dynamic ports): a SETUP request to port 554 announces the
client's RTP/RTCP ports (9000-9001), the 200 OK reply the server's
(5000-5001); then RTP and RTCP flow between them over UDP, one TCP
segment goes to the negotiated port (what Figure 7's FPL program looks for),
and unrelated traffic (other ports, other hosts) is mixed in.
Checksums are left zero; filters don't read them.
"""
import struct, sys

def eth(payload, etype=0x0800):
    return bytes.fromhex('020000000001') + bytes.fromhex('0200000000fe') + struct.pack('!H', etype) + payload

def ip4(src, dst, proto, payload):
    a = bytes(int(x) for x in src.split('.')); b = bytes(int(x) for x in dst.split('.'))
    return struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(payload), 1, 0x4000, 64, proto, 0, a, b) + payload

def tcp(sport, dport, data=b'', flags=0x18):
    return struct.pack('!HHIIBBHHH', sport, dport, 1, 1, 0x50, flags, 65535, 0, 0) + data

def udp(sport, dport, data):
    return struct.pack('!HHHH', sport, dport, 8 + len(data), 0) + data

C, S, X = '10.1.1.2', '10.1.1.1', '10.9.9.9'
setup = (b'SETUP rtsp://10.1.1.1/movie/track1 RTSP/1.0\r\nCSeq: 3\r\n'
         b'Transport: RTP/AVP;unicast;client_port=9000-9001\r\n\r\n')
reply = (b'RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: 12345678\r\n'
         b'Transport: RTP/AVP;unicast;client_port=9000-9001;server_port=5000-5001\r\n\r\n')
rtp = b'\x80\x60' + b'\x00' * 10 + b'media'
pkts = [
    eth(ip4(S, C, 17, udp(5000, 9000, rtp))),            # before the SETUP: not yet a stream
    eth(ip4(C, S, 6, tcp(40000, 554, setup))),
    eth(ip4(S, C, 6, tcp(554, 40000, reply))),
    eth(ip4(S, C, 17, udp(5000, 9000, rtp))),            # RTP
    eth(ip4(C, S, 17, udp(9001, 5001, b'\x80\xc9' + b'\x00' * 6))),  # RTCP receiver report
    eth(ip4(S, C, 6, tcp(5000, 9000, b'interleaved'))),  # TCP to the negotiated port
    eth(ip4(S, C, 17, udp(5000, 9002, rtp))),            # wrong client port
    eth(ip4(X, C, 17, udp(5000, 9000, rtp))),            # other host
    eth(ip4(C, '93.184.216.34', 6, tcp(40001, 80, b'GET / HTTP/1.1\r\n\r\n'))),
    eth(ip4(S, C, 17, udp(5000, 9000, rtp))),            # RTP
]
out = sys.argv[1] if len(sys.argv) > 1 else 'examples/rtsp.pcap'
with open(out, 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i, p in enumerate(pkts):
        f.write(struct.pack('<IIII', 1700000100 + i, 500 * i, len(p), len(p)) + p)
