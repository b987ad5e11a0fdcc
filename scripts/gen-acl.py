#!/usr/bin/env python3
"""Firewall-style rule sets for `sluice bench --filters`, and traffic for them.

    scripts/gen-acl.py N SEED PACKETS OUT

writes OUT.txt (N rules, `name<TAB>expression`, as `sluice split` reads
them) and OUT.pcap (PACKETS Ethernet/IPv4 frames). Each rule is a
conjunction over the five-tuple, in the manner of ClassBench's ACL seeds:
a source and a destination prefix (wildcard, /8 ... /32, most often /24
and /32), TCP, UDP or any protocol, and a source and destination port
that is any, one well-known or random port, 0-1023, 1024-65535 or a short
random range. Each packet is drawn from a rule (early rules more often,
as real traffic favours some rules), with addresses and ports chosen
inside it; one in five gets a random source address. Seeded: the same
arguments give the same files.
"""
import random, struct, sys
n = int(sys.argv[1]); seed = int(sys.argv[2]); npk = int(sys.argv[3]); out = sys.argv[4]
R = random.Random(seed)
def pfx():
    l = R.choices([0, 8, 16, 20, 24, 28, 32], [10, 3, 10, 5, 25, 7, 40])[0]
    a = R.getrandbits(32) & (0xffffffff << (32 - l)) & 0xffffffff if l else 0
    a = (a & ~0xff000000) | (R.choice([10, 172, 192, 100, 45]) << 24) if l >= 8 else a
    a &= (0xffffffff << (32 - l)) & 0xffffffff if l else 0
    return a, l
def ip(a): return '.'.join(str((a >> s) & 255) for s in (24, 16, 8, 0))
def prange():
    k = R.choices(['any', 'exact', 'hi', 'lo', 'range'], [50, 30, 8, 4, 8])[0]
    if k == 'any': return (0, 65535)
    if k == 'exact':
        p = R.choice([80, 443, 22, 25, 53, 123, 8080, 3306, 5432, 161] + [R.randrange(1, 65536)]); return (p, p)
    if k == 'hi': return (1024, 65535)
    if k == 'lo': return (0, 1023)
    a = R.randrange(0, 65000); return (a, min(65535, a + R.randrange(1, 2000)))
rules = []
for i in range(n):
    proto = R.choices(['tcp', 'udp', 'any'], [60, 30, 10])[0]
    s, d = pfx(), pfx(); sp = prange() if proto != 'any' else (0, 65535); dp = prange() if proto != 'any' else (0, 65535)
    parts = []
    if s[1]: parts.append(f'src net {ip(s[0])}/{s[1]}' if s[1] < 32 else f'src host {ip(s[0])}')
    if d[1]: parts.append(f'dst net {ip(d[0])}/{d[1]}' if d[1] < 32 else f'dst host {ip(d[0])}')
    if proto != 'any': parts.append(proto)
    for w, (a, b) in (('src', sp), ('dst', dp)):
        if (a, b) == (0, 65535): continue
        parts.append(f'{w} port {a}' if a == b else f'{w} portrange {a}-{b}')
    if not parts: parts = ['ip']
    rules.append((s, d, proto, sp, dp, ' and '.join(parts)))
with open(out + '.txt', 'w') as f:
    for i, r in enumerate(rules): f.write(f'acl{i:06d}\t{r[5]}\n')
def csum(h):
    s = sum(struct.unpack('!10H', h)); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16); return (~s) & 0xffff
def inpfx(p):
    a, l = p
    return (a | (R.getrandbits(32) & ((1 << (32 - l)) - 1))) if l < 32 else a
pk = []
for j in range(npk):
    s, d, proto, sp, dp, _ = rules[int(n * R.random() ** 2)]  # skewed like real traffic
    src, dst = inpfx(s), inpfx(d)
    if R.random() < 0.2: src = R.getrandbits(32)
    pr = {'tcp': 6, 'udp': 17}.get(proto, R.choice([6, 17]))
    a, b = R.randint(*sp), R.randint(*dp)
    l4 = struct.pack('!HHIIBBHHH', a, b, 1, 0, 0x50, 0x10, 8192, 0, 0) if pr == 6 else struct.pack('!HHHH', a, b, 8, 0)
    tot = 20 + len(l4)
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, tot, j & 0xffff, 0, 64, pr, 0, src.to_bytes(4, 'big'), dst.to_bytes(4, 'big'))
    h = h[:10] + struct.pack('!H', csum(h)) + h[12:]
    fr = b'\x02\0\0\0\0\x01\x02\0\0\0\0\x02\x08\x00' + h + l4
    fr += b'\0' * max(0, 60 - len(fr))
    pk.append(fr)
with open(out + '.pcap', 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for j, fr in enumerate(pk): f.write(struct.pack('<IIII', j, 0, len(fr), len(fr)) + fr)
